//! Faults on a `process` target: signals to its whole process group (a
//! server behind a `sh -c` wrapper is paused or killed with the wrapper),
//! confirmed through /proc (stopped: every member in state `T`; killed: no
//! member left running). A killed target is started again — at once for
//! `restart`, after `heal_after` or at the end of the cell for `kill` — on
//! the same port and working directory, confirmed by the kind's readiness
//! probe, whatever the kind: a crash-recovery check needs the same server
//! back on its own data. It applies the actions faultline_spec::fault::
//! ProcessFaults declares, the list validation holds a spec to.

use std::time::Duration;

use super::{Applied, Heal};
use crate::provider::{process_group, RunningTarget};
use crate::spec::fault::{FaultBackend, FaultKind, ProcessFaults};
use crate::spec::{FaultAction, FaultSpec};

pub enum Undo {
    /// SIGCONT to the group.
    Thaw { pgid: i32 },
    /// Start the killed server again.
    StartAgain,
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

/// The signal a kill or restart sends: SIGKILL unless the spec names another.
pub fn signal_of(action: &FaultAction) -> anyhow::Result<i32> {
    let name = action.signal().unwrap_or("SIGKILL");
    Ok(match name.trim_start_matches("SIG") {
        "KILL" => libc::SIGKILL,
        "TERM" => libc::SIGTERM,
        "INT" => libc::SIGINT,
        other => anyhow::bail!("signal `{other}` is not supported for process targets (KILL, TERM, INT)"),
    })
}

pub async fn apply(target: &RunningTarget, fault: &FaultSpec) -> anyhow::Result<Applied> {
    let name = &target.name;
    let slot = target.process().expect("process faults hit process targets");
    let Some(pgid) = slot.process_group() else {
        anyhow::bail!("target `{name}` is not running (killed earlier and not started again yet)")
    };
    let (evidence, heal) = match &fault.action {
        FaultAction::Pause { .. } | FaultAction::Stop { .. } => {
            signal(pgid, libc::SIGSTOP)?;
            let stopped = |live: &[(i32, char)]| !live.is_empty() && live.iter().all(|(_, s)| *s == 'T');
            (wait_for(pgid, stopped, "stopped").await?, Some(Heal::Process(Undo::Thaw { pgid })))
        }
        FaultAction::Kill { .. } => (slot.end(signal_of(&fault.action)?).await?, Some(Heal::Process(Undo::StartAgain))),
        FaultAction::Restart { .. } => {
            let ended = slot.end(signal_of(&fault.action)?).await?;
            let started = slot.start_again().await?;
            (format!("{ended}; {started}"), None)
        }
        other => {
            let takes = FaultKind::listed(ProcessFaults.supports());
            anyhow::bail!("`{}` is not available for process targets ({takes})", other.as_str())
        }
    };
    Ok(Applied { hit: vec![format!("{name} (process group {pgid})")], evidence, output: String::new(), heal })
}

pub async fn heal(target: &RunningTarget, undo: &Undo) -> anyhow::Result<String> {
    match undo {
        Undo::Thaw { pgid } => {
            signal(*pgid, libc::SIGCONT)?;
            wait_for(*pgid, |live| live.iter().all(|(_, s)| *s != 'T'), "running").await
        }
        Undo::StartAgain => target.process().expect("a process target").start_again().await,
    }
}
