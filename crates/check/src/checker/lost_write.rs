//! lost-acknowledged-write: after the load stops (and faults are healed),
//! every acknowledged write is in the final state or superseded by a later
//! write.
//!
//! A key's final value F came from one write. An acknowledged write W is lost
//! when F's write was certainly over before W began (acknowledged before W
//! was invoked), or when the key holds no value of this cell at all. A final
//! value from a write of unknown outcome may have landed at any time after
//! its invocation, so it supersedes nothing with certainty and loses nothing.
//!
//! Besides the count it keeps when each lost write was acknowledged, and how
//! many writes were acknowledged inside each given span (a demoted primary's,
//! see [`super::lost_write_times`]), so the count can be shown to be true.

use std::collections::HashMap;

use super::lost_write_times::AckTimes;
use super::{
    describe_write, get_and_set_only, lacks_writes, ms, CheckContext, CheckResult, Checker, CheckerInfo, Judgement,
    Observer, Unmet, UnmetAt, Writes, WITNESSES,
};
use crate::history::{parse_value, Observed, Outcome, Scope};
use faultline_model::ops::OpKind;
use faultline_spec::checkers::{judged_metric, violations_metric};
use faultline_spec::metric::GateMetric;
use faultline_spec::KindInfo;

/// The lost-acknowledged-write checker; it also says when the lost writes
/// were acknowledged.
pub struct LostWrite;

/// Its name in specs and results.json.
pub const NAME: &str = "lost-acknowledged-write";

static METRICS: [GateMetric; 2] = [
    violations_metric(
        NAME,
        "lost_acked_writes",
        "Violations found by `lost-acknowledged-write`: lost acknowledged writes.",
    ),
    judged_metric(NAME, "lost_acked_writes_judged"),
];

impl CheckerInfo for LostWrite {
    fn name(&self) -> &'static str {
        NAME
    }
    fn judges(&self) -> &'static str {
        "acknowledged writes"
    }
    fn refuses(&self, op: OpKind) -> Option<&'static str> {
        get_and_set_only(op, "the lost-acknowledged-write checker judges get and set only")
    }
    fn lacks(&self, sends: &dyn Fn(OpKind) -> bool) -> Option<&'static str> {
        lacks_writes(sends)
    }
    fn requires(&self, target: &str, _kind: &str, info: &dyn KindInfo) -> Option<Unmet> {
        (!info.acknowledges_writes()).then(|| Unmet {
            field: UnmetAt::Options,
            message: format!("target `{target}` does not acknowledge writes (w: 0), so the lost-acknowledged-write checker has nothing to hold it to: use w: 1 or majority, or drop the checker"),
        })
    }
    fn metrics(&self) -> &'static [GateMetric] {
        &METRICS
    }
}

impl Checker for LostWrite {
    fn judge(&self, cx: &CheckContext<'_>, _seen: Option<Box<dyn Observer>>) -> Judgement {
        let (result, times) = check(cx.writes, cx.stored.values, cx.scope, cx.demoted_spans);
        Judgement { result, ack_times: Some(times) }
    }
}

/// `spans` are `[from, to]` on the history's clock (ns since the cell's
/// clock started).
pub fn check(
    writes: &Writes,
    final_values: &HashMap<u64, Option<Vec<u8>>>,
    scope: Scope,
    spans: &[(u64, u64)],
) -> (CheckResult, AckTimes) {
    // Per key: the time before which an acknowledged write cannot be lost.
    let mut settled_until: HashMap<u64, Option<u64>> = HashMap::new();
    for (key, value) in final_values {
        let observed = value.as_deref().map_or(Observed::Nil, |v| parse_value(v, scope));
        let until = match observed {
            Observed::Write(id) => match writes.get(id) {
                Some(w) if w.outcome == Outcome::Ok => Some(w.end),
                // Landed at an unknown time (or is no write we know of): it
                // may supersede every write, so none is called lost.
                _ => Some(u64::MAX),
            },
            Observed::Nil | Observed::Foreign | Observed::Nothing => None,
        };
        settled_until.insert(*key, until);
    }
    let (mut acked, mut lost, mut witnesses) = (0u64, 0u64, Vec::new());
    let mut times = AckTimes { lost: Vec::new(), acked_in_spans: vec![0; spans.len()] };
    for (id, w) in writes.iter() {
        if w.outcome != Outcome::Ok {
            continue;
        }
        for (n, (from, to)) in spans.iter().enumerate() {
            if (*from..=*to).contains(&w.end) {
                times.acked_in_spans[n] += 1;
            }
        }
        let Some(until) = settled_until.get(&w.key) else {
            // The final state was not read for this key: cannot judge it.
            continue;
        };
        acked += 1;
        if until.is_none_or(|t| w.start > t) {
            lost += 1;
            times.lost.push(w.end);
            if witnesses.len() < WITNESSES {
                let final_desc = match final_values[&w.key].as_deref().map(|v| parse_value(v, scope)) {
                    None => "the key is absent".to_string(),
                    Some(Observed::Write(f)) => {
                        format!("the key holds {}, acknowledged at {}", describe_write(f), ms(until.unwrap_or(0)))
                    }
                    Some(_) => "the key holds a value from before this cell".to_string(),
                };
                witnesses.push(format!(
                    "{} to key {} [{} .. {}] was acknowledged, but {final_desc}",
                    describe_write(id),
                    w.key,
                    ms(w.start),
                    ms(w.end)
                ));
            }
        }
    }
    times.lost.sort_unstable();
    (LostWrite.counted(acked, lost, witnesses), times)
}
