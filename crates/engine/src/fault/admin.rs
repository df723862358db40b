//! Faults a target kind sends as commands to its own servers (MongoDB's
//! `stepdown`, `freeze`, `stepup`), on any provider: the members the fault
//! names are resolved (a process or external target is its one server), and
//! the kind's driver applies and confirms the fault on each.

use super::{Applied, Heal};
use crate::provider::RunningTarget;
use crate::spec::units::Dur;
use crate::spec::{FaultAction, FaultSpec, Spec};
use faultline_kind::KindFaults;

/// What undoes a kind's fault: the same command with nothing in force
/// (`freeze` for 0 seconds thaws the member).
pub struct Undo {
    members: Vec<(String, String)>,
    action: FaultAction,
}

/// The members a fault names, as (name, URI of that one server).
async fn members(target: &RunningTarget, fault: &FaultSpec, spec: &Spec) -> anyhow::Result<Vec<(String, String)>> {
    let Some(topology) = target.topology() else {
        return Ok(vec![(target.name.clone(), target.uri.clone())]);
    };
    let selection = faultline_spec::selector::parse_selector(&fault.target, spec).map_err(anyhow::Error::msg)?;
    let mut out = Vec::new();
    for m in topology.resolve(&selection.selector).await? {
        let uri = topology.uri(&m).await?;
        out.push((m.name, uri));
    }
    Ok(out)
}

pub async fn apply(target: &RunningTarget, fault: &FaultSpec, spec: &Spec) -> anyhow::Result<Applied> {
    let members = members(target, fault, spec).await?;
    let kind = kind_faults(target, &fault.action)?;
    let mut evidence = Vec::new();
    for (name, uri) in &members {
        let done = kind.apply(uri, &fault.action).await.map_err(|e| e.context(format!("`{name}`")))?;
        evidence.push(format!("{name}: {done}"));
    }
    let heal = matches!(fault.action, FaultAction::Freeze { .. }).then(|| {
        let thaw = FaultAction::Freeze { seconds: Some(Dur(std::time::Duration::ZERO)), heal_after: None };
        Heal::Admin(Undo { members: members.clone(), action: thaw })
    });
    let hit = members.into_iter().map(|(name, _)| name).collect();
    Ok(Applied { hit, evidence: evidence.join("; "), output: String::new(), heal })
}

pub async fn heal(target: &RunningTarget, undo: &Undo) -> anyhow::Result<String> {
    let kind = kind_faults(target, &undo.action)?;
    let mut evidence = Vec::new();
    for (name, uri) in &undo.members {
        evidence.push(format!("{name}: {}", kind.apply(uri, &undo.action).await?));
    }
    Ok(evidence.join("; "))
}

/// The target kind's own faults; validation let only kinds with `action`
/// among their faults through, so None is a bug named plainly.
fn kind_faults<'t>(target: &'t RunningTarget, action: &FaultAction) -> anyhow::Result<&'t dyn KindFaults> {
    target.driver.kind_faults().ok_or_else(|| anyhow::anyhow!("`{}` is not a fault of this kind", action.as_str()))
}
