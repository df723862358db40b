//! Faults on containers, through the Docker layer's confirmed operations:
//! the actions faultline_spec::fault::DockerFaults declares, the list
//! validation holds a spec to. The runner's fault scheduler calls [`apply`]
//! and [`heal`] and keeps the [`Undo`] in its ledger of faults in force.

use std::time::Duration;

use anyhow::Context;

use crate::members::{Member, Topology};
use faultline_spec::{FaultAction, FaultKind, FaultSpec, Spec};

/// Grace period for `stop` and `restart`.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// Limit for an `exec` fault's command.
const EXEC_TIMEOUT: Duration = Duration::from_secs(30);

/// A container fault that was applied and confirmed.
pub struct Applied {
    /// The containers it hit, by member name.
    pub hit: Vec<String>,
    pub evidence: String,
    /// An `exec` fault's output.
    pub output: String,
    /// Undoes the fault; None when there is nothing to undo (exec, start, …).
    pub undo: Option<Undo>,
}

/// What undoes a container fault.
pub struct Undo {
    kind: FaultKind,
    members: Vec<Member>,
}

pub async fn apply(topo: &Topology, fault: &FaultSpec, spec: &Spec) -> anyhow::Result<Applied> {
    if let FaultAction::Failover { coordinated } = fault.action {
        return failover(topo, coordinated, spec).await;
    }
    let selection = faultline_spec::selector::parse_selector(&fault.target, spec).map_err(|e| anyhow::anyhow!(e))?;
    let members = topo.resolve(&selection.selector).await.with_context(|| format!("resolving `{}`", fault.target))?;
    anyhow::ensure!(!members.is_empty(), "`{}` selects no container now", fault.target);
    let d = &topo.docker;
    let mut evidence = Vec::new();
    let mut output = String::new();
    for m in &members {
        let c = &m.container;
        let confirmed = match &fault.action {
            FaultAction::Kill { signal, .. } => d.kill(c, signal.as_deref().unwrap_or("SIGKILL")).await?.evidence,
            FaultAction::Stop { .. } => d.stop(c, STOP_GRACE).await?.evidence,
            FaultAction::Start => d.start(c).await?.evidence,
            FaultAction::Restart { .. } => d.restart(c, STOP_GRACE).await?.evidence,
            FaultAction::Pause { .. } => d.pause(c).await?.evidence,
            FaultAction::Unpause => d.unpause(c).await?.evidence,
            FaultAction::Disconnect { .. } => d.disconnect(c, &topo.network).await?.evidence,
            FaultAction::Reconnect => d.reconnect(c, &topo.network, std::slice::from_ref(&m.name)).await?.evidence,
            FaultAction::Isolate { .. } => d.isolate(c, &topo.network).await?.evidence,
            FaultAction::Rejoin => d.rejoin(c).await?.evidence,
            FaultAction::Failover { .. } => unreachable!("handled above: it switches the whole group"),
            FaultAction::Stepdown { .. } | FaultAction::Freeze { .. } | FaultAction::Stepup => {
                anyhow::bail!("`{}` is sent by the target kind's driver, not to a container", fault.action.as_str())
            }
            FaultAction::Exec { command } => {
                let out = d.exec_ok(c, command, EXEC_TIMEOUT).await?;
                output.push_str(out.combined().trim());
                format!("exit code {}", out.exit_code)
            }
        };
        evidence.push(format!("{}: {confirmed}", m.name));
    }
    let kind = fault.action.kind();
    Ok(Applied {
        hit: members.iter().map(|m| m.name.clone()).collect(),
        evidence: evidence.join("; "),
        output,
        undo: kind.heals().then_some(Undo { kind, members }),
    })
}

/// The `failover` fault: the whole group switches, through its Sentinels.
async fn failover(topo: &Topology, coordinated: bool, spec: &Spec) -> anyhow::Result<Applied> {
    let discovery = spec
        .targets
        .get(&topo.target)
        .and_then(|t| t.discovery.as_ref())
        .with_context(|| format!("`{}` has no `discovery`: a failover goes through the Sentinels", topo.target))?;
    let (old, evidence) = topo.failover(&discovery.sentinels, &discovery.master, coordinated).await?;
    Ok(Applied { hit: vec![old.name], evidence, output: String::new(), undo: None })
}

pub async fn heal(topo: &Topology, undo: &Undo) -> anyhow::Result<String> {
    let d = &topo.docker;
    let mut evidence = Vec::new();
    for m in &undo.members {
        let c = &m.container;
        // Each undoing operation does nothing when there is nothing to undo.
        let confirmed = match undo.kind {
            FaultKind::Kill | FaultKind::Stop => d.start(c).await?,
            FaultKind::Pause => d.unpause(c).await?,
            FaultKind::Disconnect => d.reconnect(c, &topo.network, std::slice::from_ref(&m.name)).await?,
            FaultKind::Isolate => d.rejoin(c).await?,
            other => anyhow::bail!("`{}` has nothing to heal", other.as_str()),
        };
        evidence.push(format!("{}: {}", m.name, confirmed.evidence));
    }
    Ok(evidence.join("; "))
}
