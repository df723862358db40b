//! stale-read-after-ack: a read that started after a write to the same key
//! was acknowledged must not return a value that write superseded.
//!
//! Write A is certainly older than write B when A was acknowledged before B
//! was invoked. A read R that returns A's value is stale when some write B on
//! its key was acknowledged before R started and B was invoked after A was
//! acknowledged. Writes whose outcome is unknown may have taken effect at any
//! time after their invocation, so they never make a read stale; a value no
//! write of this cell wrote (absent, or an earlier cell's) counts as older
//! than every write of the cell.
//!
//! The history is read in `end` order. Per key, acknowledged writes are kept
//! as (end, the latest invocation among writes acknowledged so far); entries
//! older than the longest possible op are folded into one base value, since
//! every later read started after them. Memory is bounded by the writes of
//! that window.

use std::collections::HashMap;
use std::time::Duration;

use super::{
    describe, describe_write, get_and_set_only, lacks_reads_or_writes, ms, CheckContext, CheckResult, Checker,
    CheckerInfo, Judgement, Observer, Writes, WITNESSES,
};
use crate::history::{Observed, OpRecord, Outcome, ValueId};
use faultline_model::ops::OpKind;
use faultline_spec::checkers::{judged_metric, violations_metric};
use faultline_spec::metric::GateMetric;

#[derive(Default)]
struct KeyAcks {
    /// Latest invocation (and its write) among acks folded out of the window.
    base: Option<(u64, ValueId)>,
    /// (ack time, latest invocation so far, that write), in ack order.
    window: Vec<(u64, u64, ValueId)>,
    head: usize,
}

impl KeyAcks {
    /// The latest-invoked write acknowledged before `t`.
    fn latest_acked_before(&self, t: u64) -> Option<(u64, ValueId)> {
        let live = &self.window[self.head..];
        let n = live.partition_point(|(end, _, _)| *end < t);
        match n {
            0 => self.base,
            _ => {
                let (_, start, id) = live[n - 1];
                Some(match self.base {
                    Some(b) if b.0 > start => b,
                    _ => (start, id),
                })
            }
        }
    }

    fn push(&mut self, end: u64, start: u64, id: ValueId) {
        let latest = match self.window[self.head..].last().map(|(_, s, i)| (*s, *i)).or(self.base) {
            Some((s, i)) if s >= start => (s, i),
            _ => (start, id),
        };
        self.window.push((end, latest.0, latest.1));
    }

    fn fold_before(&mut self, t: u64) {
        while self.head < self.window.len() && self.window[self.head].0 < t {
            let (_, start, id) = self.window[self.head];
            if self.base.is_none_or(|(s, _)| start >= s) {
                self.base = Some((start, id));
            }
            self.head += 1;
        }
        if self.head > 64 && self.head * 2 > self.window.len() {
            self.window.drain(..self.head);
            self.head = 0;
        }
    }
}

/// The stale-read-after-ack checker: it judges reads as the first pass
/// streams them by.
pub struct StaleRead;

const NAME: &str = "stale-read-after-ack";

static METRICS: [GateMetric; 2] = [
    violations_metric(NAME, "stale_reads", "Violations found by `stale-read-after-ack`: stale reads."),
    judged_metric(NAME, "stale_reads_judged"),
];

impl CheckerInfo for StaleRead {
    fn name(&self) -> &'static str {
        NAME
    }
    fn judges(&self) -> &'static str {
        "reads after an acknowledged write to their key"
    }
    fn refuses(&self, op: OpKind) -> Option<&'static str> {
        get_and_set_only(op, "the stale-read-after-ack checker judges get and set only")
    }
    fn lacks(&self, sends: &dyn Fn(OpKind) -> bool) -> Option<&'static str> {
        lacks_reads_or_writes(sends)
    }
    fn metrics(&self) -> &'static [GateMetric] {
        &METRICS
    }
}

impl Checker for StaleRead {
    fn observer(&self, longest_op: Duration) -> Option<Box<dyn Observer>> {
        Some(Box::new(StaleReads::new(longest_op)))
    }

    fn judge(&self, cx: &CheckContext<'_>, seen: Option<Box<dyn Observer>>) -> Judgement {
        match seen {
            Some(observer) => observer.result(cx).into(),
            None => self.unknown("the first pass did not observe the history".into()).into(),
        }
    }
}

impl Observer for StaleReads {
    fn observe(&mut self, r: &OpRecord, writes: &Writes) {
        StaleReads::observe(self, r, writes)
    }

    fn result(self: Box<Self>, cx: &CheckContext<'_>) -> CheckResult {
        StaleReads::result(&self, cx.members)
    }
}

/// A stale read as its witness line says it: the read, the member that
/// answered it (named once the cell's members are known), what it
/// returned and the newer write.
struct Witness {
    read: String,
    member: u8,
    rest: String,
}

pub struct StaleReads {
    keys: HashMap<u64, KeyAcks>,
    longest_op_ns: u64,
    reads: u64,
    violations: u64,
    witnesses: Vec<Witness>,
}

impl StaleReads {
    pub fn new(longest_op: Duration) -> StaleReads {
        StaleReads {
            keys: HashMap::new(),
            longest_op_ns: longest_op.as_nanos() as u64,
            reads: 0,
            violations: 0,
            witnesses: vec![],
        }
    }

    pub fn observe(&mut self, r: &OpRecord, writes: &Writes) {
        if r.outcome != Outcome::Ok {
            return;
        }
        match (r.kind, r.written) {
            (OpKind::Set, Some(id)) => {
                let acks = self.keys.entry(r.key).or_default();
                acks.push(r.end, r.start, id);
                acks.fold_before(r.end.saturating_sub(self.longest_op_ns));
            }
            (OpKind::Get, _) => self.judge_read(r, writes),
            _ => {}
        }
    }

    fn judge_read(&mut self, r: &OpRecord, writes: &Writes) {
        // When the value it returned was certainly in place: for an absent or
        // earlier value, before the cell began.
        let returned_acked_at: Option<u64> = match r.observed {
            Observed::Nothing => return,
            Observed::Nil | Observed::Foreign => None,
            Observed::Write(id) => match writes.get(id) {
                Some(w) if w.outcome == Outcome::Ok => Some(w.end),
                // Unknown outcome, or acknowledged later than this read ended:
                // it may have taken effect any time, so it is never stale.
                _ => return,
            },
        };
        // Only a read that started after some write to its key was
        // acknowledged could have been stale: only those are judged.
        let Some(acks) = self.keys.get(&r.key) else { return };
        let Some((newer_start, newer)) = acks.latest_acked_before(r.start) else { return };
        self.reads += 1;
        if returned_acked_at.is_none_or(|acked| newer_start > acked) {
            self.violations += 1;
            if self.witnesses.len() < WITNESSES {
                let returned = match r.observed {
                    Observed::Write(id) => format!(
                        "the value of {} (acknowledged at {})",
                        describe_write(id),
                        ms(returned_acked_at.unwrap_or(0))
                    ),
                    Observed::Nil => "no value".into(),
                    _ => "a value from before this cell".into(),
                };
                let newer_info =
                    writes.get(newer).map(|w| format!("[{} .. {}]", ms(w.start), ms(w.end))).unwrap_or_default();
                self.witnesses.push(Witness {
                    read: describe(r),
                    member: r.member,
                    rest: format!(
                        "returned {returned}, but {} {newer_info} was acknowledged before the read started",
                        describe_write(newer)
                    ),
                });
            }
        }
    }

    /// The judgement; `members` name the members the records count (the
    /// cell's `members` file).
    pub fn result(&self, members: &[String]) -> CheckResult {
        let named = |w: &Witness| match (w.member as usize).checked_sub(1).and_then(|i| members.get(i)) {
            Some(member) => format!("{} answered by {member} {}", w.read, w.rest),
            None => format!("{} {}", w.read, w.rest),
        };
        StaleRead.counted(self.reads, self.violations, self.witnesses.iter().map(named).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::super::WriteInfo;
    use super::*;

    fn id(seq: u32) -> ValueId {
        ValueId { cell: 0, writer: 0, seq }
    }

    fn write(seq: u32, start: u64, end: u64, outcome: Outcome) -> OpRecord {
        OpRecord {
            start,
            end,
            key: 1,
            kind: OpKind::Set,
            outcome,
            written: Some(id(seq)),
            written_len: 32,
            member: 0,
            observed: Observed::Nothing,
        }
    }

    fn read(start: u64, end: u64, observed: Observed) -> OpRecord {
        OpRecord {
            start,
            end,
            key: 1,
            kind: OpKind::Get,
            outcome: Outcome::Ok,
            written: None,
            written_len: 0,
            member: 0,
            observed,
        }
    }

    /// Feeds records in end order, as the merged history does.
    fn judge(mut records: Vec<OpRecord>) -> CheckResult {
        records.sort_by_key(|r| r.end);
        let mut writes = Writes::default();
        let mut stale = StaleReads::new(Duration::from_nanos(1000));
        for r in &records {
            if let Some(i) = r.written {
                writes.insert(i, WriteInfo { key: r.key, start: r.start, end: r.end, len: 32, outcome: r.outcome });
            }
            stale.observe(r, &writes);
        }
        stale.result(&["127.0.0.1:2379".to_string()])
    }

    #[test]
    fn a_read_after_a_newer_ack_returning_the_older_value_is_stale() {
        let r = judge(vec![
            write(0, 0, 10, Outcome::Ok),
            write(1, 20, 30, Outcome::Ok),
            read(40, 50, Observed::Write(id(0))),
        ]);
        assert_eq!((r.checked, r.violations), (1, 1), "{r:?}");
        assert!(r.witnesses[0].contains("write 0.1"), "{:?}", r.witnesses);
        assert!(!r.witnesses[0].contains("answered by"), "no member recorded: {:?}", r.witnesses);
    }

    #[test]
    fn a_witness_names_the_member_that_answered() {
        let r = judge(vec![
            write(0, 0, 10, Outcome::Ok),
            write(1, 20, 30, Outcome::Ok),
            OpRecord { member: 1, ..read(40, 50, Observed::Write(id(0))) },
        ]);
        assert!(
            r.witnesses[0].starts_with("get key 1 [")
                && r.witnesses[0].contains("] answered by 127.0.0.1:2379 returned"),
            "{:?}",
            r.witnesses
        );
    }

    #[test]
    fn overlapping_writes_and_reads_are_not_stale() {
        // Write 1 overlaps write 0, so either order is possible.
        assert_eq!(
            judge(vec![
                write(0, 0, 10, Outcome::Ok),
                write(1, 5, 30, Outcome::Ok),
                read(40, 50, Observed::Write(id(0)))
            ])
            .violations,
            0
        );
        // The read started before write 1 was acknowledged.
        assert_eq!(
            judge(vec![
                write(0, 0, 10, Outcome::Ok),
                write(1, 20, 30, Outcome::Ok),
                read(25, 50, Observed::Write(id(0)))
            ])
            .violations,
            0
        );
        // The newest acknowledged value is fine.
        assert_eq!(
            judge(vec![
                write(0, 0, 10, Outcome::Ok),
                write(1, 20, 30, Outcome::Ok),
                read(40, 50, Observed::Write(id(1)))
            ])
            .violations,
            0
        );
    }

    #[test]
    fn unknown_writes_never_make_a_read_stale_but_nil_after_an_ack_is() {
        assert_eq!(judge(vec![write(0, 0, 10, Outcome::Unknown), read(40, 50, Observed::Nil)]).violations, 0);
        assert_eq!(
            judge(vec![
                write(0, 0, 10, Outcome::Ok),
                write(1, 20, 25, Outcome::Unknown),
                read(40, 50, Observed::Write(id(1)))
            ])
            .violations,
            0
        );
        assert_eq!(judge(vec![write(0, 0, 10, Outcome::Ok), read(40, 50, Observed::Nil)]).violations, 1);
        assert_eq!(judge(vec![read(0, 5, Observed::Nil), write(0, 10, 20, Outcome::Ok)]).violations, 0);
    }

    #[test]
    fn only_reads_after_an_acknowledged_write_to_their_key_are_judged() {
        // Reads alone, or before any acknowledgement, could not be stale.
        assert_eq!(judge(vec![read(0, 5, Observed::Nil), read(6, 9, Observed::Nil)]).checked, 0);
        assert_eq!(judge(vec![read(0, 5, Observed::Nil), write(0, 10, 20, Outcome::Ok)]).checked, 0);
        // Writes alone: nothing judged either.
        assert_eq!(judge(vec![write(0, 0, 10, Outcome::Ok), write(1, 20, 30, Outcome::Ok)]).checked, 0);
        let r = judge(vec![write(0, 0, 10, Outcome::Ok), read(20, 30, Observed::Write(id(0)))]);
        assert_eq!((r.checked, r.violations), (1, 0));
    }

    #[test]
    fn acks_folded_out_of_the_window_still_count() {
        // Write 1 was acknowledged long before the read (beyond the 1000ns window).
        let r = judge(vec![
            write(0, 0, 10, Outcome::Ok),
            write(1, 20, 30, Outcome::Ok),
            write(2, 5000, 5010, Outcome::Ok),
            read(9000, 9010, Observed::Write(id(0))),
        ]);
        assert_eq!(r.violations, 1);
        let r = judge(vec![
            write(0, 0, 10, Outcome::Ok),
            write(2, 5000, 5010, Outcome::Ok),
            read(9000, 9010, Observed::Write(id(2))),
        ]);
        assert_eq!(r.violations, 0);
    }
}
