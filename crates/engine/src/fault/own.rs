//! Faults a target kind sends as commands to its own servers (MongoDB's
//! `stepdown`, `freeze`, `stepup`), on any provider: the members the fault
//! names are resolved (a process or external target is its one server),
//! and the kind's driver applies and confirms the fault on each; what it
//! returns carries the kind's own undo.

use crate::provider::RunningTarget;
use crate::spec::{FaultSpec, Spec};
use faultline_kind::fault::{Applied, Server};
use faultline_kind::topology;

/// The servers a fault names: each selected member by the URI of that one
/// server, or the target's one server.
async fn servers(target: &RunningTarget, fault: &FaultSpec, spec: &Spec) -> anyhow::Result<Vec<Server>> {
    let one = Server { name: target.name.clone(), uri: target.uri.clone() };
    let Some(set) = target.provided().member_set() else { return Ok(vec![one]) };
    // The target's own name: the whole target, as its clients reach it.
    if spec.targets.contains_key(fault.target.trim()) {
        return Ok(vec![one]);
    }
    let selection = faultline_spec::selector::parse_selector(&fault.target, spec).map_err(anyhow::Error::msg)?;
    let pick = faultline_spec::selector::pick(spec.seed, &fault.name);
    let names = set.names();
    let mut out = Vec::new();
    for i in topology::resolve(set.as_ref(), &selection.selector, pick).await? {
        out.push(Server { name: names[i].clone(), uri: topology::member_uri(set.as_ref(), i).await? });
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
