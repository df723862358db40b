//! Starts a server binary on a free loopback port, waits until it answers,
//! and stops it again — on success, on error, on Ctrl-C and when dropped.
//! The server runs in a process group of its own ([`super::process_group`]),
//! and stopping it stops everything in that group. It runs in a working
//! directory of its own (under the run directory), so whatever it writes
//! relative to it — an AOF, an RDB — is its alone and gone with the run; a
//! restart starts it again there, on the same port, so it finds its data.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context};
use tokio::process::{Child, Command};

use super::process_group::{self, Guardian};
use super::{wait_ready, RunningTarget};
use crate::spec::{ProviderKind, TargetSpec};
use faultline_kind::TargetDriver;

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
    /// SIGTERM to the whole group, then SIGKILL to what is left of it after
    /// [`GRACE`]; returns once the started process is reaped and no process
    /// of the group runs any more (children that outlive it included).
    pub async fn stop(mut self) {
        let _ = self.end(libc::SIGTERM).await;
    }

    /// Sends `sig` to the group (SIGKILL after [`GRACE`] if it is not gone
    /// by then) and waits until it is; says how it ended.
    async fn end(&mut self, sig: i32) -> anyhow::Result<String> {
        let started = std::time::Instant::now();
        let _ = process_group::signal(self.pgid, sig);
        let mut how = format!("process group {} gone after {}", self.pgid, signal_name(sig));
        if !self.wait_until_gone(GRACE).await {
            let _ = writeln!(
                std::io::stderr(),
                "{} did not exit {}s after {}; killing its process group",
                self.label,
                GRACE.as_secs(),
                signal_name(sig)
            );
            how = format!(
                "process group {} did not exit {}s after {}: killed",
                self.pgid,
                GRACE.as_secs(),
                signal_name(sig)
            );
            let _ = process_group::signal(self.pgid, libc::SIGKILL);
            if !self.wait_until_gone(Duration::from_secs(2)).await {
                let live = process_group::live_members(self.pgid);
                let _ = writeln!(
                    std::io::stderr(),
                    "{}: processes of group {} still there after SIGKILL: {live:?}",
                    self.label,
                    self.pgid,
                );
                anyhow::bail!("{}: processes of group {} still there after SIGKILL: {live:?}", self.label, self.pgid);
            }
        }
        self.stopped = true;
        self.guardian.dismiss();
        Ok(format!("{how} ({:.2}s)", started.elapsed().as_secs_f64()))
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

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        _ => "a signal",
    }
}

fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("cannot find a free loopback port")?;
    Ok(listener.local_addr()?.port())
}

/// Everything needed to start the server again the same way: same binary,
/// arguments, port and working directory (so it finds its own data).
struct Launch {
    command: String,
    args: Vec<String>,
    work_dir: PathBuf,
    log_path: PathBuf,
    uri: String,
    ready_timeout: Duration,
    driver: Arc<dyn TargetDriver>,
    label: String,
}

/// A process target's server, which a `restart` fault replaces while the
/// run holds the target.
pub struct ProcessSlot {
    /// Before `disk`: a slot dropped in a hurry kills the server before
    /// it unmounts the filesystem under it.
    current: tokio::sync::Mutex<Option<ManagedProcess>>,
    /// The current group's id, 0 while none runs.
    pgid: AtomicI32,
    launch: Launch,
    /// The fault filesystem under its working directory, when its faults need one.
    disk: std::sync::Mutex<Option<faultline_faultfs::Mounted>>,
}

/// Mounts the fault filesystem over `work_dir`, its files kept beside it
/// in `WORK_DIR.disk` (listed for teardown like the directory itself).
fn fault_disk(
    name: &str,
    work_dir: &Path,
    layer: faultline_faultfs::Layer,
) -> anyhow::Result<faultline_faultfs::Mounted> {
    let mut backing = work_dir.as_os_str().to_owned();
    backing.push(".disk");
    let backing = PathBuf::from(backing);
    let listed = faultline_kind::ledger::Resource::DataDirectory {
        target: name.to_string(),
        path: backing.display().to_string(),
    };
    faultline_kind::ledger::record(listed)?;
    std::fs::create_dir_all(&backing).with_context(|| format!("cannot create {}", backing.display()))?;
    faultline_faultfs::mount(&backing, work_dir, name, layer)
        .with_context(|| format!("target `{name}`: cannot mount the fault filesystem over {}", work_dir.display()))
}

impl ProcessSlot {
    pub fn process_group(&self) -> Option<i32> {
        Some(self.pgid.load(Ordering::SeqCst)).filter(|p| *p > 0)
    }

    pub fn work_dir(&self) -> &Path {
        &self.launch.work_dir
    }

    /// The program it runs, as given (found on PATH when it has no `/`).
    pub fn command(&self) -> &str {
        &self.launch.command
    }

    /// Stops the server, for good: the target is stopping; then the
    /// filesystem under it, if any, is unmounted (an error when it could
    /// not be).
    pub async fn stop(&self) -> Result<(), String> {
        let current = self.current.lock().await.take();
        self.pgid.store(0, Ordering::SeqCst);
        if let Some(p) = current {
            p.stop().await;
        }
        match self.disk().take().map(|disk| disk.unmount()) {
            Some(Err(e)) => Err(format!("{}: unmounting its fault filesystem: {e}", self.launch.label)),
            _ => Ok(()),
        }
    }

    /// The fault filesystem under the server's data, when it runs on one.
    pub fn disk(&self) -> std::sync::MutexGuard<'_, Option<faultline_faultfs::Mounted>> {
        self.disk.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Ends the server with `sig` (SIGKILL: a crash; SIGTERM: a clean
    /// shutdown, SIGKILL after a grace period) and waits until its whole
    /// process group is gone.
    pub async fn end(&self, sig: i32) -> anyhow::Result<String> {
        let mut current = self.current.lock().await;
        let Some(process) = current.as_mut() else { anyhow::bail!("{} is not running", self.launch.label) };
        let ended = process.end(sig).await;
        self.pgid.store(0, Ordering::SeqCst);
        ended
    }

    /// Starts the server again on the same port and working directory and
    /// waits until the driver's `ready` answers.
    pub async fn start_again(&self) -> anyhow::Result<String> {
        let mut current = self.current.lock().await;
        if let Some(mut old) = current.take() {
            // Whatever is left of the old group goes first: one server per port and directory.
            if !old.stopped {
                old.end(libc::SIGKILL).await?;
            }
        }
        let started = std::time::Instant::now();
        let process = spawn(&self.launch)?;
        self.pgid.store(process.pgid, Ordering::SeqCst);
        let process = current.insert(process);
        let server = ready(&self.launch, process).await?;
        Ok(format!(
            "started again as pid {} at {}; the probe answered after {:.2}s ({})",
            process.pgid,
            self.launch.uri,
            started.elapsed().as_secs_f64(),
            server.version
        ))
    }
}

/// Where a process target keeps its files.
pub struct Dirs<'a> {
    /// Its working directory: `{target_dir}`, its own, created empty.
    pub work_dir: &'a Path,
    /// Put it on the fault filesystem (its files in `WORK_DIR.disk`), cached
    /// so, for faults on the disk under it.
    pub fault_disk: Option<faultline_faultfs::Layer>,
    /// The run directory: `{run_dir}`.
    pub run_dir: &'a Path,
    pub log_path: &'a Path,
}

pub async fn start(
    name: &str,
    spec: &TargetSpec,
    driver: Arc<dyn TargetDriver>,
    dirs: &Dirs<'_>,
) -> anyhow::Result<RunningTarget> {
    let port = free_port()?;
    let fill = |text: &str| {
        text.replace("{port}", &port.to_string())
            .replace("{target_dir}", &dirs.work_dir.display().to_string())
            .replace("{run_dir}", &dirs.run_dir.display().to_string())
    };
    let command = fill(spec.command.as_deref().unwrap_or_else(|| driver.default_command()));
    let mut args: Vec<String> = Vec::new();
    // Listed for `faultline teardown` should this run be killed.
    let data = faultline_kind::ledger::Resource::DataDirectory {
        target: name.to_string(),
        path: dirs.work_dir.display().to_string(),
    };
    faultline_kind::ledger::record(data)?;
    std::fs::create_dir_all(dirs.work_dir).with_context(|| format!("cannot create {}", dirs.work_dir.display()))?;
    let disk = match dirs.fault_disk {
        Some(layer) => Some(fault_disk(name, dirs.work_dir, layer)?),
        None => None,
    };
    if !spec.args.iter().any(|a| a.contains("{port}")) {
        args.extend(driver.listen_args(port, dirs.work_dir));
    }
    args.extend(spec.args.iter().map(|a| fill(a)));
    let launch = Launch {
        label: format!("target `{name}` ({command})"),
        uri: driver.uri("127.0.0.1", port),
        command,
        args,
        work_dir: dirs.work_dir.to_path_buf(),
        log_path: dirs.log_path.to_path_buf(),
        ready_timeout: spec.ready_timeout.0,
        driver,
    };
    let mut process = spawn(&launch)?;
    let target_driver = Arc::clone(&launch.driver);
    match ready(&launch, &mut process).await {
        Ok(server) => Ok(RunningTarget {
            name: name.to_string(),
            uri: launch.uri.clone(),
            server,
            provider: ProviderKind::Process,
            port: Some(port),
            process: Some(Arc::new(ProcessSlot {
                pgid: AtomicI32::new(process.pgid),
                current: tokio::sync::Mutex::new(Some(process)),
                launch,
                disk: std::sync::Mutex::new(disk),
            })),
            docker: None,
            driver: target_driver,
            fault_filesystem: None,
        }),
        Err(e) => {
            process.stop().await;
            Err(e)
        }
    }
}

/// Starts the server in its own process group, with a guardian.
fn spawn(launch: &Launch) -> anyhow::Result<ManagedProcess> {
    let Launch { command, args, label, .. } = launch;
    // Appended to: a restarted server's lines follow the first one's.
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&launch.log_path)
        .with_context(|| format!("cannot create {}", launch.log_path.display()))?;
    let mut cmd = Command::new(command);
    cmd.args(args)
        .current_dir(&launch.work_dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .kill_on_drop(true);
    // SAFETY: between fork and exec the child only calls setsid and prctl.
    unsafe {
        cmd.pre_exec(process_group::detach_into_own_group);
    }
    let child = cmd.spawn().map_err(|e| {
        let hint = match (e.kind(), faultline_spec::host::install_hint(command)) {
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
    Ok(ManagedProcess { child, pgid, guardian, stopped: false, label: label.clone() })
}

/// Waits until the driver's `ready` answers; the error shows the command and
/// the end of the server's log.
async fn ready(launch: &Launch, process: &mut ManagedProcess) -> anyhow::Result<faultline_kind::ServerInfo> {
    let ready =
        wait_ready(launch.driver.as_ref(), &launch.uri, launch.ready_timeout, || match process.child.try_wait() {
            Ok(Some(status)) => Err(anyhow!("exited with {status} before it was ready")),
            _ => Ok(()),
        })
        .await;
    ready.map_err(|e| {
        anyhow!(
            "{}: {e:#}\ncommand: {}\nlast lines of {}:\n{}",
            launch.label,
            crate::command_line::shown(std::iter::once(&launch.command).chain(&launch.args)),
            launch.log_path.display(),
            tail(&launch.log_path, 15)
        )
    })
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    let shown = all[all.len().saturating_sub(lines)..].join("\n");
    if shown.is_empty() {
        "  (empty)".into()
    } else {
        shown
    }
}
