//! `capacity:` on a scenario: search for the highest open-loop rate at
//! which the scenario's SLO holds (the saturation knee), instead of running
//! the profile's one rate. What the spec says and what makes it sound are
//! here; the search itself is the engine's (crates/engine/src/engine/capacity.rs).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::gate::{self, Reads};
use crate::model::{Load, ScenarioSpec, Spec};
use crate::units::Dur;
use crate::validate::{Problem, MAX_OPEN_RATE, MIN_OPEN_RATE};

/// `capacity: {rate: {from: 1000, to: 2000000}, slo: "p99(set) < 100ms and
/// error_rate < 0.01 and unsent == 0", step: 30s}`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CapacitySpec {
    /// The open-loop rates searched, ops per second: the search starts at
    /// `from` and never offers more than `to`.
    pub rate: RateRange,
    /// What a step must meet, in the gate language, judged on the step
    /// alone, e.g. `p99(set) < 100ms and error_rate < 0.01`. A step whose
    /// open loop sent less than the profile's `min_sent` of its schedule
    /// never meets it.
    pub slo: String,
    /// Each step's measured window (default: the scenario's `duration`);
    /// every step warms up first, like every cell.
    #[serde(default)]
    pub step: Option<Dur>,
    /// While the SLO holds, the next rate is this many times the last
    /// (default 2).
    #[serde(default = "default_growth")]
    pub growth: f64,
    /// The search bisects until the highest rate that held and the lowest
    /// that failed are within this share of each other (default 0.05).
    #[serde(default = "default_precision")]
    pub precision: f64,
    /// Steps run again at the knee, each of which must hold too, before it
    /// is the capacity (default 1).
    #[serde(default = "default_confirm")]
    pub confirm: u32,
    /// A step that fails is run again this many times before the search
    /// takes the failure (and bisects below it); one that then holds was
    /// noise (default 1).
    #[serde(default = "default_retries")]
    pub retries: u32,
    /// How far the repeats' capacities may lie from their median, either
    /// way, and still be one number (default 0.15: ±15%). Wider, or steps
    /// that contradict each other, and the capacity is "not repeatable": a
    /// gate on it is INCOMPLETE.
    #[serde(default = "default_tolerance")]
    pub tolerance: f64,
    /// The most steps one search runs, confirmations and retries included
    /// (default 32: a noisy search, its failures retried, took up to 24 here).
    #[serde(default = "default_max_steps")]
    pub max_steps: u32,
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RateRange {
    pub from: f64,
    pub to: f64,
}

fn default_growth() -> f64 {
    2.0
}

fn default_precision() -> f64 {
    0.05
}

fn default_confirm() -> u32 {
    1
}

fn default_retries() -> u32 {
    1
}

fn default_tolerance() -> f64 {
    0.15
}

fn default_max_steps() -> u32 {
    32
}

/// The most steps a search may be given: each is a whole warmed-up window.
pub const MAX_STEPS: u32 = 1_000;

/// The finest precision a search may ask: far below any step's noise, and
/// far above where bisection could no longer find a rate in between.
pub const MIN_PRECISION: f64 = 0.001;

impl CapacitySpec {
    /// The most steps a search runs when no confirmation fails: growing
    /// from `from` to `to`, bisecting one growth factor down to the
    /// precision, and the confirmations; at most `max_steps`.
    pub fn planned_steps(&self) -> u32 {
        let bisect = (self.growth.ln() / self.precision.ln_1p()).log2().ceil().max(0.0) as u32;
        // The first rate that fails is retried, and about half the
        // bisections' (those that land above the knee).
        let retried = (1 + bisect.div_ceil(2)).saturating_mul(self.retries);
        self.steps_to_top()
            .saturating_add(bisect)
            .saturating_add(self.confirm)
            .saturating_add(retried)
            .min(self.max_steps)
    }

    /// The steps growing from `from` to `to` take, the top included.
    pub fn steps_to_top(&self) -> u32 {
        ((self.rate.to / self.rate.from).ln() / self.growth.ln()).ceil().max(0.0) as u32 + 1
    }
}

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
    if let Some((op, sent)) = crate::validate::op_never_sent(spec, &slo.ops(), std::iter::once(s)) {
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
    if let Some((i, p)) = s.probes.iter().enumerate().find(|(_, p)| p.when != crate::probe::ProbeWhen::Start) {
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
