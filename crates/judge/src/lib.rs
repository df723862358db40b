//! The judging layer: what a run's measurements add up to. It reads the
//! cells' results (and the spec that asked for them) and nothing else: the
//! variants' ratios with their noise ([`comparison`]), the gates
//! ([`gate`]: expressions and wasm plugins) and the verdict ([`verdict`]),
//! and the crash matrix. The engine measures; the CLI asks [`judge`] what
//! the measurements say and writes results.json. The engine also asks a
//! capacity step's SLO here while it searches ([`gate::holds_in`]).

pub mod comparison;
pub mod gate;
pub mod verdict;

use faultline_model::recovery::RecoveryRow;
use faultline_model::results::{CellResult, Comparison, GateResult, Verdict};
use faultline_plugin::SpecPlugins;
use faultline_spec::Spec;

/// How the run went, besides its cells: what the verdict weighs too.
pub struct RunFacts<'a> {
    /// Why only part of the plan ran (`--quick`, `--only`); empty when all did.
    pub subset_reasons: &'a [String],
    /// The run's own errors (a target that never came up).
    pub errors: &'a [String],
    pub interrupted: bool,
}

/// What the measurements say.
pub struct Judged {
    pub comparisons: Vec<Comparison>,
    pub gates: Vec<GateResult>,
    pub verdict: Verdict,
    pub verdict_reasons: Vec<String>,
    pub crash_recovery: Vec<RecoveryRow>,
}

/// Judges a run's `cells` as `spec` asks: ratios first (ratio gates read
/// them), then every gate, then the verdict over gates, cells and `run`.
pub fn judge(spec: &Spec, cells: &[CellResult], plugins: &SpecPlugins, run: RunFacts<'_>) -> Judged {
    let comparisons = comparison::compare(spec, cells);
    let context = gate::RunContext {
        comparisons: &comparisons,
        scenarios: &spec.scenarios,
        run_name: &spec.name,
        complete: run.subset_reasons.is_empty() && !run.interrupted,
        plugins,
    };
    let gates = gate::evaluate(&spec.gates, cells, &context);
    let (verdict, verdict_reasons) = verdict::decide(&gates, cells, run.subset_reasons, run.errors, run.interrupted);
    Judged { comparisons, gates, verdict, verdict_reasons, crash_recovery: faultline_check::durability::matrix(cells) }
}
