//! Starts a server binary on a free loopback port, waits until it answers,
//! and stops it again — on success, on error, on Ctrl-C and when dropped.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context};
use tokio::process::{Child, Command};

use super::{wait_ready, RunningTarget};
use crate::spec::{ProviderKind, TargetSpec};
use crate::target::TargetDriver;

pub struct ManagedProcess {
    child: Child,
    label: String,
}

impl ManagedProcess {
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// SIGTERM, then SIGKILL if it has not exited within 5 s.
    pub async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            // SAFETY: kill(2) with a pid we spawned and have not reaped yet.
            unsafe { libc::kill(pid as i32, libc::SIGTERM) };
            if tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await.is_ok() {
                return;
            }
            let _ = writeln!(std::io::stderr(), "{} did not exit 5s after SIGTERM; killing it", self.label);
        }
        let _ = self.child.kill().await;
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
    if !spec.args.iter().any(|a| a.contains("{port}")) {
        args.extend(driver.listen_args(port));
    }
    args.extend(spec.args.iter().map(|a| a.replace("{port}", &port.to_string())));
    let log_path = log_dir.join(format!("{name}.log"));
    let log = std::fs::File::create(&log_path).with_context(|| format!("cannot create {}", log_path.display()))?;
    let label = format!("target `{name}` ({command})");

    let mut cmd = Command::new(&command);
    cmd.args(&args).stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log).kill_on_drop(true);
    // SAFETY: prctl in the child between fork and exec only sets a flag. With it
    // the server dies with faultline even if faultline itself is SIGKILLed.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let child = cmd.spawn().map_err(|e| {
        let hint = match (e.kind(), debian_package(&command)) {
            (std::io::ErrorKind::NotFound, Some(package)) => {
                format!(" — `{command}` is not installed or not on PATH (on Debian: apt-get install {package})")
            }
            (std::io::ErrorKind::NotFound, None) => format!(" — `{command}` is not installed or not on PATH"),
            _ => String::new(),
        };
        anyhow!("{label}: cannot start `{command}`: {e}{hint}")
    })?;
    let mut process = ManagedProcess { child, label: label.clone() };

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
        }),
        Err(e) => {
            process.stop().await;
            Err(anyhow!(
                "{label}: {e:#}\ncommand: {command} {}\nlast lines of {}:\n{}",
                args.join(" "),
                log_path.display(),
                tail(&log_path, 15)
            ))
        }
    }
}

fn debian_package(command: &str) -> Option<&'static str> {
    match command {
        "redis-server" | "redis-sentinel" => Some("redis-server"),
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
