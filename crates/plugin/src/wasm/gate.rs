//! Gate rule plugins (world `gate`): a fresh instance per evaluation gets
//! the run's measurements and returns a verdict with a criteria table.

use super::sandbox::{PluginError, Sandbox};
use super::{Limits, Plugin, PluginHost};
use faultline_model::checks::CheckStatus;
use faultline_model::results::{CellResult, CellStatus, Criterion, GateOutcome};
use faultline_model::stats::{ErrorCounts, LatencyStats};

mod bindings {
    wasmtime::component::bindgen!({ path: "../../plugins/wit", world: "gate" });
}

use bindings::exports::faultline::plugin::rule as wit;

pub use crate::interface::{Decision, GATE_DEADLINE as DEFAULT_DEADLINE};

pub fn evaluate(
    host: &PluginHost,
    plugin: &Plugin,
    limits: Limits,
    config: &serde_json::Value,
    run_name: &str,
    complete: bool,
    cells: &[&CellResult],
) -> Result<Decision, PluginError> {
    let mut sandbox = Sandbox::new(host, plugin, limits, 0);
    let linker = Sandbox::linker(host, plugin).map_err(|e| sandbox.error("instantiate", format!("{e:#}")))?;
    let bindings = sandbox
        .call("instantiate", limits.deadline, |store| bindings::Gate::instantiate(store, &plugin.component, &linker))?;
    let summary =
        wit::RunSummary { name: run_name.to_string(), complete, cells: cells.iter().map(|c| cell(c)).collect() };
    let config = if config.is_null() { "{}".to_string() } else { config.to_string() };
    let rule = bindings.faultline_plugin_rule();
    let verdict = sandbox.call("evaluate", limits.deadline, |store| rule.call_evaluate(store, &config, &summary))?;
    let verdict = verdict.map_err(|reason| sandbox.reject("evaluate", format!("could not decide: {reason}")))?;
    let criteria: Vec<Criterion> = verdict
        .criteria
        .into_iter()
        .map(|c| Criterion { name: c.name, evidence: c.evidence, result: outcome(c.outcome) })
        .collect();
    let claimed = outcome(verdict.outcome);
    // A plugin cannot pass a run its own table does not support.
    if claimed == GateOutcome::Pass && criteria.iter().any(|c| c.result != GateOutcome::Pass) {
        let reason = "said pass although one of its criteria did not pass".to_string();
        return Err(sandbox.reject("evaluate", reason));
    }
    if claimed == GateOutcome::Pass && criteria.is_empty() {
        return Err(sandbox.reject("evaluate", "said pass without a single criterion to show for it".into()));
    }
    Ok(Decision { outcome: claimed, criteria })
}

fn outcome(o: wit::Outcome) -> GateOutcome {
    match o {
        wit::Outcome::Pass => GateOutcome::Pass,
        wit::Outcome::Fail => GateOutcome::Fail,
        wit::Outcome::Incomplete => GateOutcome::Incomplete,
    }
}

fn errors(e: &ErrorCounts) -> wit::ErrorCounts {
    wit::ErrorCounts { deadline: e.deadline, connection: e.connection, server: e.server, hang: e.hang }
}

fn latency(l: &LatencyStats) -> wit::Latency {
    wit::Latency { p50_ms: l.p50, p95_ms: l.p95, p99_ms: l.p99, p999_ms: l.p999, max_ms: l.max }
}

fn cell(c: &CellResult) -> wit::CellSummary {
    let status = match c.status {
        CellStatus::Completed => wit::CellStatus::Completed,
        CellStatus::Interrupted => wit::CellStatus::Interrupted,
        CellStatus::Failed => wit::CellStatus::Failed,
        CellStatus::Skipped => wit::CellStatus::Skipped,
    };
    let stats = c.stats.as_ref();
    let ops = stats
        .map(|s| {
            s.per_op
                .iter()
                .map(|(kind, o)| wit::OpSummary {
                    kind: kind.clone(),
                    ok: o.ok,
                    failed: o.failed,
                    throughput: o.throughput,
                    latency: o.latency_ms.as_ref().map(latency),
                    errors: errors(&o.errors),
                })
                .collect()
        })
        .unwrap_or_default();
    let faults = c
        .faults
        .iter()
        .map(|f| {
            let impact = stats.and_then(|s| s.fault_impact.iter().find(|i| i.fault == f.name));
            // results.json counts these from the request; the WIT from the window's start.
            let at = |after_request: Option<f64>| after_request.map(|t| f.requested_s + t);
            wit::FaultWindow {
                name: f.name.clone(),
                action: f.action.clone(),
                target: f.target.clone(),
                requested_s: f.requested_s,
                confirmed_s: f.confirmed_s,
                healed_s: f.healed_s,
                error: f.error.clone(),
                // Not recovered by the end of the cell: an unbounded window.
                denied_window_s: match impact.is_some_and(|i| i.not_recovered) {
                    true => Some(f64::INFINITY),
                    false => at(impact.and_then(|i| i.denied_window_s)),
                },
                first_success_s: at(impact.and_then(|i| i.first_success_s)),
                recovered_s: at(impact.and_then(|i| i.recovered_s)),
            }
        })
        .collect();
    let checks = c
        .checks
        .iter()
        .map(|k| wit::CheckSummary {
            checker: k.checker.clone(),
            status: match k.status {
                CheckStatus::Ok => wit::CheckStatus::Pass,
                CheckStatus::Violated => wit::CheckStatus::Fail,
                CheckStatus::Unknown => wit::CheckStatus::Unknown,
            },
            checked: k.checked,
            violations: k.violations,
            note: k.note.clone(),
        })
        .collect();
    wit::CellSummary {
        scenario: c.scenario.clone(),
        profile: c.profile.clone(),
        shape: c.shape.clone(),
        target: c.target.clone(),
        repeat: c.repeat,
        status,
        measured_s: c.measured_s,
        ok: stats.map_or(0, |s| s.ok),
        failed: stats.map_or(0, |s| s.failed),
        throughput: stats.map_or(0.0, |s| s.throughput),
        errors: errors(&stats.map(|s| s.errors).unwrap_or_default()),
        over_deadline: stats.map_or(0, |s| s.over_deadline),
        ops,
        faults,
        checks,
    }
}
