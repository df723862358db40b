//! `capacity:` on a scenario: search for the highest open-loop rate at
//! which the scenario's SLO holds (the saturation knee), instead of running
//! the profile's one rate. What the spec says is here, what makes it sound
//! in validate/capacity.rs; the search itself is the engine's
//! (crates/engine/src/engine/capacity.rs).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use faultline_model::units::Dur;

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
