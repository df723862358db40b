//! The process provider's faults: signals to a `process` target's whole
//! process group (a server behind a `sh -c` wrapper is paused or killed
//! with the wrapper), confirmed through /proc (stopped: every member in
//! state `T`; killed: no member left running). A killed target is started
//! again — at once for `restart`, after `heal_after` or at the end of the
//! cell for `kill` — on the same port and working directory, confirmed by
//! the kind's readiness probe, whatever the kind: a crash-recovery check
//! needs the same server back on its own data. The disk faults (a power
//! loss, a full, failing or slow disk) act on the fault filesystem the
//! target's data runs on (faultline-faultfs, mounted by the provider when a
//! spec names one of them). Each action is a type and a line in [`FAULTS`].
//! A target of a kind's members side by side (etcd on loopback) is hit
//! member by member, picked by the fault's selector when it fires
//! (`kv.leader`, `kv.any`); members killed together start again together.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::provider::process::{ProcessMembers, ProcessSlot};
use crate::provider::process_group;
use crate::spec::fault::Site;
use crate::spec::{Action, FaultSpec, Registered, Spec};
use faultline_faultfs::actions::{DiskError, DiskFull, DiskWindow, PowerLoss, SlowDisk};
use faultline_faultfs::Faults;
use faultline_kind::fault::{Applied, Apply, Fault, Healed, Undo};
use faultline_kind::topology;
use faultline_model::faults::Restart as RestartKind;
use faultline_spec::selector::{parse_selector, Selector};

/// Every process fault, in the order errors list them.
pub static FAULTS: &[&dyn Fault<Process>] = &[
    &Registered::<Kill>::NEW,
    &Registered::<Stop>::NEW,
    &Registered::<Pause>::NEW,
    &Registered::<Restart>::NEW,
    &Registered::<PowerLoss>::NEW,
    &Registered::<DiskFull>::NEW,
    &Registered::<DiskError>::NEW,
    &Registered::<SlowDisk>::NEW,
];

/// What a process fault reaches its target by: the members its selector
/// picks when it fires (a target of one server is its one slot).
pub struct Process {
    /// The target's name.
    pub name: String,
    pub members: Arc<ProcessMembers>,
    /// None: the fault names the target itself (every member).
    pub selector: Option<Selector>,
    /// The selector as the spec wrote it (`kv.leader`), for errors.
    pub written: String,
    /// Which member `kv.any` picks.
    pub pick: u64,
}

impl Process {
    /// The slots the fault hits now (at least one).
    async fn slots(&self) -> anyhow::Result<Vec<Arc<ProcessSlot>>> {
        let all = self.members.slots();
        let picked = match (&self.selector, self.members.member_set()) {
            (Some(selector), Some(set)) => topology::resolve(set.as_ref(), selector, self.pick)
                .await
                .with_context(|| format!("resolving `{}`", self.written))?,
            _ => (0..all.len()).collect(),
        };
        anyhow::ensure!(!picked.is_empty(), "`{}` selects no member now", self.written);
        Ok(picked.into_iter().map(|i| Arc::clone(&all[i])).collect())
    }

    /// The slots the fault hits and each one's running process group, or
    /// why one has none.
    async fn running(&self) -> anyhow::Result<Running> {
        let mut running = Running { slots: Vec::new(), pgids: Vec::new() };
        for slot in self.slots().await? {
            match slot.process_group() {
                Some(pgid) => {
                    running.pgids.push(pgid);
                    running.slots.push(slot);
                }
                None => anyhow::bail!(
                    "`{}` of target `{}` is not running (killed earlier and not started again yet)",
                    slot.member(),
                    self.name
                ),
            }
        }
        Ok(running)
    }
}

/// The running members a fault hits, and their process groups.
struct Running {
    slots: Vec<Arc<ProcessSlot>>,
    pgids: Vec<i32>,
}

impl Running {
    /// Each member by its name and process group.
    fn hit(&self) -> Vec<String> {
        let each = self.slots.iter().zip(&self.pgids);
        each.map(|(slot, pgid)| format!("{} (process group {pgid})", slot.member())).collect()
    }
}

/// One line of evidence per member, named when there are several.
fn each_said(slots: &[Arc<ProcessSlot>], said: Vec<String>) -> String {
    match slots.len() {
        1 => said.into_iter().collect(),
        _ => slots.iter().zip(said).map(|(s, e)| format!("{}: {e}", s.member())).collect::<Vec<_>>().join("; "),
    }
}

pub async fn apply(
    name: &str,
    members: &Arc<ProcessMembers>,
    fault: &FaultSpec,
    spec: &Spec,
) -> anyhow::Result<Applied> {
    // A fault on the target's own name hits its one server (or every member).
    let selector = match spec.targets.contains_key(fault.target.trim()) {
        true => None,
        false => Some(parse_selector(&fault.target, spec).map_err(anyhow::Error::msg)?.selector),
    };
    let on = Process {
        name: name.to_string(),
        members: Arc::clone(members),
        selector,
        written: fault.target.clone(),
        pick: faultline_spec::selector::pick(spec.seed, &fault.name),
    };
    faultline_kind::fault::apply(FAULTS, "process", &fault.action, &fault.fields, &on).await
}

/// The group's members and states, e.g. `pid 12 state T, pid 13 state T`.
fn listed(members: &[(i32, char)]) -> String {
    if members.is_empty() {
        return "no process left".into();
    }
    let each: Vec<String> = members.iter().map(|(pid, state)| format!("pid {pid} state {state}")).collect();
    each.join(", ")
}

/// Waits up to 2 s until every live member of the group satisfies `want`.
async fn wait_for(pgid: i32, want: impl Fn(&[(i32, char)]) -> bool, what: &str) -> anyhow::Result<String> {
    for _ in 0..200 {
        let live = process_group::live_members(pgid);
        if want(&live) {
            return Ok(format!("process group {pgid} {what} ({})", listed(&live)));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    anyhow::bail!("process group {pgid} did not become {what} within 2s ({})", listed(&process_group::members(pgid)))
}

fn signal(pgid: i32, sig: i32) -> anyhow::Result<()> {
    process_group::signal(pgid, sig).map_err(|e| anyhow::anyhow!("kill(-{pgid}, {sig}): {e}"))
}

/// The signal named (SIGKILL when none), among those `takes` allows.
fn signal_named(name: Option<&str>, takes: &[(&str, i32)]) -> Option<i32> {
    let name = name.unwrap_or("SIGKILL").trim_start_matches("SIG");
    takes.iter().find(|(n, _)| *n == name).map(|(_, sig)| *sig)
}

const KILL_SIGNALS: [(&str, i32); 3] = [("KILL", libc::SIGKILL), ("TERM", libc::SIGTERM), ("INT", libc::SIGINT)];
const RESTART_SIGNALS: [(&str, i32); 2] = [("KILL", libc::SIGKILL), ("TERM", libc::SIGTERM)];

/// SIGSTOP to each group, confirmed by every process of it stopped;
/// thawed by SIGCONT. A group that does not stop thaws those stopped.
async fn freeze(on: &Process) -> anyhow::Result<Applied> {
    let running = on.running().await?;
    let stopped = |live: &[(i32, char)]| !live.is_empty() && live.iter().all(|(_, s)| *s == 'T');
    let mut evidence = Vec::new();
    for (i, pgid) in running.pgids.iter().enumerate() {
        let frozen = async {
            signal(*pgid, libc::SIGSTOP)?;
            wait_for(*pgid, stopped, "stopped").await
        };
        match frozen.await {
            Ok(said) => evidence.push(said),
            Err(e) => {
                let thaw = Thaw { pgids: running.pgids[..=i].to_vec() };
                let undone = thaw.heal().await.map(|h| h.evidence).unwrap_or_else(|u| format!("{u:#}"));
                return Err(e.context(format!("undone where done: {undone}")));
            }
        }
    }
    let evidence = each_said(&running.slots, evidence);
    Ok(Applied::undone_by(running.hit(), evidence, Thaw { pgids: running.pgids }))
}

/// SIGCONT to the groups a pause stopped.
struct Thaw {
    pgids: Vec<i32>,
}

/// Every group is thawed, also when one fails: a group that has gone since
/// it was paused (a later fault killed it) has nothing left to thaw.
#[async_trait::async_trait]
impl Undo for Thaw {
    async fn heal(&self) -> anyhow::Result<Healed> {
        let (mut said, mut failed) = (Vec::new(), Vec::new());
        for &pgid in &self.pgids {
            match process_group::signal(pgid, libc::SIGCONT) {
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {
                    said.push(format!("process group {pgid} gone since it was paused"));
                    continue;
                }
                Err(e) => failed.push(format!("kill(-{pgid}, SIGCONT): {e}")),
                Ok(()) => match wait_for(pgid, |live| live.iter().all(|(_, s)| *s != 'T'), "running").await {
                    Ok(running) => said.push(running),
                    Err(e) => failed.push(format!("{e:#}")),
                },
            }
        }
        anyhow::ensure!(failed.is_empty(), "{} (the others: {})", failed.join("; "), said.join("; "));
        Ok(said.join("; ").into())
    }
}

/// Starts killed servers again on their own ports and data: all spawned
/// first, then waited for together (members that form a quorum only
/// answer once enough of them are back).
async fn start_all(slots: &[Arc<ProcessSlot>]) -> anyhow::Result<String> {
    let started = std::time::Instant::now();
    for slot in slots {
        slot.spawn_again().await?;
    }
    let readies = futures::future::join_all(slots.iter().map(|s| s.ready_again(started))).await;
    Ok(each_said(slots, readies.into_iter().collect::<anyhow::Result<Vec<_>>>()?))
}

/// Ends each server with `sig`; a server that does not end has the ones
/// ended before it started again.
async fn end_all(slots: &[Arc<ProcessSlot>], sig: i32) -> anyhow::Result<String> {
    let mut said = Vec::new();
    for (i, slot) in slots.iter().enumerate() {
        match slot.end(sig).await {
            Ok(ended) => said.push(ended),
            Err(e) => {
                let undone = start_all(&slots[..i]).await.unwrap_or_else(|u| format!("{u:#}"));
                return Err(e.context(format!("{} (started again where ended: {undone})", slot.member())));
            }
        }
    }
    Ok(each_said(slots, said))
}

/// Starts killed servers again on their own port and data.
struct StartAgain {
    slots: Vec<Arc<ProcessSlot>>,
    restart: RestartKind,
}

#[async_trait::async_trait]
impl Undo for StartAgain {
    async fn heal(&self) -> anyhow::Result<Healed> {
        Ok(Healed { evidence: start_all(&self.slots).await?, restart: Some(self.restart) })
    }
}

/// Send a signal to the server's process group and wait until none of it
/// runs; healed by starting the server again on its own data.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Kill {
    /// The signal (default SIGKILL): SIGKILL, SIGTERM, SIGINT.
    signal: Option<String>,
}

/// A signal it cannot send is refused when the fault fires (recorded as
/// the fault's error, and its gates unmeasured), as it always was.
impl Action for Kill {
    const NAME: &'static str = "kill";
    const HEALS: bool = true;
}

#[async_trait::async_trait]
impl Apply<Process> for Kill {
    async fn apply(&self, on: &Process) -> anyhow::Result<Applied> {
        let Some(sig) = signal_named(self.signal.as_deref(), &KILL_SIGNALS) else {
            let named = self.signal.as_deref().unwrap_or_default().trim_start_matches("SIG");
            anyhow::bail!("signal `{named}` is not supported for process targets (KILL, TERM, INT)")
        };
        let running = on.running().await?;
        let evidence = end_all(&running.slots, sig).await?;
        let restart = RestartKind::by_signal(self.signal.as_deref());
        Ok(Applied::undone_by(running.hit(), evidence, StartAgain { slots: running.slots, restart }))
    }
}

/// Stop the server's process group (SIGSTOP), as `pause` does; healed by SIGCONT.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Stop {}

impl Action for Stop {
    const NAME: &'static str = "stop";
    const HEALS: bool = true;
}

#[async_trait::async_trait]
impl Apply<Process> for Stop {
    async fn apply(&self, on: &Process) -> anyhow::Result<Applied> {
        freeze(on).await
    }
}

/// Freeze the server's process group (SIGSTOP); healed by SIGCONT.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Pause {}

impl Action for Pause {
    const NAME: &'static str = "pause";
    const HEALS: bool = true;
}

#[async_trait::async_trait]
impl Apply<Process> for Pause {
    async fn apply(&self, on: &Process) -> anyhow::Result<Applied> {
        freeze(on).await
    }
}

/// End the server and start it again on its own port and data, confirmed
/// by the kind's readiness probe.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Restart {
    /// SIGKILL (a crash, the default) or SIGTERM (a clean restart).
    signal: Option<String>,
}

impl Action for Restart {
    const NAME: &'static str = "restart";
    fn restarts(&self) -> Option<RestartKind> {
        Some(RestartKind::by_signal(self.signal.as_deref()))
    }
    fn check(&self, _: &Site) -> Result<(), (&'static str, String)> {
        match signal_named(self.signal.as_deref(), &RESTART_SIGNALS) {
            Some(_) => Ok(()),
            None => {
                Err(("signal", "a restart takes SIGKILL (a crash, the default) or SIGTERM (a clean restart)".into()))
            }
        }
    }
}

#[async_trait::async_trait]
impl Apply<Process> for Restart {
    async fn apply(&self, on: &Process) -> anyhow::Result<Applied> {
        let sig = signal_named(self.signal.as_deref(), &RESTART_SIGNALS).context("a signal validation refuses")?;
        let running = on.running().await?;
        let ended = end_all(&running.slots, sig).await?;
        let started = start_all(&running.slots).await?;
        Ok(Applied::done(running.hit(), format!("{ended}; {started}")))
    }
}

/// Each server killed at once with its disk, and started again on what
/// the disk kept since its last fsyncs.
#[async_trait::async_trait]
impl Apply<Process> for PowerLoss {
    async fn apply(&self, on: &Process) -> anyhow::Result<Applied> {
        let running = on.running().await?;
        let slots = &running.slots;
        // Known before a server is killed: a power loss that cannot undo
        // anything must not leave it down.
        if let Some(bare) = slots.iter().find(|s| s.disk().is_none()) {
            anyhow::bail!("`{}` of target `{}` does not run on the fault filesystem", bare.member(), on.name);
        }
        let ended = end_all(slots, libc::SIGKILL).await?;
        // Each disk loses what it had not made durable; a member whose disk
        // could not be put back stays down (a start on an unknown disk would
        // be a guess), the others start again whatever happened to it.
        let (mut lost, mut failed, mut back) = (Vec::new(), Vec::new(), Vec::new());
        for slot in slots {
            let mut disk = slot.disk();
            let Some(mounted) = disk.as_mut() else { continue };
            match mounted.power_loss(self.torn_seed(), self.names) {
                Ok(kept) if kept.failed.is_empty() => {
                    lost.push(kept.to_string());
                    back.push(Arc::clone(slot));
                }
                Ok(kept) => failed.push(format!("{}: the power loss could not undo every file: {kept}", slot.member())),
                Err(e) => failed.push(format!("{}: after the power loss, mounting its disk again: {e}", slot.member())),
            }
        }
        let started = start_all(&back).await;
        if !failed.is_empty() {
            let others = started.unwrap_or_else(|e| format!("starting the others failed too: {e:#}"));
            anyhow::bail!("{} (left down; the others: {others})", failed.join("; "));
        }
        Ok(Applied::done(running.hit(), format!("{ended}; {}; {}", each_said(slots, lost), started?)))
    }
}

/// A disk fault in force from its apply until its undo, on each disk.
async fn disk_window(fault: &impl DiskWindow, on: &Process) -> anyhow::Result<Applied> {
    let slots = on.slots().await?;
    let evidence = change_disks(&on.name, &slots, |f| fault.set(f))?;
    let hit = slots.iter().map(|s| format!("{} (its disk)", s.member())).collect();
    let heal = fault.healer();
    Ok(Applied::undone_by(hit, evidence, DiskHeals { name: on.name.clone(), slots, heal }))
}

#[async_trait::async_trait]
impl Apply<Process> for DiskFull {
    async fn apply(&self, on: &Process) -> anyhow::Result<Applied> {
        disk_window(self, on).await
    }
}

#[async_trait::async_trait]
impl Apply<Process> for DiskError {
    async fn apply(&self, on: &Process) -> anyhow::Result<Applied> {
        disk_window(self, on).await
    }
}

#[async_trait::async_trait]
impl Apply<Process> for SlowDisk {
    async fn apply(&self, on: &Process) -> anyhow::Result<Applied> {
        disk_window(self, on).await
    }
}

/// Changes the faults of the disk under each server; says what they are
/// now. Every server is checked first: no disk is changed unless all are.
fn change_disks(name: &str, slots: &[Arc<ProcessSlot>], change: impl Fn(&mut Faults)) -> anyhow::Result<String> {
    if let Some(bare) = slots.iter().find(|s| s.disk().is_none()) {
        anyhow::bail!("`{}` of target `{name}` does not run on the fault filesystem", bare.member());
    }
    let said = slots.iter().filter_map(|slot| slot.disk().as_ref().map(|mounted| mounted.change(&change)));
    Ok(each_said(slots, said.collect()))
}

/// Puts back the disk faults a fault set.
struct DiskHeals {
    name: String,
    slots: Vec<Arc<ProcessSlot>>,
    heal: fn(&mut Faults),
}

#[async_trait::async_trait]
impl Undo for DiskHeals {
    async fn heal(&self) -> anyhow::Result<Healed> {
        Ok(change_disks(&self.name, &self.slots, self.heal)?.into())
    }
}
