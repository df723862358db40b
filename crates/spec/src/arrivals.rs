//! An open loop's arrival schedule as a rate over time: a constant rate, or
//! stages that ramp it linearly and hold it (k6's ramping-arrival-rate). Op
//! k is due when the integral of the rate since the schedule's start
//! reaches k, so the engine (when to send), its books (what was due but
//! unsent) and the results (the target rate of each timeline point) count
//! from one function. A due time is solved from the op's index, never by
//! adding periods, so no rounding drifts and no op is skipped or doubled at
//! a stage's edge.

/// The rate as pieces, each linear from `from` to `to` over `len_s`.
#[derive(Debug, Clone, PartialEq)]
pub struct Arrivals {
    pieces: Vec<Piece>,
}

#[derive(Debug, Clone, PartialEq)]
struct Piece {
    start_s: f64,
    /// Infinite for a constant rate with no end.
    len_s: f64,
    from: f64,
    to: f64,
    /// Ops due before the piece starts: the integral up to `start_s`.
    before: f64,
}

impl Piece {
    /// Ops due in the piece's first `s` seconds (the integral).
    fn count(&self, s: f64) -> f64 {
        let s = s.clamp(0.0, self.len_s);
        match self.from == self.to {
            true => self.from * s,
            false => self.from * s + (self.to - self.from) * s * s / (2.0 * self.len_s),
        }
    }

    fn total(&self) -> f64 {
        self.count(self.len_s)
    }

    /// When, in seconds into the piece, the integral reaches `n`: the root
    /// of `from·s + (to − from)·s² / 2·len = n`, in the form that stays
    /// exact when `to` is close to `from` or below it.
    fn inverse(&self, n: f64) -> f64 {
        if n <= 0.0 {
            return 0.0;
        }
        let s = match self.from == self.to {
            true => n / self.from,
            false => {
                let slope = (self.to - self.from) / self.len_s;
                2.0 * n / (self.from + (self.from * self.from + 2.0 * slope * n).max(0.0).sqrt())
            }
        };
        s.min(self.len_s)
    }
}

impl Arrivals {
    /// `rate` ops per second from the start, with no end.
    pub fn constant(rate: f64) -> Arrivals {
        Arrivals { pieces: vec![Piece { start_s: 0.0, len_s: f64::INFINITY, from: rate, to: rate, before: 0.0 }] }
    }

    /// `start` ops per second for `lead_s` seconds (the warm-up), then each
    /// of `stages` (seconds, the rate at its end), each ramping linearly
    /// from the rate the one before ended at; nothing is due after the last.
    pub fn staged(lead_s: f64, start: f64, stages: &[(f64, f64)]) -> Arrivals {
        let mut pieces = Vec::with_capacity(stages.len() + 1);
        let (mut at, mut before, mut rate) = (0.0, 0.0, start);
        for (len_s, to) in std::iter::once((lead_s, start)).chain(stages.iter().copied()) {
            let piece = Piece { start_s: at, len_s, from: rate, to, before };
            (at, before, rate) = (at + len_s, before + piece.total(), to);
            pieces.push(piece);
        }
        Arrivals { pieces }
    }

    /// The piece that holds time `t`, if any.
    fn piece_at(&self, t: f64) -> Option<&Piece> {
        let i = self.pieces.partition_point(|p| p.start_s + p.len_s <= t);
        self.pieces.get(i)
    }

    /// The rate the schedule asks at `t` seconds (0 past its end).
    pub fn rate_at(&self, t: f64) -> f64 {
        match self.piece_at(t) {
            Some(p) => p.from + (p.to - p.from) * ((t - p.start_s) / p.len_s).clamp(0.0, 1.0),
            None => 0.0,
        }
    }

    /// Ops due by `t` seconds, as the integral of the rate (a real number).
    pub fn count(&self, t: f64) -> f64 {
        match self.piece_at(t) {
            Some(p) => p.before + p.count(t - p.start_s),
            None => self.pieces.last().map_or(0.0, |p| p.before + p.total()),
        }
    }

    /// When op `k` (0-based) is due, in seconds from the start: where the
    /// integral reaches `k`. None for an op past the end of the stages.
    pub fn due_s(&self, k: u64) -> Option<f64> {
        let k = k as f64;
        // The first piece whose end the integral has not reached by op k;
        // a piece at rate 0 throughout holds no op and is passed over.
        let i = self.pieces.partition_point(|p| p.before + p.total() <= k);
        let p = self.pieces.get(i)?;
        Some(p.start_s + p.inverse(k - p.before))
    }

    /// Ops due in `[from, until)` seconds: `⌈N(until)⌉ − ⌈N(from)⌉`, the
    /// whole indices the integral passes. The engine's books walk the exact
    /// due times; this is what the tests and estimates count against.
    pub fn due_between(&self, from: f64, until: f64) -> u64 {
        let at = |t: f64| self.count(t).ceil() as u64;
        at(until).saturating_sub(at(from))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stages as `Arrivals::staged` takes them: seconds, and the rate at the end.
    type Stages = &'static [(f64, f64)];

    /// The ops of a stage: every k whose due time falls inside it.
    fn counted(a: &Arrivals, from: f64, until: f64) -> u64 {
        let mut n = 0;
        let mut k = 0u64;
        while let Some(t) = a.due_s(k) {
            if t >= until {
                break;
            }
            n += u64::from(t >= from);
            k += 1;
        }
        n
    }

    #[test]
    fn a_constant_rate_is_k_over_rate() {
        let a = Arrivals::constant(1000.0);
        assert_eq!(a.due_s(0), Some(0.0));
        assert_eq!(a.due_s(2500), Some(2.5));
        assert_eq!(a.count(1.5), 1500.0);
        assert_eq!(a.rate_at(1e6), 1000.0);
        assert_eq!(a.due_between(0.5, 2.5), 2000);
    }

    /// At every stage's end the ops due so far are the integral of the
    /// rate, within one op, for ramps up, down, from 0 and holds.
    #[test]
    fn ops_due_by_each_stage_end_are_the_integral() {
        let cases: &[(f64, f64, Stages)] = &[
            (0.0, 0.0, &[(2.0, 200.0), (2.0, 200.0)]),
            (1.0, 50.0, &[(3.0, 5000.0), (1.5, 5000.0), (2.0, 10.0), (1.0, 0.0), (1.0, 0.0), (0.7, 333.3)]),
            (0.5, 7.0, &[(10.0, 7.0), (0.001, 1e6)]),
            (0.0, 0.0, &[(30.0, 5000.0), (60.0, 5000.0), (120.0, 50000.0)]),
        ];
        for (lead, start, stages) in cases {
            let a = Arrivals::staged(*lead, *start, stages);
            let (mut t, mut rate, mut integral) = (*lead, *start, lead * start);
            assert!((a.count(t) - integral).abs() < 1e-6);
            for (len, to) in *stages {
                integral += (rate + to) / 2.0 * len;
                let middle = a.rate_at(t + len / 2.0);
                assert!((middle - (rate + to) / 2.0).abs() < 1e-6 * to.max(1.0), "{middle} mid-stage");
                (t, rate) = (t + len, *to);
                let due = a.due_between(0.0, t) as f64;
                assert!((due - integral).abs() <= 1.0, "{stages:?} to {t}s: {due} due, integral {integral}");
                assert!((a.count(t) - integral).abs() < 1e-6 * integral.max(1.0), "{} vs {integral}", a.count(t));
            }
            // Nothing is due after the last stage.
            assert_eq!(a.due_between(t, t + 100.0), 0);
        }
    }

    /// Walking the due times op by op finds exactly the ops the integral
    /// counts in each stage: none lost or doubled at an edge.
    #[test]
    fn due_times_fall_in_the_stage_the_integral_gives_them() {
        let stages = [(2.0, 300.0), (2.0, 300.0), (1.0, 0.0), (0.5, 0.0), (1.5, 123.4)];
        let a = Arrivals::staged(0.5, 20.0, &stages);
        let mut from = 0.0;
        let mut total = 0;
        for (len, _) in std::iter::once((0.5, 20.0)).chain(stages) {
            let walked = counted(&a, from, from + len);
            assert_eq!(walked, a.due_between(from, from + len), "[{from}, {})", from + len);
            total += walked;
            from += len;
        }
        assert_eq!(Some(total), (0..).find(|k| a.due_s(*k).is_none()));
        // Due times only grow.
        let times: Vec<f64> = (0..total).map(|k| a.due_s(k).unwrap()).collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn a_ramp_solves_its_quadratic() {
        // 0 to 100/s over 10 s: N(t) = 5 t², so op k is due at √(k / 5).
        let a = Arrivals::staged(0.0, 0.0, &[(10.0, 100.0)]);
        for k in [1u64, 5, 20, 125, 499] {
            let want = (k as f64 / 5.0).sqrt();
            assert!((a.due_s(k).unwrap() - want).abs() < 1e-9, "op {k}");
        }
        assert_eq!(a.due_s(500), None);
        assert_eq!(a.rate_at(5.0), 50.0);
        // Down again: 100/s to 0 over 10 s holds 500 ops too.
        let down = Arrivals::staged(0.0, 100.0, &[(10.0, 0.0)]);
        assert_eq!(down.due_between(0.0, 10.0), 500);
        assert!((down.due_s(499).unwrap() - (10.0 - (1.0f64 / 5.0).sqrt())).abs() < 1e-6);
    }
}
