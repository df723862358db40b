//! Gate rules: the `gate` world.
//!
//! `use faultline_plugin::gate::*;` brings in everything a gate needs.

pub use crate::gate_bindings::exports::faultline::plugin::rule::{
    CellStatus, CellSummary, CheckStatus, CheckSummary, Criterion, ErrorCounts, FaultWindow, Latency, OpSummary,
    Outcome, RunSummary, Verdict,
};
pub use crate::Config;

/// A gate rule: judges a whole run from its measurements.
pub trait Gate: 'static {
    /// Returns the verdict with one [`Criterion`] row per thing judged. An
    /// `Err` (e.g. a config the gate cannot use) makes the gate itself
    /// fail to evaluate, which the host reports as such.
    fn evaluate(config: &Config, summary: &RunSummary) -> Result<Verdict, String>;
}

impl Outcome {
    /// The worse of two outcomes: fail, then incomplete, then pass.
    pub fn worst(self, other: Outcome) -> Outcome {
        match (self, other) {
            (Outcome::Fail, _) | (_, Outcome::Fail) => Outcome::Fail,
            (Outcome::Incomplete, _) | (_, Outcome::Incomplete) => Outcome::Incomplete,
            _ => Outcome::Pass,
        }
    }

    /// `PASS`, `FAIL` or `INCOMPLETE`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Pass => "PASS",
            Outcome::Fail => "FAIL",
            Outcome::Incomplete => "INCOMPLETE",
        }
    }
}

impl Criterion {
    pub fn new(name: impl Into<String>, evidence: impl Into<String>, outcome: Outcome) -> Criterion {
        Criterion { name: name.into(), evidence: evidence.into(), outcome }
    }

    pub fn pass(name: impl Into<String>, evidence: impl Into<String>) -> Criterion {
        Criterion::new(name, evidence, Outcome::Pass)
    }

    pub fn fail(name: impl Into<String>, evidence: impl Into<String>) -> Criterion {
        Criterion::new(name, evidence, Outcome::Fail)
    }

    /// The measurement the criterion needs is missing: never a pass.
    pub fn incomplete(name: impl Into<String>, evidence: impl Into<String>) -> Criterion {
        Criterion::new(name, evidence, Outcome::Incomplete)
    }

    /// Pass when `ok`, else fail.
    pub fn check(name: impl Into<String>, evidence: impl Into<String>, ok: bool) -> Criterion {
        Criterion::new(name, evidence, if ok { Outcome::Pass } else { Outcome::Fail })
    }
}

impl Verdict {
    /// The overall outcome of the rows: fail if any row fails, else
    /// incomplete if any is incomplete (or there are none), else pass.
    pub fn from_criteria(criteria: Vec<Criterion>) -> Verdict {
        let outcome = if criteria.is_empty() {
            Outcome::Incomplete
        } else {
            criteria.iter().fold(Outcome::Pass, |o, c| o.worst(c.outcome))
        };
        Verdict { outcome, criteria }
    }
}

impl ErrorCounts {
    /// Failed ops of every class.
    pub fn total(&self) -> u64 {
        self.deadline + self.connection + self.server + self.hang
    }

    /// `deadline 3, connection 1` (only the non-zero classes), or `none`.
    pub fn describe(&self) -> String {
        let parts: Vec<String> = [
            ("deadline", self.deadline),
            ("connection", self.connection),
            ("server", self.server),
            ("hang", self.hang),
        ]
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
        if parts.is_empty() {
            "none".to_string()
        } else {
            parts.join(", ")
        }
    }
}

impl CellSummary {
    /// `scenario/profile/target#repeat`, the way the host's report names cells.
    pub fn label(&self) -> String {
        format!("{}/{}/{}#{}", self.scenario, self.profile, self.target, self.repeat)
    }

    pub fn is_completed(&self) -> bool {
        self.status == CellStatus::Completed
    }

    /// The summary of one op kind, if the cell ran it.
    pub fn op(&self, kind: &str) -> Option<&OpSummary> {
        self.ops.iter().find(|o| o.kind == kind)
    }

    /// The result of one checker, if it ran on this cell.
    pub fn check(&self, checker: &str) -> Option<&CheckSummary> {
        self.checks.iter().find(|c| c.checker == checker)
    }

    /// `failed / (ok + failed)`, 0 when nothing ran.
    pub fn error_ratio(&self) -> f64 {
        let all = self.ok + self.failed;
        if all == 0 {
            0.0
        } else {
            self.failed as f64 / all as f64
        }
    }
}

impl CellStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            CellStatus::Completed => "completed",
            CellStatus::Interrupted => "interrupted",
            CellStatus::Failed => "failed",
            CellStatus::Skipped => "skipped",
        }
    }
}

impl CheckStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            CheckStatus::Pass => "pass",
            CheckStatus::Fail => "fail",
            CheckStatus::Unknown => "unknown",
        }
    }
}

/// Glue between [`Gate`] and the generated bindings; used by
/// [`export_gate!`](crate::export_gate).
#[doc(hidden)]
pub mod __glue {
    use super::*;

    pub use crate::gate_bindings::exports::faultline::plugin::rule::Guest;

    pub fn evaluate<T: Gate>(config: String, summary: RunSummary) -> Result<Verdict, String> {
        let config = Config::parse(&config)?;
        T::evaluate(&config, &summary)
    }
}

/// Exports a [`Gate`] as the component's `rule` interface. Use it once, at
/// the crate root of a `cdylib`.
#[macro_export]
macro_rules! export_gate {
    ($ty:ty) => {
        // Only on wasm: natively the exports' names (`faultline:plugin/...`)
        // are no valid symbols, and `cargo test` of a plugin crate needs none.
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct __FaultlineGate;

            impl $crate::gate::__glue::Guest for __FaultlineGate {
                fn evaluate(
                    config: ::std::string::String,
                    summary: $crate::gate::RunSummary,
                ) -> ::std::result::Result<$crate::gate::Verdict, ::std::string::String> {
                    $crate::gate::__glue::evaluate::<$ty>(config, summary)
                }
            }

    $crate::gate_bindings::__export_gate!(__FaultlineGate with_types_in $crate::gate_bindings);
        };
    };
}
