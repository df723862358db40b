//! Safety checkers over a cell's recorded history: what the clients saw is
//! held against what the database promised. Each checker is one file with
//! one type behind [`Checker`] (which extends the spec's [`CheckerInfo`]:
//! its name, what it judges, which op kinds it follows, what it needs of a
//! target, its gate metrics), registered by one line in [`REGISTERED`].
//! [`first_pass`] streams the history once, building the write table and
//! feeding every checker that judges ops as they go by (its [`Observer`]);
//! [`run`] then asks each named checker for its judgement of the cell.

mod final_state;
pub mod hot_key;
pub mod jepsen_edn;
pub mod linearizability;
mod linearizable_kv;
pub mod lost_write;
pub mod lost_write_times;
mod stale_read;

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::LazyLock;
use std::time::Duration;

use crate::history::{Merged, OpRecord, Outcome, Scope, ValueId};
use faultline_model::ops::OpKind;
use lost_write_times::AckTimes;

pub use faultline_model::checks::{CheckResult, CheckStatus};
pub use faultline_spec::checkers::{CheckerInfo, Unmet, UnmetAt};

/// Keep this many witnesses per checker.
pub const WITNESSES: usize = 5;

/// What every write of the cell did, indexed by writer and sequence number.
#[derive(Default)]
pub struct Writes {
    by_writer: Vec<Vec<Option<WriteInfo>>>,
}

#[derive(Debug, Clone, Copy)]
pub struct WriteInfo {
    pub key: u64,
    pub start: u64,
    pub end: u64,
    pub len: u32,
    pub outcome: Outcome,
}

impl Writes {
    fn insert(&mut self, id: ValueId, info: WriteInfo) {
        let writer = id.writer as usize;
        if self.by_writer.len() <= writer {
            self.by_writer.resize_with(writer + 1, Vec::new);
        }
        let seqs = &mut self.by_writer[writer];
        let seq = id.seq as usize;
        if seqs.len() <= seq {
            seqs.resize(seq + 1, None);
        }
        seqs[seq] = Some(info);
    }

    pub fn get(&self, id: ValueId) -> Option<&WriteInfo> {
        self.by_writer.get(id.writer as usize)?.get(id.seq as usize)?.as_ref()
    }

    pub fn iter(&self) -> impl Iterator<Item = (ValueId, &WriteInfo)> + '_ {
        self.by_writer.iter().enumerate().flat_map(|(w, seqs)| {
            seqs.iter().enumerate().filter_map(move |(s, info)| {
                info.as_ref().map(|i| (ValueId { cell: 0, writer: w as u16, seq: s as u32 }, i))
            })
        })
    }
}

/// One checker: what the spec knows of it ([`CheckerInfo`]), and how it
/// judges a cell.
pub trait Checker: CheckerInfo + Send + Sync {
    /// Whether it judges the whole items the target stored (which only
    /// targets with `StoredItems` report).
    fn reads_items(&self) -> bool {
        false
    }
    /// What judges ops as the first pass streams them by, if this checker
    /// does; `longest_op` bounds how long any op that ended can have taken.
    fn observer(&self, _longest_op: Duration) -> Option<Box<dyn Observer>> {
        None
    }
    /// Judges the cell; `seen` is the observer it gave the first pass.
    fn judge(&self, cx: &CheckContext<'_>, seen: Option<Box<dyn Observer>>) -> Judgement;
}

/// A checker's part of the first pass: it sees every record once, in time
/// order, with the writes so far.
pub trait Observer: Send {
    fn observe(&mut self, r: &OpRecord, writes: &Writes);
    /// The judgement, after the last record.
    fn result(self: Box<Self>, cx: &CheckContext<'_>) -> CheckResult;
}

/// Everything a checker may judge a cell by.
pub struct CheckContext<'a> {
    /// The cell's history folder (for checkers that read it again).
    pub dir: &'a Path,
    pub writes: &'a Writes,
    /// How many ops the history holds.
    pub ops: u64,
    pub stored: &'a Stored<'a>,
    pub scope: Scope,
    /// How long the linearizability search may take.
    pub budget: Duration,
    /// The spans (`[from, to]`, ns on the history's clock) a demoted primary
    /// was still primary.
    pub demoted_spans: &'a [(u64, u64)],
    /// The members a record's `member` counts (empty: none named).
    pub members: &'a [String],
}

/// A checker's answer, and for lost-acknowledged-write when the lost
/// writes were acknowledged.
pub struct Judgement {
    pub result: CheckResult,
    pub ack_times: Option<AckTimes>,
}

impl From<CheckResult> for Judgement {
    fn from(result: CheckResult) -> Judgement {
        Judgement { result, ack_times: None }
    }
}

/// Every checker this build holds, in the order docs/spec.md lists their
/// gate metrics: a new checker is its file and its line here.
pub static REGISTERED: &[&dyn Checker] = &[
    &stale_read::StaleRead,
    &lost_write::LostWrite,
    &final_state::FinalState,
    &linearizable_kv::Linearizability,
    &hot_key::HotKey,
];

/// The registered checker of that name.
pub fn named(name: &str) -> Option<&'static dyn Checker> {
    REGISTERED.iter().copied().find(|c| c.name() == name)
}

/// [`REGISTERED`] as the spec sees it, for the CLI's catalog.
pub fn declared() -> &'static [&'static dyn CheckerInfo] {
    static DECLARED: LazyLock<Vec<&'static dyn CheckerInfo>> =
        LazyLock::new(|| REGISTERED.iter().map(|&c| c as &dyn CheckerInfo).collect());
    &DECLARED
}

/// For checkers that judge gets against sets: `why` they refuse any other
/// op kind.
fn get_and_set_only(op: OpKind, why: &'static str) -> Option<&'static str> {
    (!matches!(op, OpKind::Get | OpKind::Set)).then_some(why)
}

/// For checkers that judge reads against writes: what a workload lacks.
fn lacks_reads_or_writes(sends: &dyn Fn(OpKind) -> bool) -> Option<&'static str> {
    if !sends(OpKind::Get) {
        return Some("the workload sends no get, so there is no read to judge");
    }
    (!sends(OpKind::Set)).then_some("the workload sends no set, so no read can be judged against a write")
}

/// For checkers that judge writes: what a workload lacks.
fn lacks_writes(sends: &dyn Fn(OpKind) -> bool) -> Option<&'static str> {
    (!sends(OpKind::Set)).then_some("the workload sends no set, so there is no write to judge")
}

/// The first streaming pass: the write table, the keys written, and the
/// checkers that judge ops as they go by.
pub struct FirstPass {
    pub writes: Writes,
    pub written_keys: BTreeSet<u64>,
    pub ops: u64,
    observers: Vec<(&'static str, Box<dyn Observer>)>,
}

/// Reads the cell's history once. `longest_op` bounds how long any op that
/// ended can have taken (deadline + hang watchdog): it lets the stale-read
/// checker forget what no later read can depend on.
pub fn first_pass(dir: &Path, checkers: &[&'static dyn Checker], longest_op: Duration) -> anyhow::Result<FirstPass> {
    let mut pass = FirstPass {
        writes: Writes::default(),
        written_keys: BTreeSet::new(),
        ops: 0,
        observers: checkers.iter().filter_map(|c| Some((c.name(), c.observer(longest_op)?))).collect(),
    };
    let mut merged = Merged::open(dir)?;
    while let Some(r) = merged.next_record()? {
        pass.ops += 1;
        if let Some(id) = r.written {
            pass.writes.insert(
                id,
                WriteInfo { key: r.key, start: r.start, end: r.end, len: r.written_len, outcome: r.outcome },
            );
            // Also keys whose every write failed: a failed write found
            // stored (or in a stream) is a violation only a read can show.
            pass.written_keys.insert(r.key);
        }
        for (_, observer) in &mut pass.observers {
            observer.observe(&r, &pass.writes);
        }
    }
    Ok(pass)
}

/// What was read from the target after the load stopped, for each key the
/// cell wrote.
pub struct Stored<'a> {
    /// Each key's value (None: the key is absent).
    pub values: &'a HashMap<u64, Option<Vec<u8>>>,
    /// Each key's whole item, for the hot-key checker (targets with items).
    pub items: Option<&'a HashMap<u64, faultline_model::items::StoredItem>>,
    /// The keys were new to the cell (contention rounds).
    pub fresh_keys: bool,
}

/// Runs `checkers` on a cell's history against what was `stored`.
/// `demoted_spans` (`[from, to]`, ns on the history's clock) are the spans a
/// demoted primary was still primary: with lost-acknowledged-write, the
/// second half of the answer says when the lost writes were acknowledged
/// and how many writes were acknowledged inside each span.
pub fn run(
    dir: &Path,
    checkers: &[&'static dyn Checker],
    pass: FirstPass,
    stored: Stored<'_>,
    scope: Scope,
    linearizability_budget: Duration,
    demoted_spans: &[(u64, u64)],
) -> (Vec<CheckResult>, Option<AckTimes>) {
    let FirstPass { writes, ops, mut observers, .. } = pass;
    let members = crate::history::read_members(dir);
    let cx = CheckContext {
        dir,
        writes: &writes,
        ops,
        stored: &stored,
        scope,
        budget: linearizability_budget,
        demoted_spans,
        members: &members,
    };
    let mut ack_times = None;
    let results = checkers
        .iter()
        .map(|checker| {
            let seen = observers.iter().position(|(n, _)| *n == checker.name()).map(|i| observers.swap_remove(i).1);
            let judgement = checker.judge(&cx, seen);
            if judgement.ack_times.is_some() {
                ack_times = judgement.ack_times;
            }
            judgement.result
        })
        .collect();
    (results, ack_times)
}

/// Milliseconds for witnesses.
fn ms(ns: u64) -> String {
    format!("{:.3}ms", ns as f64 / 1e6)
}

fn describe_write(id: ValueId) -> String {
    format!("write {}.{}", id.writer, id.seq)
}

/// A record as a witness line.
fn describe(r: &OpRecord) -> String {
    format!("{} key {} [{} .. {}]", r.kind.as_str(), r.key, ms(r.start), ms(r.end))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::write_value;

    fn writes(list: &[(u32, u64, u64, u64, Outcome)]) -> Writes {
        let mut w = Writes::default();
        for (seq, key, start, end, outcome) in list {
            w.insert(
                ValueId { cell: 1, writer: 0, seq: *seq },
                WriteInfo { key: *key, start: *start, end: *end, len: 40, outcome: *outcome },
            );
        }
        w
    }

    const SCOPE: Scope = Scope { run: 9, cell: 1 };

    #[test]
    fn every_checker_has_a_name_of_its_own() {
        let names: BTreeSet<&str> = REGISTERED.iter().map(|c| c.name()).collect();
        assert_eq!(names.len(), REGISTERED.len(), "{names:?}");
        for c in REGISTERED {
            assert!(named(c.name()).is_some_and(|n| std::ptr::addr_eq(n, *c)), "{}", c.name());
            assert!(!c.judges().is_empty() && !c.metrics().is_empty(), "{}", c.name());
        }
        assert_eq!(declared().len(), REGISTERED.len());
    }

    fn value(seq: u32, len: usize) -> Option<Vec<u8>> {
        let mut v = Vec::new();
        write_value(SCOPE.run, ValueId { cell: 1, writer: 0, seq }, len, &mut v);
        Some(v)
    }

    #[test]
    fn lost_writes_are_acked_writes_that_began_after_the_final_value_was_in() {
        let w = writes(&[
            (0, 7, 0, 10, Outcome::Ok),
            (1, 7, 20, 30, Outcome::Ok),
            (2, 8, 0, 10, Outcome::Ok),
            (3, 9, 5, 8, Outcome::Unknown),
        ]);
        // Key 7 kept write 0 although write 1 began after it was acknowledged;
        // key 8 lost its only write; key 9's write had an unknown outcome.
        let finals: HashMap<u64, Option<Vec<u8>>> = [(7, value(0, 40)), (8, None), (9, None)].into_iter().collect();
        // One span covers write 1's acknowledgement (at 30), one nothing.
        let (r, times) = lost_write::check(&w, &finals, SCOPE, &[(25, 35), (100, 200)]);
        assert_eq!((r.checked, r.violations), (3, 2), "{r:?}");
        assert_eq!(times.lost, [10, 30], "each lost write's acknowledgement, in order");
        assert_eq!(times.acked_in_spans, [1, 0]);
        assert!(
            r.witnesses.iter().any(|l| l.contains("write 0.1") && l.contains("holds write 0.0")),
            "{:?}",
            r.witnesses
        );
        assert!(r.witnesses.iter().any(|l| l.contains("write 0.2") && l.contains("absent")), "{:?}", r.witnesses);
        // The newest write in place: nothing lost.
        let finals: HashMap<u64, Option<Vec<u8>>> = [(7, value(1, 40)), (8, value(2, 40))].into_iter().collect();
        let (r, times) = lost_write::check(&w, &finals, SCOPE, &[]);
        assert_eq!(r.violations, 0);
        assert!(times.lost.is_empty());
        // A final value of unknown outcome may have landed last: nothing lost.
        let w = writes(&[(0, 7, 0, 10, Outcome::Ok), (1, 7, 0, 50, Outcome::Unknown)]);
        let finals: HashMap<u64, Option<Vec<u8>>> = [(7, value(1, 40))].into_iter().collect();
        assert_eq!(lost_write::check(&w, &finals, SCOPE, &[]).0.violations, 0);
    }

    #[test]
    fn final_values_must_be_one_whole_write() {
        let w = writes(&[(0, 7, 0, 10, Outcome::Ok), (1, 8, 0, 10, Outcome::Fail)]);
        let mut torn = value(0, 40).unwrap();
        torn.truncate(30);
        let mut earlier_run = Vec::new();
        write_value(8, ValueId { cell: 1, writer: 0, seq: 0 }, 40, &mut earlier_run);
        let earlier_run = Some(earlier_run);
        let cases: [(Option<Vec<u8>>, u64); 7] = [
            (value(0, 40), 0),
            (Some(torn), 1),
            (value(1, 40), 1),                     // the write failed
            (value(5, 40), 1),                     // no client issued it
            (Some(b"fl9.1.zz.".to_vec()), 1),      // our header, mangled
            (Some(b"something else".to_vec()), 0), // from before the cell
            (earlier_run, 0),
        ];
        for (v, bad) in cases {
            let finals: HashMap<u64, Option<Vec<u8>>> = [(7, v.clone())].into_iter().collect();
            assert_eq!(
                final_state::check(&w, &finals, SCOPE).violations,
                bad,
                "{:?}",
                v.map(|b| String::from_utf8_lossy(&b).into_owned())
            );
        }
    }
}
