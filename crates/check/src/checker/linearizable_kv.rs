//! linearizability of a recorded cell: gets and sets as a key-value map,
//! checked one key at a time by the Porcupine-style search in
//! [`super::linearizability`]. The search needs the whole history in memory,
//! so a history above [`MAX_OPS`] is `unknown` rather than a risk to the run.

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use super::linearizability::{check_partitions, Checked, Input, Limits, Model, Operation, Output, Verdict};
use super::{
    get_and_set_only, lacks_reads_or_writes, CheckContext, CheckResult, CheckStatus, Checker, CheckerInfo, Judgement,
    Observer,
};
use crate::history::{Merged, Observed, Outcome};
use faultline_model::ops::OpKind;
use faultline_spec::checkers::{judged_metric, violations_metric};
use faultline_spec::metric::GateMetric;

pub const MAX_OPS: u64 = 2_000_000;

/// The linearizability checker: it reads the history again, as per-key
/// operations for the search.
pub struct Linearizability;

const NAME: &str = "linearizability";

static METRICS: [GateMetric; 2] = [
    violations_metric(
        NAME,
        "linearizability_violations",
        "Violations found by `linearizability`: 0 or 1 (the search stops at the first key that is not linearizable).",
    ),
    judged_metric(NAME, "linearizability_judged"),
];

impl CheckerInfo for Linearizability {
    fn name(&self) -> &'static str {
        NAME
    }
    fn judges(&self) -> &'static str {
        "reads of written keys"
    }
    fn refuses(&self, op: OpKind) -> Option<&'static str> {
        get_and_set_only(op, "the linearizability checker judges get and set only")
    }
    fn lacks(&self, sends: &dyn Fn(OpKind) -> bool) -> Option<&'static str> {
        lacks_reads_or_writes(sends)
    }
    fn metrics(&self) -> &'static [GateMetric] {
        &METRICS
    }
}

impl Checker for Linearizability {
    fn judge(&self, cx: &CheckContext<'_>, _seen: Option<Box<dyn Observer>>) -> Judgement {
        check(cx.dir, cx.ops, cx.budget).into()
    }
}

pub fn check(dir: &Path, ops: u64, budget: Duration) -> CheckResult {
    let name = Linearizability;
    if ops > MAX_OPS {
        return name.unknown(format!(
            "{ops} ops is more than the {MAX_OPS} this checker holds in memory; shorten the cell or lower the load"
        ));
    }
    let history = match load(dir) {
        Ok(h) => h,
        Err(e) => return name.unknown(format!("cannot read the history: {e:#}")),
    };
    // A history without reads of written keys is trivially linearizable:
    // those reads are what it judges.
    let written: HashSet<&str> = history
        .iter()
        .filter_map(|op| match &op.input {
            Input::Put(key, _) => Some(key.as_str()),
            _ => None,
        })
        .collect();
    let Checked { verdict, undecided } = check_partitions(Model::Kv, &history, &Limits::with_budget(budget));
    // A check that gave up on some keys judged the reads of the others.
    let undecided: HashSet<&str> = undecided.iter().map(String::as_str).collect();
    let checked = history
        .iter()
        .filter(|op| matches!(&op.input, Input::Get(key) if written.contains(key.as_str()) && !undecided.contains(key.as_str())))
        .count() as u64;
    match verdict {
        Verdict::Linearizable => name.counted(checked, 0, vec![]),
        Verdict::NotLinearizable(w) => {
            let mut witnesses = vec![w.explanation.clone()];
            witnesses.extend(w.ops.iter().map(|op| op.to_string()));
            CheckResult { status: CheckStatus::Violated, ..name.counted(checked, 1, witnesses) }
        }
        Verdict::Unknown(why) => CheckResult { checked, ..name.unknown(why) },
    }
}

/// The history as the checker's operations. Values are named by their
/// write; anything from before the cell reads as the initial value "".
fn load(dir: &Path) -> anyhow::Result<Vec<Operation>> {
    let mut ops = Vec::new();
    let mut merged = Merged::open(dir)?;
    while let Some(r) = merged.next_record()? {
        if r.outcome == Outcome::Fail {
            continue;
        }
        let key = r.key.to_string();
        let ret = (r.outcome == Outcome::Ok).then_some(r.end);
        let (input, output) = match (r.kind, r.written, r.observed) {
            (OpKind::Set, Some(id), _) => (Input::Put(key, format!("{}.{}", id.writer, id.seq)), Output::Ok),
            (OpKind::Get, _, observed) if r.outcome == Outcome::Ok => {
                let value = match observed {
                    Observed::Write(id) => format!("{}.{}", id.writer, id.seq),
                    _ => String::new(),
                };
                (Input::Get(key), Output::Str(value))
            }
            // An unanswered read constrains nothing.
            _ => continue,
        };
        let output = if ret.is_some() { output } else { Output::Unknown };
        ops.push(Operation { client: 0, input, call: r.start, ret, output });
    }
    Ok(ops)
}
