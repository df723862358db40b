//! final-state: each key's final value is exactly one write's whole value —
//! no torn, truncated or mixed items (the DynamoDB seed's invariant).

use std::collections::HashMap;

use super::{
    describe_write, get_and_set_only, lacks_writes, CheckContext, CheckResult, Checker, CheckerInfo, Judgement,
    Observer, Writes, WITNESSES,
};
use crate::history::{is_whole_value, parse_header, Outcome, Scope};
use faultline_model::ops::OpKind;
use faultline_spec::checkers::{judged_metric, violations_metric};
use faultline_spec::metric::GateMetric;

/// The final-state checker.
pub struct FinalState;

const NAME: &str = "final-state";

static METRICS: [GateMetric; 2] = [
    violations_metric(NAME, "torn_values", "Violations found by `final-state`: keys whose final value is not one write's whole value: torn, mixed or mangled, or naming a failed write, a write to another key, or a write no client issued."),
    judged_metric(NAME, "torn_values_judged"),
];

impl CheckerInfo for FinalState {
    fn name(&self) -> &'static str {
        NAME
    }
    fn judges(&self) -> &'static str {
        "stored values"
    }
    fn refuses(&self, op: OpKind) -> Option<&'static str> {
        get_and_set_only(op, "the final-state checker judges get and set only")
    }
    fn lacks(&self, sends: &dyn Fn(OpKind) -> bool) -> Option<&'static str> {
        lacks_writes(sends)
    }
    fn metrics(&self) -> &'static [GateMetric] {
        &METRICS
    }
}

impl Checker for FinalState {
    fn judge(&self, cx: &CheckContext<'_>, _seen: Option<Box<dyn Observer>>) -> Judgement {
        check(cx.writes, cx.stored.values, cx.scope).into()
    }
}

pub fn check(writes: &Writes, final_values: &HashMap<u64, Option<Vec<u8>>>, scope: Scope) -> CheckResult {
    let (mut checked, mut bad, mut witnesses) = (0u64, 0u64, Vec::new());
    let mut keys: Vec<&u64> = final_values.keys().collect();
    keys.sort();
    for key in keys {
        let Some(value) = final_values[key].as_deref() else { continue };
        checked += 1;
        let problem = match parse_header(value) {
            Some((run, id)) if run == scope.run && id.cell == scope.cell => match writes.get(id) {
                Some(w) if w.outcome == Outcome::Fail => Some(format!("holds {}, which failed", describe_write(id))),
                Some(w) if w.key != *key => {
                    Some(format!("holds {}, which was a write to key {}", describe_write(id), w.key))
                }
                Some(w) if !is_whole_value(value, scope.run, id, w.len as usize) => Some(format!(
                    "holds a torn or mixed value: {} bytes starting like {} ({} bytes)",
                    value.len(),
                    describe_write(id),
                    w.len
                )),
                Some(_) => None,
                None => Some(format!("holds {}, which no client issued", describe_write(id))),
            },
            // Another cell's or run's intact header: written before this cell.
            Some(_) => None,
            // Our prefix but no readable header: a mangled value.
            None if value.starts_with(b"fl") => Some(format!("holds a mangled value ({} bytes)", value.len())),
            // Not ours at all: written before this cell by someone else.
            None => None,
        };
        if let Some(p) = problem {
            bad += 1;
            if witnesses.len() < WITNESSES {
                witnesses.push(format!("key {key} {p}"));
            }
        }
    }
    FinalState.counted(checked, bad, witnesses)
}
