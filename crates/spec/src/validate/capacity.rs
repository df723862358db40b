//! What makes a capacity search sound (the spec's `capacity:`, capacity.rs).

use crate::capacity::{MAX_STEPS, MIN_PRECISION};
use crate::gate;
use crate::limits::{MAX_OPEN_RATE, MIN_OPEN_RATE};
use crate::metric::Reads;
use crate::model::{Load, ScenarioSpec, Spec};
use crate::problem::Problem;

/// A capacity scenario offers open-loop rates, undisturbed and unchecked:
/// its profiles are open loops without stages (their connections and
/// `in_flight` are kept, their rate is the search's), it has no faults and
/// no checkers, and its SLO is a gate expression that one step can answer.
pub fn validate(spec: &Spec, s: &ScenarioSpec, at: &str, catalog: &dyn crate::Catalog) -> Result<(), Problem> {
    let Some(c) = &s.capacity else { return Ok(()) };
    let at = format!("{at}.capacity");
    let rate_ok = |r: f64| r.is_finite() && (MIN_OPEN_RATE..=MAX_OPEN_RATE).contains(&r);
    if !rate_ok(c.rate.from) {
        return Err((format!("{at}.rate.from"), "must be a rate from 0.0000116 to 1000000000 ops per second".into()));
    }
    if !rate_ok(c.rate.to) || c.rate.to <= c.rate.from {
        return Err((
            format!("{at}.rate.to"),
            format!("must be above `from` ({}) and at most 1000000000 ops per second", c.rate.from),
        ));
    }
    if !(c.growth.is_finite() && c.growth > 1.0 && c.growth <= 100.0) {
        return Err((format!("{at}.growth"), "must be above 1 and at most 100, e.g. 2 to double the rate".into()));
    }
    if !(MIN_PRECISION..1.0).contains(&c.precision) {
        return Err((
            format!("{at}.precision"),
            format!("must be a share from {MIN_PRECISION} to below 1, e.g. 0.05 (rates closer than that are one rate to a step's noise)"),
        ));
    }
    if c.confirm > 100 {
        return Err((format!("{at}.confirm"), "must be at most 100".into()));
    }
    if c.max_steps < 2 || c.max_steps > MAX_STEPS {
        return Err((format!("{at}.max_steps"), format!("must be from 2 to {MAX_STEPS}")));
    }
    // A search that cannot reach its top rate and confirm it could only end
    // "out of steps" on a target that holds everywhere.
    let reach = c.steps_to_top().saturating_add(c.confirm);
    if c.max_steps < reach {
        return Err((
            format!("{at}.max_steps"),
            format!(
                "{} steps cannot reach rate.to ({}) from rate.from ({}) growing {}x a step and confirm it: that takes {reach}; raise max_steps to at least {reach} or growth",
                c.max_steps, c.rate.to, c.rate.from, c.growth
            ),
        ));
    }
    if c.retries > 10 {
        return Err((format!("{at}.retries"), "must be at most 10".into()));
    }
    if !(c.tolerance > 0.0 && c.tolerance < 1.0) {
        return Err((
            format!("{at}.tolerance"),
            "must be a share above 0 and below 1, e.g. 0.15 for capacities within ±15% of their median".into(),
        ));
    }
    if c.step.is_some_and(|d| d.0.is_zero()) {
        return Err((format!("{at}.step"), "must be longer than 0s".into()));
    }
    let slo = gate::parse(&c.slo, catalog.checkers()).map_err(|e| (format!("{at}.slo"), e))?;
    let refuse = |why: &str| Err((format!("{at}.slo"), why.to_string()));
    if slo.uses_ratios() {
        return refuse("is judged on one step: a ratio between variants has no place in it");
    }
    if !slo.faults().is_empty() {
        return refuse("names a fault, but a capacity search runs no faults");
    }
    if !slo.stages().is_empty() {
        return refuse("names a stage, but a capacity step has none");
    }
    if !slo.checkers().is_empty() {
        return refuse("reads a checker's result, but a capacity search runs no checkers");
    }
    if slo.reads(Reads::Capacity) {
        return refuse("reads `capacity`, which is what the search finds: give what each step must meet");
    }
    if let Some((op, sent)) = super::op_never_sent(spec, &slo.ops(), std::iter::once(s)) {
        let op = op.as_str();
        return refuse(&format!(
            "reads `{op}` ops, but the searched workload sends only {sent}: a step could never meet it"
        ));
    }
    for (j, p) in s.profiles.iter().enumerate() {
        let Some(profile) = spec.profiles.get(p) else { continue };
        match profile.load() {
            Load::Open(o) if o.stages.is_none() => {}
            Load::Open(_) => {
                return Err((
                    format!("{}.profiles[{j}]", at.trim_end_matches(".capacity")),
                    format!("profile `{p}` has stages, but a capacity search sets the rate of each step itself: use an open profile with connections and in_flight only"),
                ))
            }
            Load::Closed(_) => {
                return Err((
                    format!("{}.profiles[{j}]", at.trim_end_matches(".capacity")),
                    format!("profile `{p}` is a closed loop, but a capacity search offers open-loop rates: use `open: {{connections: 4, in_flight: 64}}` (the search sets the rate)"),
                ))
            }
        }
    }
    let scenario = at.trim_end_matches(".capacity");
    if !s.faults.is_empty() {
        return Err((
            format!("{scenario}.faults"),
            "a capacity search measures the target undisturbed: run the faults in a scenario of their own, at the rate it finds".into(),
        ));
    }
    if let Some((i, p)) = s.probes.iter().enumerate().find(|(_, p)| p.when != faultline_model::probes::ProbeWhen::Start)
    {
        return Err((
            format!("{scenario}.probes[{i}].when"),
            format!("probe `{}` would run at every step of the search and keep the last step's output: a capacity search takes `when: start` probes only", p.name),
        ));
    }
    if s.checkers.as_ref().is_some_and(|c| !c.is_empty()) {
        return Err((
            format!("{scenario}.checkers"),
            "a capacity search runs no checkers (recording a history costs throughput): check in a scenario of its own, at the rate it finds".into(),
        ));
    }
    Ok(())
}
