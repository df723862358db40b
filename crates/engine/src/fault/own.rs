//! Faults a target kind sends as commands to its own servers (MongoDB's
//! `stepdown`, `freeze`, `stepup`), on any provider: the members the fault
//! names are resolved (a process or external target is its one server),
//! and the kind's driver applies and confirms the fault on each; what it
//! returns carries the kind's own undo.

use crate::provider::RunningTarget;
use crate::spec::{FaultSpec, Spec};
use faultline_kind::fault::{Applied, Server};

/// The servers a fault names: each selected member by the URI of that one
/// server, or the target's one server.
async fn servers(target: &RunningTarget, fault: &FaultSpec, spec: &Spec) -> anyhow::Result<Vec<Server>> {
    let Some(topology) = target.topology() else {
        return Ok(vec![Server { name: target.name.clone(), uri: target.uri.clone() }]);
    };
    let selection = faultline_spec::selector::parse_selector(&fault.target, spec).map_err(anyhow::Error::msg)?;
    let mut out = Vec::new();
    for m in topology.resolve(&selection.selector).await? {
        let uri = topology.uri(&m).await?;
        out.push(Server { name: m.name, uri });
    }
    Ok(out)
}

pub async fn apply(target: &RunningTarget, fault: &FaultSpec, spec: &Spec) -> anyhow::Result<Applied> {
    // Validation let only kinds that register the action through, so None
    // is a bug, named plainly.
    let Some(own) = target.driver.kind_faults() else {
        anyhow::bail!("`{}` is not a fault of this kind (its driver applies none)", fault.action)
    };
    let servers = servers(target, fault, spec).await?;
    anyhow::ensure!(!servers.is_empty(), "`{}` selects no member now", fault.target);
    own.apply(&fault.action, &fault.fields, &servers).await
}
