//! A capacity search's result as results.json holds it: the highest
//! open-loop rate at which a scenario's SLO held, what bounded the search
//! (the target, the load generator, the search's own range or step budget)
//! and every step it ran, for the knee chart and the table of steps.
//!
//! The search itself is the engine's; the gates read `capacity`, and the
//! comparisons take ratios of it only where it is the target's number.

use serde::{Deserialize, Serialize};

use crate::stats::ClientCpu;

/// One search: a cell of a scenario with `capacity:`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CapacitySearch {
    /// The SLO every step was held to, as the spec wrote it.
    pub slo: String,
    /// The range of rates the search was given, ops per second.
    #[serde(default)]
    pub rate_from: f64,
    #[serde(default)]
    pub rate_to: f64,
    /// The latency limits the SLO sets, for drawing beside the steps.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slo_limits: Vec<SloLimit>,
    /// The highest offered rate, ops per second, at which the SLO held in
    /// its step and in every confirmation at it; none when no rate did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<f64>,
    /// The lowest offered rate at which the SLO failed; none when none did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_at: Option<f64>,
    pub bound: Bound,
    pub steps: Vec<CapacityStep>,
    /// How far apart the repeats' capacities may be (a share of their
    /// median either way) and still be one number (default ±15%).
    #[serde(default = "default_tolerance")]
    pub tolerance: f64,
    /// Why the search's own steps contradict each other, if they do: a rate
    /// held above one that failed (each failure tried again first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub non_monotone: Option<String>,
    /// The scenario's repeats of this search taken together, when it has
    /// more than one (the same on each repeat's search).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeats: Option<Repeats>,
}

fn default_tolerance() -> f64 {
    0.15
}

/// The repeats of one capacity search (the same scenario, variant and
/// matrix point): one number only when they agree within the tolerance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Repeats {
    /// Repeats run, and how many of them found the target's own capacity
    /// (the others are bounds: client-bound, out of steps, ...).
    pub count: u32,
    pub found: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// Half the range over the median: the capacities lie within ± this
    /// share of their median.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread: Option<f64>,
    pub repeatable: bool,
    /// Why not, when not.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub why: String,
}

/// One latency limit of an SLO: `p99(set) < 100ms` is `p99(set)`, 100.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SloLimit {
    pub metric: String,
    pub ms: f64,
}

/// What ended the search, and so what `capacity` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Bound {
    /// The SLO failed above `capacity` and held at it, confirmed, within
    /// the search's precision: the target's capacity.
    Target,
    /// Out of steps before the precision was reached (or the knee was
    /// confirmed): the target's capacity lies between `capacity` and
    /// `failed_at` (at least `capacity` when no rate had failed yet).
    Steps,
    /// The load generator, not the target, was the limit (its CPU busy, or
    /// in-flight slots empty while ops went unsent): the target's capacity
    /// is at least `capacity`.
    Client,
    /// The SLO held at the top of the search's range: at least that.
    Ceiling,
    /// The SLO failed at the bottom of the range: below it.
    Floor,
    /// A step did not complete (failed, interrupted) or its SLO could not
    /// be judged: the capacity is at least what held before it.
    Stopped,
}

impl Bound {
    pub fn as_str(self) -> &'static str {
        match self {
            Bound::Target => "target",
            Bound::Steps => "steps",
            Bound::Client => "client",
            Bound::Ceiling => "ceiling",
            Bound::Floor => "floor",
            Bound::Stopped => "stopped",
        }
    }
}

impl CapacitySearch {
    /// Why this capacity is not one number a reader can take, if so: its
    /// steps contradict each other, or its repeats disagree.
    pub fn not_repeatable(&self) -> Option<String> {
        if let Some(why) = &self.non_monotone {
            return Some(why.clone());
        }
        self.repeats.as_ref().filter(|r| !r.repeatable).map(|r| r.why.clone())
    }

    /// The capacity as a reader takes it: `48,000/s`, `at least 48,000/s
    /// (client-bound)`, `below 1,000/s`.
    pub fn reading(&self) -> String {
        let rate = |r: f64| format!("{}/s", crate::format::thousands(r.round() as u64));
        let lowest = self.steps.first().map(|s| s.rate).unwrap_or_default();
        match (self.bound, self.capacity) {
            (Bound::Client, None) => format!("unknown: faultline could not offer {} (client-bound)", rate(lowest)),
            (Bound::Stopped, None) => "unknown (the search stopped)".to_string(),
            (_, None) => format!("below {}", rate(lowest)),
            (Bound::Floor, Some(c)) => format!("below {}", rate(c)),
            (Bound::Target, Some(c)) => rate(c),
            (Bound::Steps, Some(c)) => match self.failed_at {
                Some(f) => format!("{} to {} (out of steps)", rate(c), rate(f)),
                None => format!("at least {} (out of steps)", rate(c)),
            },
            (Bound::Client, Some(c)) => format!("at least {} (client-bound)", rate(c)),
            (Bound::Ceiling, Some(c)) => format!("at least {} (the search's top rate)", rate(c)),
            (Bound::Stopped, Some(c)) => format!("at least {} (the search stopped)", rate(c)),
        }
    }

    /// The capacity where it is the target's own number, found within the
    /// precision and confirmed (a ratio of it means something).
    pub fn target_capacity(&self) -> Option<f64> {
        match self.bound {
            Bound::Target => self.capacity,
            _ => None,
        }
    }

    /// Where the target's capacity lies, as far as the search knows:
    /// `[capacity, capacity]` when found; up to `failed_at` (just below it)
    /// when out of steps; unbounded above when the client, the range's top or
    /// a stop ended it; from 0 to below the lowest rate tried at the floor.
    pub fn interval(&self) -> (f64, f64) {
        let below = |r: f64| r * (1.0 - 1e-9);
        let lowest = self.steps.first().map_or(0.0, |s| s.rate);
        let found = self.capacity.unwrap_or(0.0);
        match self.bound {
            Bound::Target => (found, found),
            Bound::Steps => (found, self.failed_at.map_or(f64::INFINITY, below)),
            Bound::Client | Bound::Ceiling | Bound::Stopped => (found, f64::INFINITY),
            Bound::Floor => (0.0, below(self.failed_at.unwrap_or(lowest))),
        }
    }
}

/// Why a step's rate was tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Growing geometrically from the bottom of the range.
    Grow,
    /// Halving the gap (geometrically) between what held and what failed.
    Bisect,
    /// Again at the knee, to see that it holds.
    Confirm,
    /// Again at a rate that just failed: a failure counts once it repeats.
    Retry,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Grow => "grow",
            Phase::Bisect => "bisect",
            Phase::Confirm => "confirm",
            Phase::Retry => "retry",
        }
    }
}

/// One step of the search: an open loop at one rate, and its judgement.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CapacityStep {
    /// The rate offered, ops per second.
    pub rate: f64,
    pub phase: Phase,
    /// Ops sent per second, and ops that succeeded per second.
    pub achieved_rate: f64,
    pub throughput: f64,
    /// Of the worst op kind (as latency gates take it), milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ms: Option<f64>,
    pub error_rate: f64,
    pub unsent: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cpu: Option<ClientCpu>,
    /// Whether the SLO held, on the load asked for.
    pub met: bool,
    /// Whether the load generator was the limit in this step (its CPU
    /// saturated, or the host too busy to tell).
    pub client_bound: bool,
    /// A failure its retry did not repeat: noise, not the target's limit.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub noise: bool,
    /// How busy the host was over the step's window, and why that
    /// disturbed the step, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<crate::stats::HostLoad>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disturbed: Option<String>,
    /// The SLO's evidence (`p99(set) 3.1ms < 100ms, ...`), or why the step
    /// was not judged as met.
    pub why: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search(bound: Bound, capacity: Option<f64>, failed_at: Option<f64>) -> CapacitySearch {
        let step = CapacityStep {
            rate: 1000.0,
            phase: Phase::Grow,
            achieved_rate: 1000.0,
            throughput: 1000.0,
            p50_ms: None,
            p99_ms: None,
            error_rate: 0.0,
            unsent: 0,
            client_cpu: None,
            met: true,
            client_bound: false,
            noise: false,
            host: None,
            disturbed: None,
            why: String::new(),
        };
        CapacitySearch {
            slo: "errors == 0".into(),
            rate_from: 1000.0,
            rate_to: 100_000.0,
            slo_limits: vec![],
            capacity,
            failed_at,
            bound,
            steps: vec![step],
            tolerance: 0.15,
            non_monotone: None,
            repeats: None,
        }
    }

    #[test]
    fn a_capacity_reads_as_what_it_is() {
        assert_eq!(search(Bound::Target, Some(48_000.0), Some(50_000.0)).reading(), "48,000/s");
        assert_eq!(
            search(Bound::Steps, Some(48_000.0), Some(52_000.0)).reading(),
            "48,000/s to 52,000/s (out of steps)"
        );
        assert_eq!(search(Bound::Client, Some(48_000.0), None).reading(), "at least 48,000/s (client-bound)");
        assert_eq!(search(Bound::Floor, None, Some(1000.0)).reading(), "below 1,000/s");
        assert_eq!(
            search(Bound::Client, None, Some(1000.0)).reading(),
            "unknown: faultline could not offer 1,000/s (client-bound)"
        );
        // Only the target's own number is compared; the others are intervals.
        assert_eq!(search(Bound::Target, Some(48_000.0), None).target_capacity(), Some(48_000.0));
        assert_eq!(search(Bound::Client, Some(48_000.0), None).target_capacity(), None);
        assert_eq!(search(Bound::Target, Some(48_000.0), Some(50_000.0)).interval(), (48_000.0, 48_000.0));
        assert_eq!(search(Bound::Client, Some(48_000.0), None).interval(), (48_000.0, f64::INFINITY));
        let (low, high) = search(Bound::Steps, Some(48_000.0), Some(52_000.0)).interval();
        assert!(low == 48_000.0 && high < 52_000.0 && high > 51_999.0);
        let (low, high) = search(Bound::Floor, None, Some(1000.0)).interval();
        assert!(low == 0.0 && high < 1000.0 && high > 999.0);
    }
}
