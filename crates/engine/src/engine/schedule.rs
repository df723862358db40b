//! When a lane issues its next op, shared by every executor. Closed loop: a
//! slot issues its next op as soon as the previous one ends. Open loop
//! ([`Pacing`]): ops are due on a fixed schedule whatever the target does,
//! and latency counts from when an op was due, so a stalled target is
//! charged for every op that had to wait (no coordinated omission); an op
//! that was due but never found a free slot is counted as unsent. A lane
//! that notices the window's end late (its thread was not scheduled in
//! time) still sends, late, the ops due before the end that its free slots
//! take then: faultline's own lateness is schedule lag, not a target that
//! left ops unsent.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::rounds::RoundSeat;
use crate::metrics::Recorder;
use crate::spec::arrivals::Arrivals;
use faultline_kind::workload::{Op, OpStream};

/// tokio's timers tick in milliseconds and wake up to a tick late, so an
/// open loop wakes this much early and sends ops due within it: an op sent
/// early counts from when it was sent, one sent late from when it was due.
pub const EARLY_ISSUE: Duration = Duration::from_millis(2);

/// The slice of an open loop's schedule one connection serves: ops
/// `first, first + stride, …`, op i due at `t0` plus when the schedule's
/// rate integrates to i (`i / rate` at a constant rate; see
/// [`Arrivals`]). Due times are computed from the index, not by adding
/// periods, so no rounding drifts and any positive rate works, also one
/// far beyond what the lane can send.
pub struct Pacing {
    pub t0: Instant,
    /// The whole schedule (all connections), from `t0`.
    pub arrivals: Arc<Arrivals>,
    pub first: u64,
    pub stride: u64,
}

impl Pacing {
    fn due(&self, i: u64) -> Instant {
        // Saturating float-to-int casts: an index past the end of time (or
        // of the stages) is due never.
        let Some(s) = self.arrivals.due_s(i) else { return self.t0 + FAR_FUTURE };
        self.t0.checked_add(Duration::from_nanos((s * 1e9) as u64)).unwrap_or(self.t0 + FAR_FUTURE)
    }

    /// How many of this lane's ops from index `next` on are due in
    /// `[from, until)`: the ops it still owed when it stopped.
    fn due_between(&self, next: u64, from: Instant, until: Instant) -> u64 {
        // The first lane index at or after `t`: estimated, then walked to the
        // exact boundary `due` draws (a step or two at most).
        let first_at = |t: Instant| -> u64 {
            let secs = t.saturating_duration_since(self.t0).as_secs_f64();
            let estimate = self.arrivals.count(secs) as u64;
            let mut k = estimate.saturating_sub(self.first).div_ceil(self.stride).saturating_sub(1);
            while self.due(self.first + k * self.stride) < t {
                k += 1;
            }
            while k > 0 && self.due(self.first + (k - 1) * self.stride) >= t {
                k -= 1;
            }
            k
        };
        let start = first_at(from).max(next.saturating_sub(self.first).div_ceil(self.stride));
        first_at(until).saturating_sub(start)
    }
}

/// Stands for "never" where an Instant would overflow.
const FAR_FUTURE: Duration = Duration::from_secs(100 * 365 * 86_400);

/// A lane's issuing state: which op of its open-loop slice is next, and
/// whether its shape ran out of ops.
pub struct Issuer {
    pacing: Option<Pacing>,
    /// A closed loop in steps: when this lane may issue (always, when empty).
    active: Vec<(Instant, Instant)>,
    next_due: Option<u64>,
    in_flight: u32,
    stop_at: Instant,
    /// When a shape plugin ran out of ops for this lane (or failed).
    pub ran_out: Option<Instant>,
    /// Contention rounds with several clients: this lane's seat at the
    /// cell's gate, and the round it waits there to start.
    rounds: Option<RoundSeat>,
    held_at: Option<u64>,
    /// An open loop: when the lane first saw the window's end, and sent
    /// what its free slots took of the ops still due before it; and how
    /// many slots were free then (ops still owed with slots free were owed
    /// for the lane's lateness, not the target's).
    closed_at: Option<Instant>,
    free_at_close: u32,
    /// An open loop: the last time an op was due and every slot was busy.
    /// Ops owed at the end that came due after it were owed for the lane's
    /// lateness; ops due while slots were full are the target's.
    last_blocked: Option<Instant>,
}

/// An op to issue now: the op, the time that decides its window (issued in
/// a closed loop, due in an open one) and where its latency counts from.
pub struct Issue {
    pub op: Op,
    pub issued: Instant,
    pub start: Instant,
}

impl Issuer {
    pub fn new(
        pacing: Option<Pacing>,
        active: Vec<(Instant, Instant)>,
        in_flight: u32,
        stop_at: Instant,
        rounds: Option<RoundSeat>,
    ) -> Issuer {
        let next_due = pacing.as_ref().map(|p| p.first);
        Issuer {
            pacing,
            active,
            next_due,
            in_flight,
            stop_at,
            ran_out: None,
            rounds,
            held_at: None,
            closed_at: None,
            free_at_close: 0,
            last_blocked: None,
        }
    }

    /// Whether the lane is done at `now` with `live` ops in flight: the
    /// window has ended (or its shape ran out) and nothing is in flight,
    /// and no op due before the end waits for the free slots of the lane's
    /// first look past the end.
    #[inline]
    pub fn done(&self, now: Instant, live: u32) -> bool {
        (now >= self.stop_at || self.exhausted()) && live == 0 && !self.owes_late(now)
    }

    /// An open loop past its window's end, not yet closed, with an op due
    /// before the end still unsent.
    fn owes_late(&self, now: Instant) -> bool {
        let due_before_end = match (&self.pacing, self.next_due) {
            (Some(p), Some(i)) => p.due(i) < self.stop_at,
            _ => false,
        };
        now >= self.stop_at && self.closed_at.is_none() && !self.exhausted() && due_before_end
    }

    /// The next op to issue at `now` with `live` slots in use, if a slot is
    /// free, the window is open and (open loop) an op is due.
    #[inline]
    pub fn next(&mut self, mut now: Instant, live: u32, ops: &mut OpStream, recorder: &mut Recorder) -> Option<Issue> {
        // Past the end, an open loop sends what its free slots take at its
        // first look (one `now`) of the ops due before the end; then no more.
        if now >= self.stop_at {
            match (&self.pacing, self.closed_at) {
                (Some(_), None) => {
                    self.closed_at = Some(now);
                    self.free_at_close = self.in_flight.saturating_sub(live);
                }
                (Some(_), Some(at)) if at == now => {}
                _ => return None,
            }
        }
        if self.ran_out.is_some() {
            return None;
        }
        if live >= self.in_flight {
            if let (Some(p), Some(i)) = (&self.pacing, self.next_due) {
                // Before the end: the look past it takes what its slots take.
                if now < self.stop_at && p.due(i) <= now + EARLY_ISSUE {
                    self.last_blocked = Some(now);
                }
            }
            return None;
        }
        if !self.active.is_empty() && !self.active.iter().any(|(from, to)| *from <= now && now < *to) {
            return None;
        }
        // Contention rounds: the lane's writers start a round together,
        // once every call of the last one is answered, and (several
        // clients) once every client's calls of the last one are.
        self.held_at = None;
        if ops.starts_a_round() {
            if live > 0 {
                return None;
            }
            if let Some(seat) = &self.rounds {
                let done = ops.rounds_done();
                if !seat.finished(done) {
                    self.held_at = Some(done);
                    return None;
                }
                // The gate may have opened (another client, another agent)
                // after the caller read `now`: the round starts after it did.
                now = now.max(Instant::now());
            }
        }
        let due = match (&self.pacing, self.next_due) {
            (Some(p), Some(i)) => {
                let due = p.due(i);
                if due > now + EARLY_ISSUE || due >= self.stop_at {
                    return None;
                }
                Some(due)
            }
            _ => None,
        };
        let Some(op) = ops.next_op() else {
            self.ran_out = Some(now);
            return None;
        };
        Some(match (due, &self.pacing) {
            (Some(due), Some(p)) => {
                recorder.record_lag(due, now.max(due));
                self.next_due = self.next_due.map(|i| i + p.stride);
                Issue { op, issued: due, start: now.min(due) }
            }
            _ => Issue { op, issued: now, start: now },
        })
    }

    pub fn exhausted(&self) -> bool {
        self.ran_out.is_some()
    }

    /// Resolves when the round the lane is held at may start; never, when
    /// it is not held. The wait is boxed, and made only while held: a
    /// lane's `select!` holds this future every turn, and unboxed (a
    /// `Notified` and its state) it made every turn of every lane copy
    /// the futures with `memcpy` (counted: docs/performance.md).
    pub fn round_opened(&self) -> impl Future<Output = ()> + '_ {
        let held = match (&self.rounds, self.held_at) {
            (Some(seat), Some(done)) => Some(Box::pin(seat.opened(done))),
            _ => None,
        };
        async move {
            match held {
                Some(wait) => wait.await,
                None => std::future::pending().await,
            }
        }
    }

    /// With a free slot: when to wake for the next due op (open loop), or
    /// for the next step this lane runs in (closed loop in steps).
    pub fn wake_at(&self, live: u32, now: Instant) -> Option<Instant> {
        match (&self.pacing, self.next_due) {
            // Closed at the window's end: what it owes is owed, no more waking for it.
            _ if live >= self.in_flight || self.exhausted() || self.closed_at.is_some() => None,
            (Some(p), Some(i)) => {
                Some(p.due(i)).filter(|d| *d < self.stop_at).map(|d| d.checked_sub(EARLY_ISSUE).unwrap_or(d))
            }
            _ => self.active.iter().map(|(from, _)| *from).find(|from| *from > now),
        }
    }

    /// Every op due in the window was sent or is owed: counts what is owed,
    /// up to the end of the window (or now, when the run was interrupted),
    /// in each stage of a staged schedule.
    /// Ops owed by a lane whose first look past the end found slots free,
    /// and whose slots were never all busy with an op due since the first
    /// of them came due, count as owed for its lateness.
    pub fn count_unsent(&self, recorder: &mut Recorder, measure_from: Instant, interrupted: bool) {
        if let (Some(p), Some(next)) = (&self.pacing, self.next_due) {
            let until = if interrupted { Instant::now().min(self.stop_at) } else { self.stop_at };
            let late = self.closed_at.is_some()
                && self.free_at_close > 0
                && self.last_blocked.is_none_or(|blocked| blocked < p.due(next));
            let stages = recorder.stage_bounds();
            if stages.is_empty() {
                recorder.record_unsent(None, p.due_between(next, measure_from, until), late);
            }
            for (i, (from, to)) in stages.into_iter().enumerate() {
                recorder.record_unsent(Some(i), p.due_between(next, from.max(measure_from), to.min(until)), late);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lanes' counts of what they still owed add up to the schedule,
    /// exactly, at ordinary and absurd rates.
    #[test]
    fn owed_ops_add_up_to_the_schedule() {
        let t0 = Instant::now();
        for (rate, lanes) in [(1000.0, 3u64), (600_000.0, 2), (1e12, 2), (0.5, 4), (3.3, 1)] {
            let (from, until) = (t0 + Duration::from_millis(500), t0 + Duration::from_millis(2500));
            let arrivals = Arc::new(Arrivals::constant(rate));
            let lane = |first| Pacing { t0, arrivals: Arc::clone(&arrivals), first, stride: lanes };
            let owed: u64 = (0..lanes).map(|l| lane(l).due_between(l, from, until)).sum();
            // Ops i with 0.5 s <= i / rate < 2.5 s.
            let expected = (2.5 * rate).ceil() as u64 - (0.5 * rate).ceil() as u64;
            assert!(owed.abs_diff(expected) <= lanes, "rate {rate}: {owed} vs {expected}");
            // A lane that sent up to some op owes only what comes after it.
            let sent_up_to = lane(0).due_between(0, t0, from);
            assert_eq!(lane(0).due_between(sent_up_to * lanes, from, until), lane(0).due_between(0, from, until));
            assert_eq!(lane(0).due_between(u64::MAX / 2, from, until), 0, "rate {rate}");
        }
    }

    /// A lane that first looks past the end with free slots sends then, late,
    /// the ops due before the end that its slots take, once; what no slot
    /// took stays owed (unsent), and a closed loop sends nothing past the end.
    #[test]
    fn a_late_look_at_the_end_sends_what_free_slots_take_once() {
        use crate::metrics::{LiveCounters, SharedTimelines};
        let t0 = Instant::now();
        let stop_at = t0 + Duration::from_millis(100);
        let spec: crate::spec::WorkloadSpec = serde_yaml_ng::from_str("{ops: {get: 1}, keys: {count: 10}}").unwrap();
        let workload = Arc::new(faultline_kind::workload::Workload::new(&spec, 1, 1));
        let mut ops = workload.stream(0, 1, 4, 1, None);
        let shared = Arc::new(SharedTimelines::new(Duration::from_secs(1)));
        let mut recorder = Recorder::new(
            [faultline_model::ops::OpKind::Get].into_iter(),
            t0,
            Arc::new(LiveCounters::default()),
            shared,
            true,
            false,
            false,
        );
        let late = stop_at + Duration::from_millis(5);
        // Ops 0 to 99 are due before the end (1,000/s over 100 ms).
        for (sent_up_to, expect_sent) in [(96u64, 4usize), (90, 4)] {
            let arrivals = Arc::new(Arrivals::constant(1000.0));
            let mut issuer =
                Issuer::new(Some(Pacing { t0, arrivals, first: 0, stride: 1 }), Vec::new(), 4, stop_at, None);
            issuer.next_due = Some(sent_up_to);
            assert!(!issuer.done(late, 0), "ops {sent_up_to} to 99 are due and slots are free");
            let mut live = 0;
            while let Some(issue) = issuer.next(late, live, &mut ops, &mut recorder) {
                assert!(issue.issued < stop_at, "only ops due before the end");
                live += 1;
            }
            assert_eq!(live as usize, expect_sent);
            // A later look sends nothing more; the lane is done once its ops end.
            assert!(issuer.next(late + Duration::from_millis(1), 0, &mut ops, &mut recorder).is_none());
            assert!(issuer.done(late + Duration::from_millis(1), 0));
        }
        // Slots full at the first look past the end: what is owed stays
        // owed when they free up, and is the target's (not late).
        let arrivals = Arc::new(Arrivals::constant(1000.0));
        let mut full = Issuer::new(Some(Pacing { t0, arrivals, first: 0, stride: 1 }), Vec::new(), 4, stop_at, None);
        full.next_due = Some(90);
        assert!(full.next(late, 4, &mut ops, &mut recorder).is_none());
        assert!(full.next(late + Duration::from_millis(1), 0, &mut ops, &mut recorder).is_none());
        assert!(full.done(late + Duration::from_millis(1), 0));
        full.count_unsent(&mut recorder, t0, false);
        let mut merged = crate::metrics::CellMetrics::new();
        merged.merge(recorder);
        let open = crate::metrics::OpenLoad {
            spec: &serde_yaml_ng::from_str("{rate: 1000}").unwrap(),
            arrivals: &Arrivals::constant(1000.0),
            window_start_s: 0.0,
        };
        let stats = merged.summarize(Duration::from_millis(100), Some(&open), &[]);
        let open_loop = stats.open_loop.unwrap();
        assert_eq!((open_loop.unsent, open_loop.unsent_late), (10, 0));
        // Slots full while ops came due, then a reply frees a slot just past
        // the end: the look takes one op, and the rest is the target's.
        let fresh = || {
            Recorder::new(
                [faultline_model::ops::OpKind::Get].into_iter(),
                t0,
                Arc::new(LiveCounters::default()),
                Arc::new(SharedTimelines::new(Duration::from_secs(1))),
                true,
                false,
                false,
            )
        };
        let mut books = fresh();
        let arrivals = Arc::new(Arrivals::constant(1000.0));
        let mut saturated =
            Issuer::new(Some(Pacing { t0, arrivals, first: 0, stride: 1 }), Vec::new(), 4, stop_at, None);
        saturated.next_due = Some(90);
        assert!(saturated.next(stop_at - Duration::from_millis(2), 4, &mut ops, &mut books).is_none());
        let mut live = 3;
        while saturated.next(late, live, &mut ops, &mut books).is_some() {
            live += 1;
        }
        assert_eq!(live, 4, "one slot was free");
        assert_eq!(saturated.wake_at(3, late), None, "closed: no waking for what it owes");
        saturated.count_unsent(&mut books, t0, false);
        let mut merged = crate::metrics::CellMetrics::new();
        merged.merge(books);
        let stats = merged.summarize(Duration::from_millis(100), Some(&open), &[]);
        let open_loop = stats.open_loop.unwrap();
        assert_eq!((open_loop.unsent, open_loop.unsent_late), (9, 0));
        // The late lane of the first case, counted: what it still owed is late.
        let arrivals = Arc::new(Arrivals::constant(1000.0));
        let mut tardy = Issuer::new(Some(Pacing { t0, arrivals, first: 0, stride: 1 }), Vec::new(), 4, stop_at, None);
        tardy.next_due = Some(90);
        let mut books = fresh();
        let mut live = 0;
        while tardy.next(late, live, &mut ops, &mut books).is_some() {
            live += 1;
        }
        tardy.count_unsent(&mut books, t0, false);
        let mut merged = crate::metrics::CellMetrics::new();
        merged.merge(books);
        let open_loop = merged.summarize(Duration::from_millis(100), Some(&open), &[]).open_loop.unwrap();
        assert_eq!((open_loop.unsent, open_loop.unsent_late), (6, 6));
        let mut closed = Issuer::new(None, Vec::new(), 4, stop_at, None);
        let mut recorder = Recorder::new(
            [faultline_model::ops::OpKind::Get].into_iter(),
            t0,
            Arc::new(LiveCounters::default()),
            Arc::new(SharedTimelines::new(Duration::from_secs(1))),
            false,
            false,
            false,
        );
        assert!(closed.next(late, 0, &mut ops, &mut recorder).is_none());
        assert!(closed.done(late, 0));
    }

    /// A closed lane between its steps sleeps until its next one.
    #[test]
    fn a_closed_lane_between_its_steps_wakes_for_the_next() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let issuer = Issuer::new(None, vec![(at(1), at(2)), (at(3), at(4))], 2, at(4), None);
        assert_eq!(issuer.wake_at(0, t0), Some(at(1)));
        assert_eq!(issuer.wake_at(1, at(2)), Some(at(3)));
        assert_eq!(issuer.wake_at(2, t0), None, "no free slot");
        assert_eq!(issuer.wake_at(0, at(3)), None);
        assert_eq!(Issuer::new(None, Vec::new(), 2, at(4), None).wake_at(0, t0), None);
    }

    /// A staged schedule's lanes owe, stage by stage, what the integral of
    /// its rate puts in each stage, within a lane's op; nothing after it.
    #[test]
    fn owed_ops_add_up_to_each_stage() {
        let t0 = Instant::now();
        let stages = [(2.0, 3000.0), (1.0, 3000.0), (1.5, 10.0), (0.5, 0.0)];
        let arrivals = Arc::new(Arrivals::staged(0.5, 100.0, &stages));
        let lanes = 3u64;
        let lane = |first| Pacing { t0, arrivals: Arc::clone(&arrivals), first, stride: lanes };
        let at = |s: f64| t0 + Duration::from_secs_f64(s);
        let mut from = 0.5;
        for (len, _) in stages {
            let owed: u64 = (0..lanes).map(|l| lane(l).due_between(l, at(from), at(from + len))).sum();
            let expected = arrivals.due_between(from, from + len);
            assert!(owed.abs_diff(expected) <= lanes, "[{from}, {}): {owed} vs {expected}", from + len);
            from += len;
        }
        assert_eq!(lane(0).due_between(0, at(from), at(from + 60.0)), 0);
    }
}
