//! Faults on a `process` target: signals to its whole process group (a
//! server behind a `sh -c` wrapper is paused or killed with the wrapper),
//! confirmed through /proc (stopped: every member in state `T`; killed: no
//! member left running).

use std::time::Duration;

use super::{Applied, Heal};
use crate::provider::process_group;
use crate::spec::{FaultAction, FaultSpec};

pub struct Undo {
    pgid: i32,
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

pub async fn apply(pgid: i32, target: &str, fault: &FaultSpec) -> anyhow::Result<Applied> {
    let (evidence, heal) = match fault.action {
        FaultAction::Pause | FaultAction::Stop => {
            signal(pgid, libc::SIGSTOP)?;
            let stopped = |live: &[(i32, char)]| !live.is_empty() && live.iter().all(|(_, s)| *s == 'T');
            (wait_for(pgid, stopped, "stopped").await?, Some(Heal::Process(Undo { pgid })))
        }
        FaultAction::Kill => {
            let name = fault.signal.as_deref().unwrap_or("SIGKILL");
            let sig = match name.trim_start_matches("SIG") {
                "KILL" => libc::SIGKILL,
                "TERM" => libc::SIGTERM,
                "INT" => libc::SIGINT,
                other => anyhow::bail!("signal `{other}` is not supported for process targets (KILL, TERM, INT)"),
            };
            signal(pgid, sig)?;
            // Exited members may stay zombies until reaped; the provider reaps
            // its own when it stops the target.
            (wait_for(pgid, |live| live.is_empty(), "gone").await?, None)
        }
        other => anyhow::bail!("`{}` is not available for process targets (pause, stop, kill)", other.as_str()),
    };
    Ok(Applied { hit: vec![format!("{target} (process group {pgid})")], evidence, output: String::new(), heal })
}

pub async fn heal(undo: &Undo) -> anyhow::Result<String> {
    signal(undo.pgid, libc::SIGCONT)?;
    wait_for(undo.pgid, |live| live.iter().all(|(_, s)| *s != 'T'), "running").await
}
