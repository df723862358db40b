//! Which variants of a scenario did not change between two runs, so that
//! `compare` can tell host drift from a change: a variant is unchanged when
//! every server it ran on is the same binary (SHA-256) with the same
//! arguments, server version, kind and provider, and its target, workload
//! and scenario read the same in both runs' spec.yaml. Servers whose binary
//! faultline did not hash (docker, external) cannot be shown unchanged.

use indexmap::IndexMap;
use serde::Serialize;
use serde_yaml_ng::Value;

use faultline_model::results::{Results, TargetInfo};

/// One scenario's controls between two runs.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioControl {
    pub scenario: String,
    /// The variant the others are normalised by: the first unchanged one
    /// (the scenario's baseline when it did not change).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control: Option<String>,
    /// Every variant that did not change; their moves are host drift.
    pub unchanged: Vec<String>,
    /// Per variant that changed or could not be shown unchanged: why.
    pub changed: IndexMap<String, String>,
}

/// One run as `compare` reads it: its results and its spec.yaml as run.
pub struct Run<'a> {
    pub results: &'a Results,
    /// None when spec.yaml is missing or unreadable.
    pub spec: Option<&'a Value>,
}

/// Each scenario both runs hold, in run A's order, with its controls.
pub fn controls(a: &Run, b: &Run) -> Vec<ScenarioControl> {
    let mut out: Vec<ScenarioControl> = Vec::new();
    for cell in &a.results.cells {
        if out.iter().any(|s| s.scenario == cell.scenario)
            || !b.results.cells.iter().any(|c| c.scenario == cell.scenario)
        {
            continue;
        }
        let mut control = ScenarioControl {
            scenario: cell.scenario.clone(),
            control: None,
            unchanged: Vec::new(),
            changed: IndexMap::new(),
        };
        for variant in variants(a.results, &cell.scenario) {
            match why_changed(a, b, &cell.scenario, &variant) {
                None => control.unchanged.push(variant),
                Some(why) => {
                    control.changed.insert(variant, why);
                }
            }
        }
        control.control = control.unchanged.first().cloned();
        out.push(control);
    }
    out
}

/// A scenario's variants in the order its cells ran (the baseline first).
fn variants(results: &Results, scenario: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in results.cells.iter().filter(|c| c.scenario == scenario) {
        if !out.iter().any(|v| v == c.variant()) {
            out.push(c.variant().to_string());
        }
    }
    out
}

/// The targets and workloads a variant's cells ran with in one run.
fn used(results: &Results, scenario: &str, variant: &str) -> (Vec<String>, Vec<String>) {
    let (mut targets, mut workloads) = (Vec::<String>::new(), Vec::<String>::new());
    for c in results.cells.iter().filter(|c| c.scenario == scenario && c.variant() == variant) {
        if !targets.contains(&c.target) {
            targets.push(c.target.clone());
        }
        if !workloads.contains(&c.workload) {
            workloads.push(c.workload.clone());
        }
    }
    targets.sort();
    workloads.sort();
    (targets, workloads)
}

/// Why `variant` cannot count as unchanged, or None when it is.
fn why_changed(a: &Run, b: &Run, scenario: &str, variant: &str) -> Option<String> {
    let (targets, workloads) = used(a.results, scenario, variant);
    if (targets.clone(), workloads.clone()) != used(b.results, scenario, variant) {
        return Some("its cells ran other targets or workloads".into());
    }
    if a.results.manifest.plugins.iter().map(|p| (&p.path, &p.sha256)).ne(b
        .results
        .manifest
        .plugins
        .iter()
        .map(|p| (&p.path, &p.sha256)))
    {
        return Some("the spec's plugins differ (path or SHA-256)".into());
    }
    for target in &targets {
        if let Some(why) = server_changed(a.results, b.results, target) {
            return Some(why);
        }
    }
    let (Some(spec_a), Some(spec_b)) = (a.spec, b.spec) else {
        return Some("a run directory has no readable spec.yaml to show its definitions did not change".into());
    };
    if scenario_of(spec_a, scenario) != scenario_of(spec_b, scenario) {
        return Some(format!("scenario `{scenario}` is defined differently"));
    }
    for target in &targets {
        if spec_a.get("targets").and_then(|t| t.get(target)) != spec_b.get("targets").and_then(|t| t.get(target)) {
            return Some(format!("target `{target}` is defined differently"));
        }
    }
    for workload in &workloads {
        if spec_a.get("workloads").and_then(|w| w.get(workload))
            != spec_b.get("workloads").and_then(|w| w.get(workload))
        {
            return Some(format!("workload `{workload}` is defined differently"));
        }
    }
    None
}

fn scenario_of<'v>(spec: &'v Value, name: &str) -> Option<&'v Value> {
    spec.get("scenarios")?.as_sequence()?.iter().find(|s| s.get("name").and_then(Value::as_str) == Some(name))
}

/// Why the servers of `target` (each matrix instance) are not shown the
/// same in both runs, or None when they are.
fn server_changed(a: &Results, b: &Results, target: &str) -> Option<String> {
    let (sa, sb) = (servers(a, target), servers(b, target));
    if sa.is_empty() || sb.is_empty() {
        return Some(format!("target `{target}` has no provenance in one of the runs"));
    }
    if sa.len() != sb.len() || sa.iter().zip(&sb).any(|(x, y)| x.instance != y.instance) {
        return Some(format!("target `{target}` ran other matrix instances"));
    }
    for (x, y) in sa.iter().zip(&sb) {
        let digest =
            |t: &TargetInfo| t.binary.as_ref().map(|b| b.sha256.clone()).filter(|d| !d.starts_with("unavailable"));
        let (Some(da), Some(db)) = (digest(x), digest(y)) else {
            return Some(format!(
                "target `{target}` ({} provider) has no binary digest: faultline cannot show it did not change",
                x.provider
            ));
        };
        let name = x.instance.as_deref().unwrap_or(target);
        if da != db {
            return Some(format!("`{name}` ran another binary (SHA-256 {} → {})", short(&da), short(&db)));
        }
        if x.args != y.args {
            return Some(format!("`{name}` ran with other arguments ({:?} → {:?})", x.args, y.args));
        }
        if (&x.server, &x.kind, &x.provider, &x.image) != (&y.server, &y.kind, &y.provider, &y.image) {
            return Some(format!("`{name}` is another server ({} → {})", x.server, y.server));
        }
    }
    None
}

/// A target's servers (one per matrix instance), in instance order.
fn servers<'r>(results: &'r Results, target: &str) -> Vec<&'r TargetInfo> {
    let mut v: Vec<&TargetInfo> = results.targets.iter().filter(|t| t.name == target).collect();
    v.sort_by(|x, y| x.instance.cmp(&y.instance));
    v
}

fn short(digest: &str) -> &str {
    &digest[..digest.len().min(12)]
}
