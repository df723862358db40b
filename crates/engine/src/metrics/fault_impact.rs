//! What each fault cost: ops and failures after it, the longest op, the
//! denied window (from the fault to the end of the last failed op), the first
//! success after that, and when throughput came back to 90% of what it was
//! before — the MongoDB seed's failover table. Built from a 10 ms timeline
//! that cells with faults record beside the per-second one.
//!
//! A fault is measured to its real end: the last fault's span runs past the
//! measured window over every op the cell still waited for, and a target that
//! served no op successfully after its last failure has *not recovered*: its
//! denied window is unbounded (a gate bounding it fails), never the window's
//! length passed off as a measurement.
//!
//! Each op kind gets its own impact beside the one over every op (`per_op`):
//! a step-down that refuses writes while reads go on is a denied window for
//! `set` and none for `get`, never one column's failures under another's name.

use serde::{Deserialize, Serialize};

use super::recent::Absorb;
use faultline_model::ops::OpKind;
use faultline_model::stats::FaultImpact;

/// Resolution of the fine timeline, in microseconds.
const BUCKET_US: u64 = 10_000;

/// The 10 ms stretch an op that ended at `end_us` (since the window began) falls in.
pub fn bucket_of(end_us: u64) -> usize {
    (end_us / BUCKET_US) as usize
}

/// The ops that ended in one 10 ms stretch.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Bucket {
    ok: u64,
    failed: u64,
    /// End of the last failed op in the bucket, +1 (0: none), in µs since the window began.
    last_fail_end: u64,
    /// End of the first successful op in the bucket, +1 (0: none).
    first_ok_end: u64,
    max_latency_us: u64,
}

impl Bucket {
    /// `end_us`: when the op ended, µs since the measured window began.
    pub fn record(&mut self, end_us: u64, latency_us: u64, ok: bool) {
        self.max_latency_us = self.max_latency_us.max(latency_us);
        if ok {
            self.ok += 1;
            if self.first_ok_end == 0 || end_us + 1 < self.first_ok_end {
                self.first_ok_end = end_us + 1;
            }
        } else {
            self.failed += 1;
            self.last_fail_end = self.last_fail_end.max(end_us + 1);
        }
    }
}

impl Absorb for Bucket {
    fn absorb(&mut self, b: &Bucket) {
        self.ok += b.ok;
        self.failed += b.failed;
        self.last_fail_end = self.last_fail_end.max(b.last_fail_end);
        self.first_ok_end = match (self.first_ok_end, b.first_ok_end) {
            (0, x) | (x, 0) => x,
            (x, y) => x.min(y),
        };
        self.max_latency_us = self.max_latency_us.max(b.max_latency_us);
    }
}

/// A cell's 10 ms timeline.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FineTimeline {
    pub buckets: Vec<Bucket>,
}

/// A cell's 10 ms timelines, one per op kind (`kinds[k.index()]`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FineTimelines {
    pub kinds: Vec<Option<FineTimeline>>,
}

impl FineTimelines {
    /// The kind's timeline, created on first use.
    pub fn of(&mut self, kind: OpKind) -> &mut Vec<Bucket> {
        if self.kinds.len() <= kind.index() {
            self.kinds.resize(kind.index() + 1, None);
        }
        &mut self.kinds[kind.index()].get_or_insert_with(FineTimeline::default).buckets
    }

    #[cfg(test)]
    fn record(&mut self, kind: OpKind, end_us: u64, latency_us: u64, ok: bool) {
        super::recent::entry_at(self.of(kind), bucket_of(end_us)).record(end_us, latency_us, ok);
    }

    /// Each fault's impact over every op, with each op kind's own in `per_op`
    /// (see [`FineTimeline::impacts`]).
    pub fn impacts(&self, faults: &[(String, f64)], window_s: f64) -> Vec<FaultImpact> {
        let mut all = FineTimeline::default();
        let mut per_kind = Vec::new();
        for kind in OpKind::ALL {
            let Some(Some(timeline)) = self.kinds.get(kind.index()) else { continue };
            super::recent::absorb_at(&mut all.buckets, 0, &timeline.buckets);
            per_kind.push((kind, timeline.impacts(faults, window_s)));
        }
        let mut impacts = all.impacts(faults, window_s);
        for (i, impact) in impacts.iter_mut().enumerate() {
            for (kind, of_kind) in &per_kind {
                impact.per_op.insert(kind.as_str().to_string(), of_kind[i].clone());
            }
        }
        impacts
    }
}

impl FineTimeline {
    #[cfg(test)]
    fn record(&mut self, end_us: u64, latency_us: u64, ok: bool) {
        super::recent::entry_at(&mut self.buckets, bucket_of(end_us)).record(end_us, latency_us, ok);
    }

    /// Impacts of faults requested at `faults` (name, seconds into the
    /// window), each measured until the next fault or, for the last one, over
    /// every op of the cell: also those that ended after the window closed.
    pub fn impacts(&self, faults: &[(String, f64)], window_s: f64) -> Vec<FaultImpact> {
        let to_bucket = |s: f64| ((s.max(0.0) * 1e6) as u64 / BUCKET_US) as usize;
        let end_bucket = to_bucket(window_s).max(1).min(self.buckets.len());
        let last_bucket = self.buckets.len();
        faults
            .iter()
            .enumerate()
            .map(|(k, (name, at))| {
                let from = to_bucket(*at).min(last_bucket);
                let until = faults.get(k + 1).map_or(last_bucket, |(_, next)| to_bucket(*next).min(last_bucket));
                let span = &self.buckets[from..until.max(from)];
                let at_us = (*at * 1e6) as u64;
                let (ops, failed) = span.iter().fold((0, 0), |(o, f), b| (o + b.ok + b.failed, f + b.failed));
                let max_latency_ms = span.iter().map(|b| b.max_latency_us).max().unwrap_or(0) as f64 / 1e3;
                let last_fail = |buckets: &[Bucket]| {
                    buckets.iter().map(|b| b.last_fail_end).max().filter(|e| *e > 0).map(|e| e - 1)
                };
                // The denial is judged on failures inside the window: an op
                // that was in flight when it closed and timed out later says
                // nothing about a target that served others after it.
                let last_fail_end = last_fail(&self.buckets[from..until.min(end_bucket).max(from)]);
                // First success after the last failure (or after the fault,
                // with none), wherever it came: also after a later fault.
                let after = last_fail_end.unwrap_or(at_us);
                let first_bucket = ((after / BUCKET_US) as usize).max(from);
                let first_success =
                    self.buckets.get(first_bucket..).unwrap_or_default().iter().enumerate().find_map(|(j, b)| {
                        let bucket_start = (first_bucket + j) as u64 * BUCKET_US;
                        // After the last failure strictly; with none, from the fault on.
                        let ok_end = b.first_ok_end.checked_sub(1)?;
                        let counts = ok_end > after || (last_fail_end.is_none() && ok_end >= after);
                        (counts || bucket_start > after).then_some(ok_end)
                    });
                // Throughput before: the 10 s before the fault (or since the window began).
                let before_from = to_bucket(at - 10.0).min(from);
                let before: u64 = self.buckets[before_from..from.min(self.buckets.len())].iter().map(|b| b.ok).sum();
                let before_s = (from - before_from) as f64 * BUCKET_US as f64 / 1e6;
                let baseline = if before_s > 0.0 { before as f64 / before_s } else { 0.0 };
                // Recovered: the first 1 s stretch from the first success on at >= 90% of that.
                let start = to_bucket(first_success.unwrap_or(after) as f64 / 1e6).max(from);
                let per_second = (1_000_000 / BUCKET_US) as usize;
                let recovered = (baseline > 0.0)
                    .then(|| {
                        (start..until.min(end_bucket).saturating_sub(per_second)).step_by(10).find(|&j| {
                            let ok: u64 = self.buckets[j..j + per_second].iter().map(|b| b.ok).sum();
                            ok as f64 >= 0.9 * baseline
                        })
                    })
                    .flatten();
                let rel = |us: u64| (us as f64 / 1e6 - at).max(0.0);
                // Ops failed after the fault and none succeeded after the
                // last failure: still down when the cell ended, however long
                // it waited.
                let not_recovered = failed > 0 && first_success.is_none();
                FaultImpact {
                    fault: name.clone(),
                    ops,
                    failed,
                    max_latency_ms,
                    denied_window_s: last_fail_end.map(rel).filter(|_| !not_recovered),
                    denied_at_least_s: last_fail(span).map(rel).filter(|_| not_recovered),
                    not_recovered,
                    first_success_s: first_success.map(rel),
                    throughput_before: baseline,
                    recovered_s: recovered.map(|j| rel(j as u64 * BUCKET_US)),
                    per_op: indexmap::IndexMap::new(),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_that_denies_two_seconds_then_recovers() {
        let mut t = FineTimeline::default();
        // 1000 ok/s for 5 s, the fault at 5 s: failures until 7.2 s, then ok again.
        for ms in 0..10_000u64 {
            let us = ms * 1000 + 500;
            let failing = (5_000..7_200).contains(&ms);
            t.record(us, if failing { 5_000_000 } else { 200 }, !failing);
        }
        let impact = &t.impacts(&[("kill".into(), 5.0)], 10.0)[0];
        assert_eq!((impact.ops, impact.failed), (5000, 2200));
        assert!((impact.denied_window_s.unwrap() - 2.2).abs() < 0.01, "{impact:?}");
        assert!((impact.first_success_s.unwrap() - 2.2).abs() < 0.01, "{impact:?}");
        assert!((impact.throughput_before - 1000.0).abs() < 1.0, "{impact:?}");
        assert!((impact.recovered_s.unwrap() - 2.2).abs() < 0.11, "{impact:?}");
        assert_eq!(impact.max_latency_ms, 5000.0);
    }

    #[test]
    fn each_op_kind_has_its_own_denied_window_and_first_success() {
        let mut t = FineTimelines::default();
        // Reads succeed throughout; writes fail from 2 s to 3.5 s (a step-down).
        for ms in 0..6000u64 {
            let us = ms * 1000 + 500;
            t.record(OpKind::Get, us, 300, true);
            if ms % 10 == 0 {
                let refused = (2_000..3_500).contains(&ms);
                t.record(OpKind::Set, us + 100, 400, !refused);
            }
        }
        let impact = &t.impacts(&[("stepped-down".into(), 2.0)], 6.0)[0];
        assert_eq!(impact.failed, 150, "every failure counts in the whole: {impact:?}");
        let set = &impact.per_op["set"];
        let get = &impact.per_op["get"];
        assert_eq!((set.failed, get.failed), (150, 0));
        assert!((set.denied_window_s.unwrap() - 1.49).abs() < 0.02, "{set:?}");
        assert!((set.first_success_s.unwrap() - 1.5).abs() < 0.02, "{set:?}");
        assert_eq!(get.denied_window_s, None, "reads were never denied: {get:?}");
        assert!(get.first_success_s.unwrap() < 0.01, "{get:?}");
        // The whole is the old form: until the last failure of any kind.
        assert_eq!(impact.denied_window_s, set.denied_window_s);
        assert!(set.per_op.is_empty() && get.per_op.is_empty());
    }

    #[test]
    fn a_harmless_fault_has_no_denied_window() {
        let mut t = FineTimeline::default();
        for ms in 0..4000u64 {
            t.record(ms * 1000, 100, true);
        }
        let impact = &t.impacts(&[("noop".into(), 2.0)], 4.0)[0];
        assert_eq!((impact.failed, impact.denied_window_s), (0, None));
        assert!(impact.first_success_s.unwrap() < 0.002);
        assert_eq!(impact.recovered_s, Some(0.0));
    }

    #[test]
    fn a_target_that_never_comes_back_has_an_unbounded_denied_window() {
        let mut t = FineTimeline::default();
        // 1000 ok/s for 2 s; killed at 2 s of a 3 s window: every op fails
        // after that, the last ones (their deadlines) 1.5 s after the window.
        for ms in 0..2000u64 {
            t.record(ms * 1000, 100, true);
        }
        for ms in 2000..3000u64 {
            t.record(ms * 1000, 100, false);
        }
        for ms in 0..32u64 {
            t.record(4_500_000 + ms, 1_500_000, false);
        }
        let impact = &t.impacts(&[("crash".into(), 2.0)], 3.0)[0];
        assert!(impact.not_recovered, "{impact:?}");
        assert_eq!(impact.denied_window_s, None, "no bounded window is claimed");
        assert!((impact.denied_at_least_s.unwrap() - 2.5).abs() < 0.01, "{impact:?}");
        assert_eq!(impact.failed, 1032, "failures after the window's end count too");
        assert_eq!((impact.first_success_s, impact.recovered_s), (None, None));
    }

    #[test]
    fn recovery_after_the_next_fault_and_late_stragglers_are_recovery() {
        let mut t = FineTimeline::default();
        // freeze at 2 s, thaw at 4 s: failures until 4 s, successes after.
        for ms in 0..6000u64 {
            let failing = (2_000..4_000).contains(&ms);
            t.record(ms * 1000 + 500, 100, !failing);
        }
        // An op in flight when the 6 s window closed timed out at 6.4 s.
        t.record(6_400_000, 500_000, false);
        let impacts = t.impacts(&[("freeze".into(), 2.0), ("thaw".into(), 4.0)], 6.0);
        let freeze = &impacts[0];
        assert!(!freeze.not_recovered, "its recovery came in the next fault's span: {freeze:?}");
        assert!((freeze.denied_window_s.unwrap() - 2.0).abs() < 0.01, "{freeze:?}");
        assert!((freeze.first_success_s.unwrap() - 2.0).abs() < 0.01, "{freeze:?}");
        let thaw = &impacts[1];
        assert!(!thaw.not_recovered, "a straggler after the window is no relapse: {thaw:?}");
        assert_eq!(thaw.failed, 1, "but it is counted");
        // A fault late in the window whose only failures ended after it, with
        // no success since: not recovered.
        let mut late = FineTimeline::default();
        for ms in 0..2900u64 {
            late.record(ms * 1000, 100, true);
        }
        late.record(3_400_000, 500_000, false);
        let impact = &late.impacts(&[("pause".into(), 2.9)], 3.0)[0];
        assert!(impact.not_recovered && impact.denied_window_s.is_none(), "{impact:?}");
    }
}
