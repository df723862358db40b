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

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::provider::process::ProcessSlot;
use crate::provider::process_group;
use crate::spec::fault::Site;
use crate::spec::{Action, FaultSpec, Registered};
use faultline_faultfs::actions::{DiskError, DiskFull, DiskWindow, PowerLoss, SlowDisk};
use faultline_faultfs::Faults;
use faultline_kind::fault::{Applied, Apply, Fault, Healed, Undo};
use faultline_model::faults::Restart as RestartKind;

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

/// What a process fault reaches its target by.
pub struct Process {
    /// The target's name.
    pub name: String,
    pub slot: Arc<ProcessSlot>,
}

impl Process {
    /// The running server's process group, or why there is none.
    fn group(&self) -> anyhow::Result<i32> {
        match self.slot.process_group() {
            Some(pgid) => Ok(pgid),
            None => anyhow::bail!("target `{}` is not running (killed earlier and not started again yet)", self.name),
        }
    }

    fn hit(&self, pgid: i32) -> Vec<String> {
        vec![format!("{} (process group {pgid})", self.name)]
    }
}

pub async fn apply(name: &str, slot: &Arc<ProcessSlot>, fault: &FaultSpec) -> anyhow::Result<Applied> {
    let on = Process { name: name.to_string(), slot: Arc::clone(slot) };
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

/// SIGSTOP to the group, confirmed by every member stopped; thawed by SIGCONT.
async fn freeze(on: &Process) -> anyhow::Result<Applied> {
    let pgid = on.group()?;
    signal(pgid, libc::SIGSTOP)?;
    let stopped = |live: &[(i32, char)]| !live.is_empty() && live.iter().all(|(_, s)| *s == 'T');
    let evidence = wait_for(pgid, stopped, "stopped").await?;
    Ok(Applied::undone_by(on.hit(pgid), evidence, Thaw { pgid }))
}

/// SIGCONT to a group a pause stopped.
struct Thaw {
    pgid: i32,
}

#[async_trait::async_trait]
impl Undo for Thaw {
    async fn heal(&self) -> anyhow::Result<Healed> {
        signal(self.pgid, libc::SIGCONT)?;
        Ok(wait_for(self.pgid, |live| live.iter().all(|(_, s)| *s != 'T'), "running").await?.into())
    }
}

/// Starts a killed server again on its own port and data.
struct StartAgain {
    slot: Arc<ProcessSlot>,
    restart: RestartKind,
}

#[async_trait::async_trait]
impl Undo for StartAgain {
    async fn heal(&self) -> anyhow::Result<Healed> {
        Ok(Healed { evidence: self.slot.start_again().await?, restart: Some(self.restart) })
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
        let pgid = on.group()?;
        let Some(sig) = signal_named(self.signal.as_deref(), &KILL_SIGNALS) else {
            let named = self.signal.as_deref().unwrap_or_default().trim_start_matches("SIG");
            anyhow::bail!("signal `{named}` is not supported for process targets (KILL, TERM, INT)")
        };
        let evidence = on.slot.end(sig).await?;
        let restart = RestartKind::by_signal(self.signal.as_deref());
        Ok(Applied::undone_by(on.hit(pgid), evidence, StartAgain { slot: Arc::clone(&on.slot), restart }))
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
        let pgid = on.group()?;
        let sig = signal_named(self.signal.as_deref(), &RESTART_SIGNALS).context("a signal validation refuses")?;
        let ended = on.slot.end(sig).await?;
        let started = on.slot.start_again().await?;
        Ok(Applied::done(on.hit(pgid), format!("{ended}; {started}")))
    }
}

/// Starts a killed server again on what its disk kept since its last fsyncs.
#[async_trait::async_trait]
impl Apply<Process> for PowerLoss {
    async fn apply(&self, on: &Process) -> anyhow::Result<Applied> {
        let pgid = on.group()?;
        // Known before the server is killed: a power loss that cannot
        // undo anything must not leave it down.
        anyhow::ensure!(on.slot.disk().is_some(), "target `{}` does not run on the fault filesystem", on.name);
        let ended = on.slot.end(libc::SIGKILL).await?;
        let lost = {
            let mut disk = on.slot.disk();
            let mounted = disk.as_mut().context("the target does not run on the fault filesystem")?;
            mounted.power_loss(self.torn_seed(), self.names).context("after the power loss, mounting its disk again")?
        };
        anyhow::ensure!(lost.failed.is_empty(), "the power loss could not undo every file: {lost}");
        let started = on.slot.start_again().await?;
        Ok(Applied::done(on.hit(pgid), format!("{ended}; {lost}; {started}")))
    }
}

/// A disk fault in force from its apply until its undo.
async fn disk_window(fault: &impl DiskWindow, on: &Process) -> anyhow::Result<Applied> {
    let evidence = on.change_disk(|f| fault.set(f))?;
    let hit = vec![format!("{} (its disk)", on.name)];
    let heal = fault.healer();
    Ok(Applied::undone_by(hit, evidence, DiskHeals { name: on.name.clone(), slot: Arc::clone(&on.slot), heal }))
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

impl Process {
    /// Changes the faults of the disk under the target; says what they are now.
    fn change_disk(&self, change: impl FnOnce(&mut Faults)) -> anyhow::Result<String> {
        let disk = self.slot.disk();
        match disk.as_ref() {
            Some(mounted) => Ok(mounted.change(change)),
            None => anyhow::bail!("target `{}` does not run on the fault filesystem", self.name),
        }
    }
}

/// Puts back the disk faults a fault set.
struct DiskHeals {
    name: String,
    slot: Arc<ProcessSlot>,
    heal: fn(&mut Faults),
}

#[async_trait::async_trait]
impl Undo for DiskHeals {
    async fn heal(&self) -> anyhow::Result<Healed> {
        let on = Process { name: self.name.clone(), slot: Arc::clone(&self.slot) };
        Ok(on.change_disk(self.heal)?.into())
    }
}
