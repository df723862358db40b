//! Faults on a `process` target: signals to the server process, confirmed
//! through /proc (stopped: state `T`; killed: gone).

use std::time::Duration;

use super::{Applied, Heal};
use crate::spec::{FaultAction, FaultSpec};

pub struct Undo {
    pid: i32,
}

fn state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The state follows the command name, which is in parentheses.
    stat.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next())
}

async fn wait_for(pid: i32, want: impl Fn(Option<char>) -> bool, what: &str) -> anyhow::Result<String> {
    for _ in 0..200 {
        let s = state(pid);
        if want(s) {
            return Ok(format!("pid {pid} {what} (state {})", s.map_or("gone".into(), |c| c.to_string())));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    anyhow::bail!("pid {pid} did not become {what} within 2s (state {:?})", state(pid))
}

fn signal(pid: i32, sig: i32) -> anyhow::Result<()> {
    // SAFETY: kill(2) on the server process this run started.
    if unsafe { libc::kill(pid, sig) } != 0 {
        anyhow::bail!("kill({pid}, {sig}): {}", std::io::Error::last_os_error());
    }
    Ok(())
}

pub async fn apply(pid: u32, target: &str, fault: &FaultSpec) -> anyhow::Result<Applied> {
    let pid = pid as i32;
    let (evidence, heal) = match fault.action {
        FaultAction::Pause | FaultAction::Stop => {
            signal(pid, libc::SIGSTOP)?;
            (wait_for(pid, |s| s == Some('T'), "stopped").await?, Some(Heal::Process(Undo { pid })))
        }
        FaultAction::Kill => {
            let name = fault.signal.as_deref().unwrap_or("SIGKILL");
            let sig = match name.trim_start_matches("SIG") {
                "KILL" => libc::SIGKILL,
                "TERM" => libc::SIGTERM,
                "INT" => libc::SIGINT,
                other => anyhow::bail!("signal `{other}` is not supported for process targets (KILL, TERM, INT)"),
            };
            signal(pid, sig)?;
            // A zombie (Z) has exited; the provider reaps it when it stops the target.
            (wait_for(pid, |s| matches!(s, None | Some('Z') | Some('X')), "gone").await?, None)
        }
        other => anyhow::bail!("`{}` is not available for process targets (pause, stop, kill)", other.as_str()),
    };
    Ok(Applied { hit: vec![format!("{target} (pid {pid})")], evidence, output: String::new(), heal })
}

pub async fn heal(undo: &Undo) -> anyhow::Result<String> {
    signal(undo.pid, libc::SIGCONT)?;
    wait_for(undo.pid, |s| s != Some('T'), "running").await
}
