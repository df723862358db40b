//! Starts a server binary on a free loopback port, waits until it answers,
//! and stops it again — on success, on error, on Ctrl-C and when dropped.
//! The server runs in a process group of its own ([`super::process_group`]),
//! and stopping it stops everything in that group. It runs in a working
//! directory of its own (under the run directory), so whatever it writes
//! relative to it — an AOF, an RDB — is its alone and gone with the run; a
//! restart starts it again there, on the same port, so it finds its data.
//!
//! A kind whose members can share a host (etcd: `TopologyKind::shared_host`)
//! gets `members` of them side by side: each its own process group,
//! loopback ports and directory (`targets/INSTANCE/kv-i`), all spawned
//! before any is waited for (a member alone has no quorum to be ready
//! with). [`ProcessMembers`] holds them, one slot for a single server,
//! and answers as a [`MemberSet`] for roles and selectors.

pub mod faults;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context};
use tokio::process::{Child, Command};

use super::process_group::{self, Guardian};
use super::{wait_ready, RunningTarget, Started};
use crate::spec::{FaultSpec, ProviderKind, Spec, TargetSpec};
use faultline_kind::fault::Applied;
use faultline_kind::topology::{MemberAddress, MemberPlan, MemberSet, TopologyKind};
use faultline_kind::TargetDriver;
use faultline_spec::selector::member_name;

/// How a process group ended: what was done, and whether it took SIGKILL
/// where another signal was sent.
struct Ended {
    how: String,
    forced: bool,
}

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
    /// of the group runs any more (children that outlive it included). Says
    /// so when it took SIGKILL, or when not even that emptied the group.
    pub async fn stop(mut self) -> Result<(), String> {
        match self.end(libc::SIGTERM).await {
            Ok(Ended { forced: false, .. }) => Ok(()),
            Ok(Ended { how, forced: true }) => Err(format!("{}: {how}", self.label)),
            Err(e) => Err(format!("{e:#}")),
        }
    }

    /// Sends `sig` to the group (SIGKILL after [`GRACE`] if it is not gone
    /// by then) and waits until it is; says how it ended.
    async fn end(&mut self, sig: i32) -> anyhow::Result<Ended> {
        let started = std::time::Instant::now();
        let _ = process_group::signal(self.pgid, sig);
        let mut how = format!("process group {} gone after {}", self.pgid, signal_name(sig));
        let forced = !self.wait_until_gone(GRACE).await;
        if forced {
            how = format!(
                "process group {} did not exit {}s after {}: killed",
                self.pgid,
                GRACE.as_secs(),
                signal_name(sig)
            );
            let _ = process_group::signal(self.pgid, libc::SIGKILL);
            if !self.wait_until_gone(Duration::from_secs(2)).await {
                let live = process_group::live_members(self.pgid);
                anyhow::bail!("{}: processes of group {} still there after SIGKILL: {live:?}", self.label, self.pgid);
            }
        }
        self.stopped = true;
        self.guardian.dismiss();
        Ok(Ended { how: format!("{how} ({:.2}s)", started.elapsed().as_secs_f64()), forced })
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

/// `n` distinct free loopback ports: every listener is held until all are
/// found, so no two are the same.
fn free_ports(n: usize) -> anyhow::Result<Vec<u16>> {
    let listeners = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").context("cannot find a free loopback port"))
        .collect::<anyhow::Result<Vec<_>>>()?;
    listeners.iter().map(|l| Ok(l.local_addr()?.port())).collect()
}

/// Everything needed to start the server again the same way: same binary,
/// arguments, port and working directory (so it finds its own data).
struct Launch {
    /// The member's name (`kv-1`), or the target's for a single server.
    member: String,
    port: u16,
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

    /// The member's name (`kv-1`), or the target's for a single server.
    pub fn member(&self) -> &str {
        &self.launch.member
    }

    /// Stops the server, for good: the target is stopping; then the
    /// filesystem under it, if any, is unmounted. An error, naming the
    /// server, when it took SIGKILL or the filesystem could not go.
    pub async fn stop(&self) -> Result<(), String> {
        let current = self.current.lock().await.take();
        self.pgid.store(0, Ordering::SeqCst);
        let stopped = match current {
            Some(p) => p.stop().await,
            None => Ok(()),
        };
        let unmounted = match self.disk().take().map(|disk| disk.unmount()) {
            Some(Err(e)) => Err(format!("{}: unmounting its fault filesystem: {e}", self.launch.label)),
            _ => Ok(()),
        };
        match (stopped, unmounted) {
            (Err(a), Err(b)) => Err(format!("{a}; {b}")),
            (stopped, unmounted) => stopped.and(unmounted),
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
        ended.map(|e| e.how)
    }

    /// Starts the server again on the same port and working directory,
    /// without waiting for it: members that need each other (a quorum)
    /// are all spawned before any is waited for.
    pub async fn spawn_again(&self) -> anyhow::Result<()> {
        let mut current = self.current.lock().await;
        if let Some(mut old) = current.take() {
            // Whatever is left of the old group goes first: one server per port and directory.
            if !old.stopped {
                old.end(libc::SIGKILL).await?;
            }
        }
        let process = spawn(&self.launch)?;
        self.pgid.store(process.pgid, Ordering::SeqCst);
        *current = Some(process);
        Ok(())
    }

    /// Waits until the server spawned again answers the driver's `ready`;
    /// says how long since `started`.
    pub async fn ready_again(&self, started: std::time::Instant) -> anyhow::Result<String> {
        let server = self.wait_ready().await?;
        Ok(format!(
            "started again as pid {} at {}; the probe answered after {:.2}s ({})",
            self.pgid.load(Ordering::SeqCst),
            self.launch.uri,
            started.elapsed().as_secs_f64(),
            server.version
        ))
    }

    /// Waits until the server spawned answers the driver's `ready`.
    async fn wait_ready(&self) -> anyhow::Result<faultline_kind::ServerInfo> {
        let mut current = self.current.lock().await;
        let Some(process) = current.as_mut() else { anyhow::bail!("{} is not running", self.launch.label) };
        ready(&self.launch, process).await
    }
}

/// A process target's servers: one, or a kind's members side by side.
pub struct ProcessMembers {
    target: String,
    /// The target's own directory (`{target_dir}`); members' are inside it.
    work_dir: PathBuf,
    /// The program, as given (found on PATH when it has no `/`).
    command: String,
    slots: Vec<Arc<ProcessSlot>>,
    /// How to ask a member its role: the kind's, when its members share a host.
    kind: Option<Arc<dyn TopologyKind>>,
    driver: Arc<dyn TargetDriver>,
}

impl ProcessMembers {
    /// Every member's slot, by position (one for a single server).
    pub fn slots(&self) -> &[Arc<ProcessSlot>] {
        &self.slots
    }

    /// Stops every member, one after another from the last; says, naming
    /// each, what could not be undone or had to be forced. Not all at once: an etcd leader stopped beside
    /// its peers hands leadership to one of them that is stopping too, and
    /// waits out the transfer (5 s); alone, with its peers gone, it stops
    /// at once, and one stopped while they run hands over in milliseconds.
    #[must_use]
    pub async fn stop(&self) -> Vec<String> {
        let mut failed = Vec::new();
        for slot in self.slots.iter().rev() {
            failed.extend(slot.stop().await.err());
        }
        failed
    }
}

impl ProcessMembers {
    /// The members as a [`MemberSet`] (roles, selectors), for a kind's
    /// members; None for a single server.
    pub fn member_set(self: &Arc<Self>) -> Option<Arc<dyn MemberSet>> {
        let kind = Arc::clone(self.kind.as_ref()?);
        Some(Arc::new(OnLoopback { members: Arc::clone(self), kind }))
    }
}

/// Process members as a [`MemberSet`]: each on its own loopback port.
struct OnLoopback {
    members: Arc<ProcessMembers>,
    kind: Arc<dyn TopologyKind>,
}

#[async_trait::async_trait]
impl MemberSet for OnLoopback {
    fn target(&self) -> &str {
        &self.members.target
    }

    fn names(&self) -> Vec<String> {
        self.members.slots.iter().map(|s| s.launch.member.clone()).collect()
    }

    async fn address(&self, index: usize) -> anyhow::Result<(String, u16)> {
        let slot = self.members.slots.get(index).ok_or_else(|| anyhow!("`{}` has no member {index}", self.target()))?;
        Ok((LOOPBACK.to_string(), slot.launch.port))
    }

    fn kind(&self) -> &dyn TopologyKind {
        self.kind.as_ref()
    }

    fn uri(&self, host: &str, port: u16) -> String {
        self.members.driver.uri(host, port)
    }
}

/// Where process targets listen, and where faultline reaches them.
const LOOPBACK: &str = "127.0.0.1";

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

/// Starts the target's server, or with `shared` (a kind whose members
/// share a host, and the spec's `members`) every member, and waits until
/// each answers.
pub async fn start(
    name: &str,
    spec: &TargetSpec,
    driver: Arc<dyn TargetDriver>,
    dirs: &Dirs<'_>,
    shared: Option<Arc<dyn TopologyKind>>,
) -> anyhow::Result<RunningTarget> {
    // Listed for `faultline teardown` should this run be killed.
    let data = faultline_kind::ledger::Resource::DataDirectory {
        target: name.to_string(),
        path: dirs.work_dir.display().to_string(),
    };
    faultline_kind::ledger::record(data)?;
    std::fs::create_dir_all(dirs.work_dir).with_context(|| format!("cannot create {}", dirs.work_dir.display()))?;
    let (launches, addresses) = plan(name, spec, &driver, dirs, shared.as_deref())?;
    let mut slots = Vec::new();
    let server = match start_slots(launches, dirs.fault_disk, &mut slots).await {
        Ok(server) => server,
        Err(e) => {
            let left = stop_all(&slots).await;
            return Err(match left.is_empty() {
                true => e,
                false => e.context(format!("stopping what had started: {}", left.join("; "))),
            });
        }
    };
    let hosts: Vec<String> = addresses.iter().map(|a| format!("{}:{}", a.host, a.port)).collect();
    let uri = shared.as_ref().and_then(|k| k.group_uri(&hosts)).unwrap_or_else(|| slots[0].launch.uri.clone());
    let members = ProcessMembers {
        target: name.to_string(),
        work_dir: dirs.work_dir.to_path_buf(),
        command: slots[0].launch.command.clone(),
        slots,
        kind: shared,
        driver: Arc::clone(&driver),
    };
    Ok(RunningTarget {
        name: name.to_string(),
        uri,
        server,
        provider: ProviderKind::Process,
        port: Some(addresses[0].port),
        started: Box::new(Arc::new(members)),
        driver,
        fault_filesystem: None,
    })
}

/// The process provider's part of a running target: its members.
#[async_trait::async_trait]
impl Started for Arc<ProcessMembers> {
    async fn stop(self: Box<Self>) -> Vec<String> {
        ProcessMembers::stop(&self).await
    }

    async fn apply(&self, target: &str, fault: &FaultSpec, spec: &Spec) -> anyhow::Result<Applied> {
        faults::apply(target, self, fault, spec).await
    }

    fn member_set(&self) -> Option<Arc<dyn MemberSet>> {
        ProcessMembers::member_set(self)
    }

    fn pid(&self) -> Option<i32> {
        self.slots.first()?.process_group()
    }

    fn process_groups(&self) -> Vec<i32> {
        self.slots.iter().filter_map(|s| s.process_group()).collect()
    }

    fn work_dir(&self) -> Option<&Path> {
        Some(&self.work_dir)
    }

    fn program(&self) -> Option<&str> {
        Some(&self.command)
    }
}

/// How each member starts: its name, free ports, directory, command line
/// and log (one server: the target's own name, directory and log).
fn plan(
    name: &str,
    spec: &TargetSpec,
    driver: &Arc<dyn TargetDriver>,
    dirs: &Dirs<'_>,
    shared: Option<&dyn TopologyKind>,
) -> anyhow::Result<(Vec<Launch>, Vec<MemberAddress>)> {
    let written_command = spec.command.as_deref().unwrap_or_else(|| driver.default_command());
    let own_port = spec.args.iter().any(|a| a.contains("{port}"));
    let members: Vec<String> = match shared {
        Some(_) => (0..spec.members.unwrap_or(1) as usize).map(|i| member_name(name, i)).collect(),
        None => vec![name.to_string()],
    };
    let peer_ports = shared.and_then(|k| k.shared_host()).is_some_and(|h| h.peer_port);
    let mut ports = free_ports(members.len() * if peer_ports { 2 } else { 1 })?.into_iter();
    let addresses: Vec<MemberAddress> = members
        .iter()
        .map(|_| MemberAddress {
            host: LOOPBACK.to_string(),
            port: ports.next().unwrap_or_default(),
            peer_port: if peer_ports { ports.next() } else { None },
        })
        .collect();
    let mut launches = Vec::new();
    for (index, (member, address)) in members.iter().zip(&addresses).enumerate() {
        let work_dir = match shared {
            Some(_) => dirs.work_dir.join(member),
            None => dirs.work_dir.to_path_buf(),
        };
        std::fs::create_dir_all(&work_dir).with_context(|| format!("cannot create {}", work_dir.display()))?;
        let member_fills = shared.is_some().then_some((member.as_str(), index, address.peer_port));
        let fills = Fills { port: address.port, member: member_fills, work_dir: &work_dir, run_dir: dirs.run_dir };
        let command = fill(written_command, &fills);
        let mut args: Vec<String> = Vec::new();
        match (shared, own_port) {
            (_, true) => {}
            (None, false) => args.extend(driver.listen_args(address.port, &work_dir)),
            (Some(kind), false) => args.extend(kind.member_args(&MemberPlan {
                index,
                port: address.port,
                names: &members,
                addresses: &addresses,
                listen: LOOPBACK,
                data_dir: Some(&work_dir.display().to_string()),
                target: name,
            })),
        }
        args.extend(spec.args.iter().map(|a| fill(a, &fills)));
        let (label, log_path) = match shared {
            Some(_) => (format!("target `{name}` member `{member}` ({command})"), member_log(dirs.log_path, member)),
            None => (format!("target `{name}` ({command})"), dirs.log_path.to_path_buf()),
        };
        launches.push(Launch {
            member: member.clone(),
            port: address.port,
            label,
            uri: driver.uri(LOOPBACK, address.port),
            command,
            args,
            work_dir,
            log_path,
            ready_timeout: spec.ready_timeout.0,
            driver: Arc::clone(driver),
        });
    }
    Ok((launches, addresses))
}

/// Mounts each member's disk (when its faults need one) and spawns it,
/// every one before any is waited for; then waits for all at once. Each
/// slot joins `slots` before its process starts, so the caller stops
/// whatever did start when this fails. The first member's server answers.
async fn start_slots(
    launches: Vec<Launch>,
    fault_disk: Option<faultline_faultfs::Layer>,
    slots: &mut Vec<Arc<ProcessSlot>>,
) -> anyhow::Result<faultline_kind::ServerInfo> {
    for launch in launches {
        let disk = match fault_disk {
            Some(layer) => Some(self::fault_disk(&launch.member, &launch.work_dir, layer)?),
            None => None,
        };
        let slot = Arc::new(ProcessSlot {
            current: tokio::sync::Mutex::new(None),
            pgid: AtomicI32::new(0),
            launch,
            disk: std::sync::Mutex::new(disk),
        });
        slots.push(Arc::clone(&slot));
        slot.spawn_again().await?;
    }
    // The first that fails ends the wait: the others may wait for it in vain.
    let mut servers = futures::future::try_join_all(slots.iter().map(|s| s.wait_ready())).await?;
    Ok(servers.swap_remove(0))
}

/// Stops every slot that was started (an abandoned start); says what
/// could not be undone or had to be forced.
async fn stop_all(slots: &[Arc<ProcessSlot>]) -> Vec<String> {
    let stopped = futures::future::join_all(slots.iter().map(|s| s.stop())).await;
    stopped.into_iter().filter_map(Result::err).collect()
}

/// A member's log beside the target's: `logs/kv.log` → `logs/kv.kv-1.log`.
fn member_log(target_log: &Path, member: &str) -> PathBuf {
    target_log.with_extension(format!("{member}.log"))
}

/// What fills a process target's placeholders: `{port}`, `{target_dir}`
/// (a member's own directory), `{run_dir}`, and for a kind's members
/// `{name}` (`kv-1`), `{index}` and `{peer_port}`.
struct Fills<'a> {
    port: u16,
    /// The member's name, position and peer port (None: one server).
    member: Option<(&'a str, usize, Option<u16>)>,
    work_dir: &'a Path,
    run_dir: &'a Path,
}

fn fill(text: &str, f: &Fills) -> String {
    let mut text = text
        .replace("{port}", &f.port.to_string())
        .replace("{target_dir}", &f.work_dir.display().to_string())
        .replace("{run_dir}", &f.run_dir.display().to_string());
    if let Some((name, index, peer_port)) = f.member {
        text = text
            .replace("{name}", name)
            .replace("{index}", &index.to_string())
            .replace("{peer_port}", &peer_port.map(|p| p.to_string()).unwrap_or_default());
    }
    text
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

#[cfg(test)]
mod tests {
    use super::*;
    use faultline_kind::{Connection, ServerInfo};
    use faultline_model::roles::Role;

    /// A kind whose members share a host: `sleep` processes, ready as soon
    /// as they run, each told its own ports on its command line.
    struct Sleepers;

    crate::test_kind::kind_info_for_tests!(Sleepers, command: "sleep", supports: |_| true);

    #[async_trait::async_trait]
    impl TargetDriver for Sleepers {
        fn listen_args(&self, _: u16, _: &Path) -> Vec<String> {
            vec!["600".into()]
        }
        fn uri(&self, host: &str, port: u16) -> String {
            format!("sleep://{host}:{port}")
        }
        async fn ready(&self, _: &str) -> anyhow::Result<ServerInfo> {
            Ok(ServerInfo { version: "sleep".into() })
        }
        async fn connect(&self, _: &str, _: Arc<faultline_kind::workload::Workload>) -> anyhow::Result<Connection> {
            anyhow::bail!("sleepers take no load")
        }
        async fn read_values(&self, _: &str, keys: &[Vec<u8>]) -> anyhow::Result<Vec<Option<Vec<u8>>>> {
            Ok(vec![None; keys.len()])
        }
    }

    #[async_trait::async_trait]
    impl TopologyKind for Sleepers {
        fn container_port(&self) -> u16 {
            1
        }
        /// `sleep 600.PORT PEER_PORT0`: a duration `sleep` takes (it sums
        /// its arguments), naming the member's ports.
        fn member_args(&self, m: &MemberPlan) -> Vec<String> {
            let me = &m.addresses[m.index];
            vec![format!("600.{}", me.port), format!("{}", me.peer_port.unwrap_or_default())]
        }
        fn shared_host(&self) -> Option<faultline_kind::topology::SharedHost> {
            Some(faultline_kind::topology::SharedHost { default_members: 3, peer_port: true })
        }
        async fn role(&self, _: &str) -> anyhow::Result<Role> {
            Ok(Role::Replica { linked: true })
        }
    }

    #[tokio::test]
    async fn members_run_side_by_side_each_on_its_own_ports_and_directory_and_stop_together() {
        let dir = tempfile::tempdir().unwrap();
        let spec: TargetSpec = serde_yaml_ng::from_str("kind: sleepers\nprovider: process\nmembers: 3\n").unwrap();
        let work_dir = dir.path().join("targets").join("kv");
        let log_path = dir.path().join("kv.log");
        let dirs = Dirs { work_dir: &work_dir, fault_disk: None, run_dir: dir.path(), log_path: &log_path };
        let target = start("kv", &spec, Arc::new(Sleepers), &dirs, Some(Arc::new(Sleepers))).await.unwrap();

        let groups = target.provided().process_groups();
        assert_eq!(groups.len(), 3, "{groups:?}");
        let set = target.provided().member_set().expect("members answer as a member set");
        assert_eq!(set.names(), ["kv-0", "kv-1", "kv-2"]);
        let mut ports = Vec::new();
        for (i, pgid) in groups.iter().enumerate() {
            assert!(work_dir.join(format!("kv-{i}")).is_dir());
            assert!(dir.path().join(format!("kv.kv-{i}.log")).is_file());
            let (host, port) = set.address(i).await.unwrap();
            assert_eq!(host, "127.0.0.1");
            // Its own command line names its own client and peer ports.
            let cmdline = std::fs::read(format!("/proc/{pgid}/cmdline")).unwrap();
            let args: Vec<String> = cmdline.split(|b| *b == 0).map(|a| String::from_utf8_lossy(a).into()).collect();
            assert_eq!(args[1], format!("600.{port}"), "{args:?}");
            ports.extend([port, args[2].parse::<u16>().unwrap()]);
        }
        ports.sort();
        ports.dedup();
        assert_eq!(ports.len(), 6, "every client and peer port distinct: {ports:?}");
        assert_eq!(target.uri, "sleep://127.0.0.1:".to_string() + &set.address(0).await.unwrap().1.to_string());

        assert_eq!(target.started.stop().await, Vec::<String>::new());
        for pgid in groups {
            assert!(process_group::live_members(pgid).is_empty(), "group {pgid} is gone");
        }
    }
}
