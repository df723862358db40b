//! What the spec language needs to know of a checker: its name, what it
//! judges, which op kinds it can follow, what it needs of a workload and
//! of a target, and the gate metrics it provides. Each checker declares
//! this itself ([`CheckerInfo`], implemented beside its judging code in
//! faultline-check and listed once in that crate's registry); validation
//! and the gate parser ask the build's checkers through the [`Catalog`]
//! (crate::Catalog), so no list of checker names is kept here.

use faultline_model::checks::{CheckResult, CheckStatus};
use faultline_model::ops::OpKind;
use faultline_model::results::CellResult;
use faultline_model::stats::CellStats;

use crate::kind_info::KindInfo;
use crate::metric::{Args, GateMetric, MetricRef, Reads, Unit, Value};

/// A checker as the spec sees it.
pub trait CheckerInfo: Sync {
    /// The name a spec lists under `checkers:` (`stale-read-after-ack`).
    fn name(&self) -> &'static str;
    /// What its `checked` counts: the things that could have shown a
    /// violation. With none of them judged it has passed nothing.
    fn judges(&self) -> &'static str;
    /// Why it cannot judge a workload that sends `op`, if it cannot: such an
    /// op would change keys behind its back.
    fn refuses(&self, op: OpKind) -> Option<&'static str>;
    /// Why a workload that sends these op kinds gives it nothing to judge,
    /// if it does not (a warning: the gate on it is then INCOMPLETE).
    fn lacks(&self, sends: &dyn Fn(OpKind) -> bool) -> Option<&'static str>;
    /// What it needs of target `target` that this kind (with its options)
    /// does not give, if anything: where the fix belongs and the message.
    fn requires(&self, target: &str, kind: &str, info: &dyn KindInfo) -> Option<Unmet> {
        let _ = (target, kind, info);
        None
    }
    /// The gate metrics it provides, in the order docs/spec.md lists them.
    fn metrics(&self) -> &'static [GateMetric];

    /// Its result when it could not decide.
    fn unknown(&self, note: String) -> CheckResult {
        CheckResult::unknown(self.name(), self.judges(), note)
    }
    /// Its result after judging `checked` things and finding `violations`.
    fn counted(&self, checked: u64, violations: u64, witnesses: Vec<String>) -> CheckResult {
        CheckResult::counted(self.name(), self.judges(), checked, violations, witnesses)
    }
}

/// A checker's need a target does not meet: the field the fix belongs to
/// and what to do.
pub struct Unmet {
    pub field: UnmetAt,
    pub message: String,
}

/// Where a spec fixes an [`Unmet`] need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnmetAt {
    /// The target's (or scenario's) `options:` (e.g. MongoDB's `w: 0`).
    Options,
    /// The scenario's `checkers:` (the target kind cannot serve it at all).
    Checkers,
}

/// The checker named `name` among `checkers`, or the fix.
pub fn find(checkers: &[&'static dyn CheckerInfo], name: &str) -> Result<&'static dyn CheckerInfo, String> {
    checkers.iter().copied().find(|c| c.name() == name).ok_or_else(|| {
        let names: Vec<&str> = checkers.iter().map(|c| c.name()).collect();
        format!("`{name}` is not a checker faultline knows: use one of {}", names.join(", "))
    })
}

/// The gate metric row counting checker `checker`'s violations. A checker
/// that judged nothing has passed nothing: the gate is unmeasured then.
pub const fn violations_metric(checker: &'static str, name: &'static str, description: &'static str) -> GateMetric {
    GateMetric {
        name,
        aliases: &[],
        description,
        unit: Unit::Count,
        args: Args::None,
        reads: Reads::Checker(checker),
        value: violations,
    }
}

/// The gate metric row saying how much checker `checker` judged.
pub const fn judged_metric(checker: &'static str, name: &'static str) -> GateMetric {
    GateMetric {
        name,
        aliases: &[],
        description: JUDGED,
        unit: Unit::Count,
        args: Args::None,
        reads: Reads::Checker(checker),
        value: judged,
    }
}

const JUDGED: &str = "How much the checker judged (its `checked`, see [A check that judged nothing](#a-check-that-judged-nothing-is-not-a-pass)).";

/// The cell's result of the checker a metric reads.
pub fn check_of(cell: &CellResult, reads: Reads) -> Result<&CheckResult, String> {
    let Reads::Checker(name) = reads else { unreachable!("a checker's metric reads its checker") };
    cell.checks.iter().find(|c| c.checker == name).ok_or_else(|| format!("the spec runs no `{name}` checker"))
}

/// The violations a checker found. Nothing judged is nothing passed: a
/// violation found still counts. A checker that could not decide says why
/// in the gate's evidence (its time budget or memory cap, and where).
fn violations(metric: &MetricRef, cell: &CellResult, _: &CellStats) -> Value {
    let check = check_of(cell, metric.metric.reads)?;
    match check.status {
        CheckStatus::Unknown => Err(format!("the {} checker could not decide: {}", check.checker, check.note)),
        CheckStatus::Ok if check.checked == 0 => {
            Err(format!("the {} checker judged 0 {}", check.checker, check.judged))
        }
        _ => Ok(Some(check.violations as f64)),
    }
}

/// How much a checker judged, measured even at 0.
fn judged(metric: &MetricRef, cell: &CellResult, _: &CellStats) -> Value {
    let check = check_of(cell, metric.metric.reads)?;
    Ok((check.status != CheckStatus::Unknown).then_some(check.checked as f64))
}

/// A checker for this crate's own tests, which cannot see the real ones
/// (they live in faultline-check, above this crate): it judges reads, and
/// provides `test_violations` and `test_judged`.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    pub struct TestChecker;

    pub static METRICS: [GateMetric; 2] = [
        violations_metric("test-checker", "test_violations", "Violations found by `test-checker`."),
        judged_metric("test-checker", "test_judged"),
    ];

    impl CheckerInfo for TestChecker {
        fn name(&self) -> &'static str {
            "test-checker"
        }
        fn judges(&self) -> &'static str {
            "reads"
        }
        fn refuses(&self, op: OpKind) -> Option<&'static str> {
            (!matches!(op, OpKind::Get | OpKind::Set)).then_some("the test-checker judges get and set only")
        }
        fn lacks(&self, sends: &dyn Fn(OpKind) -> bool) -> Option<&'static str> {
            (!sends(OpKind::Get)).then_some("the workload sends no get")
        }
        fn metrics(&self) -> &'static [GateMetric] {
            &METRICS
        }
    }

    pub static CHECKERS: [&dyn CheckerInfo; 1] = [&TestChecker];
}
