//! Starts a server binary on a free loopback port, waits until it answers,
//! and stops it again — on success, on error, on Ctrl-C and when dropped.
//! The server runs in a process group of its own ([`super::process_group`]),
//! and stopping it stops everything in that group.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context};
use tokio::process::{Child, Command};

use super::process_group::{self, Guardian};
use super::{wait_ready, RunningTarget};
use crate::spec::{ProviderKind, TargetSpec};
use crate::target::TargetDriver;

pub struct ManagedProcess {
    child: Child,
    /// The group's id: the pid of the process faultline started.
    pgid: i32,
    guardian: Guardian,
    /// The group has been stopped and emptied: nothing to kill on drop.
    stopped: bool,
    label: String,
}

/// How long the group gets to exit after SIGTERM before SIGKILL.
const GRACE: Duration = Duration::from_secs(5);

impl ManagedProcess {
    pub fn process_group(&self) -> i32 {
        self.pgid
    }

    /// SIGTERM to the whole group, then SIGKILL to what is left of it after
    /// [`GRACE`]; returns once the started process is reaped and no process
    /// of the group runs any more (children that outlive it included).
    pub async fn stop(mut self) {
        let _ = process_group::signal(self.pgid, libc::SIGTERM);
        if !self.wait_until_gone(GRACE).await {
            let _ = writeln!(
                std::io::stderr(),
                "{} did not exit {}s after SIGTERM; killing its process group",
                self.label,
                GRACE.as_secs()
            );
            let _ = process_group::signal(self.pgid, libc::SIGKILL);
            if !self.wait_until_gone(Duration::from_secs(2)).await {
                let _ = writeln!(
                    std::io::stderr(),
                    "{}: processes of group {} still there after SIGKILL: {:?}",
                    self.label,
                    self.pgid,
                    process_group::live_members(self.pgid)
                );
                return;
            }
        }
        self.stopped = true;
        self.guardian.dismiss();
    }

    /// Reaps the leader and waits for the rest of the group, up to `limit`.
    async fn wait_until_gone(&mut self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let leader_reaped = matches!(self.child.try_wait(), Ok(Some(_)) | Err(_));
            if leader_reaped && process_group::live_members(self.pgid).is_empty() {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for ManagedProcess {
    /// Dropped without [`ManagedProcess::stop`] (a panic, an abandoned
    /// start): no time for a grace period, kill the whole group now.
    fn drop(&mut self) {
        if !self.stopped {
            let _ = process_group::signal(self.pgid, libc::SIGKILL);
        }
    }
}

fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("cannot find a free loopback port")?;
    Ok(listener.local_addr()?.port())
}

pub async fn start(
    name: &str,
    spec: &TargetSpec,
    driver: Arc<dyn TargetDriver>,
    log_dir: &Path,
) -> anyhow::Result<RunningTarget> {
    let command = spec.command.clone().unwrap_or_else(|| driver.default_command().to_string());
    let port = free_port()?;
    let mut args: Vec<String> = Vec::new();
    // The target's own directory, under the run's: what the server writes
    // stays with the run, apart from every other target's.
    let data_dir = log_dir.parent().unwrap_or(log_dir).join("targets").join(name);
    std::fs::create_dir_all(&data_dir).with_context(|| format!("cannot create {}", data_dir.display()))?;
    if !spec.args.iter().any(|a| a.contains("{port}")) {
        args.extend(driver.listen_args(port, &data_dir));
    }
    args.extend(spec.args.iter().map(|a| a.replace("{port}", &port.to_string())));
    let log_path = log_dir.join(format!("{name}.log"));
    let log = std::fs::File::create(&log_path).with_context(|| format!("cannot create {}", log_path.display()))?;
    let label = format!("target `{name}` ({command})");

    let mut cmd = Command::new(&command);
    cmd.args(&args).stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log).kill_on_drop(true);
    // SAFETY: between fork and exec the child only calls setsid and prctl.
    unsafe {
        cmd.pre_exec(process_group::detach_into_own_group);
    }
    let child = cmd.spawn().map_err(|e| {
        let hint = match (e.kind(), install_hint(&command)) {
            (std::io::ErrorKind::NotFound, Some(how)) => {
                format!(" — `{command}` is not installed or not on PATH ({how})")
            }
            (std::io::ErrorKind::NotFound, None) => format!(" — `{command}` is not installed or not on PATH"),
            _ => String::new(),
        };
        anyhow!("{label}: cannot start `{command}`: {e}{hint}")
    })?;
    let pgid = child.id().context("the started process has no pid")? as i32;
    // If the guardian cannot start, the group would be left behind by a
    // SIGKILLed faultline: refuse rather than run without it.
    let guardian = match Guardian::watch(pgid) {
        Ok(g) => g,
        Err(e) => {
            let _ = process_group::signal(pgid, libc::SIGKILL);
            return Err(anyhow!("{label}: cannot start the guardian of its process group: {e}"));
        }
    };
    let mut process = ManagedProcess { child, pgid, guardian, stopped: false, label: label.clone() };

    let uri = driver.uri("127.0.0.1", port);
    let ready = wait_ready(driver.as_ref(), &uri, spec.ready_timeout.0, || match process.child.try_wait() {
        Ok(Some(status)) => Err(anyhow!("exited with {status} before it was ready")),
        _ => Ok(()),
    })
    .await;
    match ready {
        Ok(server) => Ok(RunningTarget {
            name: name.to_string(),
            uri,
            server,
            provider: ProviderKind::Process,
            process: Some(process),
            docker: None,
            driver,
        }),
        Err(e) => {
            process.stop().await;
            Err(anyhow!(
                "{label}: {e:#}\ncommand: {}\nlast lines of {}:\n{}",
                crate::command_line::shown(std::iter::once(&command).chain(&args)),
                log_path.display(),
                tail(&log_path, 15)
            ))
        }
    }
}

/// How to install a server faultline knows, for an error that says it is missing.
fn install_hint(command: &str) -> Option<&'static str> {
    match command {
        "redis-server" | "redis-sentinel" => Some("on Debian: apt-get install redis-server"),
        "secantusd-rs" => Some("scripts/install-deps.sh installs it (cargo install secantus-mdb)"),
        _ => None,
    }
}

fn tail(path: &PathBuf, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    let shown = all[all.len().saturating_sub(lines)..].join("\n");
    if shown.is_empty() {
        "  (empty)".into()
    } else {
        shown
    }
}
