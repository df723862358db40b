//! The process provider's faults: signals to a `process` target's whole
//! process group (a server behind a `sh -c` wrapper is paused or killed
//! with the wrapper), confirmed through /proc (stopped: every member in
//! state `T`; killed: no member left running). A killed target is started
//! again — at once for `restart`, after `heal_after` or at the end of the
//! cell for `kill` — on the same port and working directory, confirmed by
//! the kind's readiness probe, whatever the kind: a crash-recovery check
//! needs the same server back on its own data. Each action is a type and a
//! line in [`FAULTS`].

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::provider::process::ProcessSlot;
use crate::provider::process_group;
use crate::spec::fault::Site;
use crate::spec::{Action, FaultSpec, Registered};
use faultline_kind::fault::{Applied, Apply, Fault, Healed, Undo};
use faultline_model::faults::Restart as RestartKind;

/// Every process fault, in the order errors list them.
pub static FAULTS: &[&dyn Fault<Process>] =
    &[&Registered::<Kill>::NEW, &Registered::<Stop>::NEW, &Registered::<Pause>::NEW, &Registered::<Restart>::NEW];

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

impl Action for Kill {
    const NAME: &'static str = "kill";
    const HEALS: bool = true;
    fn check(&self, _: &Site) -> Result<(), (&'static str, String)> {
        match signal_named(self.signal.as_deref(), &KILL_SIGNALS) {
            Some(_) => Ok(()),
            None => Err(("signal", "process targets are killed with SIGKILL (the default), SIGTERM or SIGINT".into())),
        }
    }
}

#[async_trait::async_trait]
impl Apply<Process> for Kill {
    async fn apply(&self, on: &Process) -> anyhow::Result<Applied> {
        let pgid = on.group()?;
        let sig = signal_named(self.signal.as_deref(), &KILL_SIGNALS).context("a signal validation refuses")?;
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
