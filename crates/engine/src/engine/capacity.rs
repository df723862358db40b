//! The capacity search: a scenario's `capacity:` runs its cell as a series of
//! open-loop steps, each a whole cell (warm-up, window, stats) at one rate,
//! judged against the SLO on that step alone. The rate grows geometrically
//! from `from` while the SLO holds, then bisects (geometrically) between
//! the highest rate that held and the lowest that failed until they are
//! within the precision, and the knee is run again `confirm` times; a
//! confirmation that fails moves the knee down. The capacity is the highest
//! rate that held in its step and every confirmation.
//!
//! A host shared with other work makes noise, so a failure counts only once
//! it repeats: a step that fails is run again (`retries`) before the search
//! bisects below it, and one that then holds is noise, kept in the steps.
//! Steps that still contradict each other (a rate held above one that
//! failed), or repeats whose capacities lie further apart than the
//! tolerance ([`judge_repeats`]), make the capacity "not repeatable": a
//! gate on it is INCOMPLETE, never PASS or FAIL on noise.
//!
//! The search stops early, and says so, when the load generator is the
//! limit rather than the target: a step that failed (and failed again)
//! while faultline's own CPU was saturated, while other processes took the
//! host's cores (engine/host_watch.rs), or with ops unsent because a lane
//! saw the window's end late with slots free, is the client's ceiling, and
//! the capacity is then only "at least" the last rate that held.
//! [`Searcher`] is the arithmetic of the search, apart from running anything.

use std::sync::Arc;
use std::time::Duration;

use super::Engine;
use crate::plan::Cell;
use crate::provider::RunningTarget;
use crate::spec::capacity::CapacitySpec;
use faultline_kind::workload::Workload;
use faultline_model::capacity::{Bound, CapacitySearch, CapacityStep, Phase, Repeats, SloLimit};
use faultline_model::format::thousands;
use faultline_model::results::{CellResult, CellStatus};
use faultline_spec::gate::{self as expr, Expr};

/// What to do next.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Next {
    Step(f64, Phase),
    Done(Bound),
}

/// The search's arithmetic: which rate to try next, from what the steps so
/// far found.
#[derive(Debug, Clone)]
pub struct Searcher {
    from: f64,
    to: f64,
    growth: f64,
    precision: f64,
    confirm: u32,
    retries: u32,
    max_steps: u32,
    steps: u32,
    /// A failure being tried again: its rate, the phase it failed in, and
    /// the tries left.
    retrying: Option<(f64, Phase, u32)>,
    /// The rates that held, in the order they were run.
    held: Vec<f64>,
    /// The lowest rate that failed.
    failed: Option<f64>,
    /// Confirmations that held at the current knee.
    confirmed: u32,
    stopped: Option<Bound>,
}

impl Searcher {
    pub fn new(c: &CapacitySpec) -> Searcher {
        Searcher {
            from: c.rate.from,
            to: c.rate.to,
            growth: c.growth,
            precision: c.precision,
            confirm: c.confirm,
            retries: c.retries,
            max_steps: c.max_steps,
            steps: 0,
            retrying: None,
            held: Vec::new(),
            failed: None,
            confirmed: 0,
            stopped: None,
        }
    }

    /// The highest rate that held below the lowest that failed.
    pub fn knee(&self) -> Option<f64> {
        let below = |r: &&f64| self.failed.is_none_or(|f| **r < f);
        self.held.iter().filter(below).copied().reduce(f64::max)
    }

    pub fn failed_at(&self) -> Option<f64> {
        self.failed
    }

    pub fn next(&self) -> Next {
        if let Some(bound) = self.stopped {
            return Next::Done(bound);
        }
        let (knee, failed) = (self.knee(), self.failed);
        if self.steps >= self.max_steps {
            return Next::Done(match knee {
                None => Bound::Floor,
                Some(_) => Bound::Steps,
            });
        }
        if let Some((rate, _, _)) = self.retrying {
            return Next::Step(rate, Phase::Retry);
        }
        let confirm_or = |knee: f64, done: Bound| match self.confirmed < self.confirm {
            true => Next::Step(knee, Phase::Confirm),
            false => Next::Done(done),
        };
        match (knee, failed) {
            (None, None) => Next::Step(self.from, Phase::Grow),
            (None, Some(_)) => Next::Done(Bound::Floor),
            (Some(knee), None) if knee >= self.to => confirm_or(knee, Bound::Ceiling),
            (Some(knee), None) => Next::Step((knee * self.growth).min(self.to), Phase::Grow),
            (Some(knee), Some(failed)) if failed / knee <= 1.0 + self.precision => confirm_or(knee, Bound::Target),
            (Some(knee), Some(failed)) => Next::Step(between(knee, failed), Phase::Bisect),
        }
    }

    /// What the step at `rate` found: whether the SLO held, and whether the
    /// load generator was the limit (which ends the search when it failed
    /// every try). A failure is tried again before it counts; a retry that
    /// holds counts as the step it retried having held.
    pub fn record(&mut self, rate: f64, phase: Phase, held: bool, client_bound: bool) {
        self.steps += 1;
        let (phase, tries_left) = match (phase, self.retrying.take()) {
            (Phase::Retry, Some((_, failed_in, left))) => (failed_in, left),
            (phase, _) => (phase, self.retries),
        };
        if !held && tries_left > 0 {
            self.retrying = Some((rate, phase, tries_left - 1));
            return;
        }
        let knee = self.knee();
        if held {
            match phase {
                Phase::Confirm => self.confirmed += 1,
                _ => self.held.push(rate),
            }
        } else {
            self.failed = Some(self.failed.map_or(rate, |f| f.min(rate)));
            if client_bound {
                self.stopped = Some(Bound::Client);
            }
        }
        // A new knee must be confirmed afresh.
        if self.knee() != knee {
            self.confirmed = 0;
        }
    }

    /// Stops the search where it stands (a step that could not run).
    pub fn stop(&mut self) {
        self.stopped = Some(Bound::Stopped);
    }
}

/// The geometric middle of two rates, rounded to three significant digits
/// where that keeps it strictly between them (rates read better so).
fn between(low: f64, high: f64) -> f64 {
    let mid = (low * high).sqrt();
    let scale = 10f64.powf(mid.log10().floor() - 2.0);
    let rounded = (mid / scale).round() * scale;
    match rounded > low && rounded < high {
        true => rounded,
        false => mid,
    }
}

/// Whether faultline's own CPU was saturated in a step: then what the step
/// measured may be faultline's limit, not the target's.
fn client_bound(result: &CellResult) -> Option<String> {
    let cpu = result.stats.as_ref()?.client_cpu.as_ref().filter(|c| c.saturated())?;
    Some(format!(
        "faultline's CPU was saturated (busiest thread `{}` at {:.0}% of a core; {:.2} of {} cores in all)",
        cpu.busiest_thread,
        cpu.busiest_share * 100.0,
        cpu.cores,
        cpu.host_cores
    ))
}

impl Engine<'_> {
    /// Runs `cell`'s capacity search: steps until the searcher is done, each
    /// step's progress on the console. The result is the step at the
    /// capacity found (the last one there), or the last step, with the
    /// search attached.
    pub(super) async fn search_capacity(
        &self,
        cell: &Cell,
        position: (usize, usize),
        running: &RunningTarget,
        workload: Arc<Workload>,
        remaining_after: Duration,
        search: &CapacitySpec,
    ) -> CellResult {
        let slo = expr::parse(&search.slo, faultline_check::checker::declared()).expect("validated: the SLO parses");
        let mut searcher = Searcher::new(search);
        let mut steps: Vec<CapacityStep> = Vec::new();
        let mut outcomes: Vec<Outcome> = Vec::new();
        let mut held: Vec<(f64, CellResult)> = Vec::new();
        let mut last: Option<CellResult> = None;
        // A step that could not run, or whose SLO could not be judged,
        // ends the search; the cell then says why.
        let mut ended: Option<CellResult> = None;
        let bound = loop {
            let (rate, phase) = match searcher.next() {
                Next::Done(bound) => break bound,
                Next::Step(rate, phase) => (rate, phase),
            };
            let step = cell.at_rate(self.spec, rate);
            let result = self.run_cell(&step, position, running, Arc::clone(&workload), remaining_after).await;
            let judged = judge_step(&slo, &result, rate, phase);
            let disturbed = judged.step.disturbed.as_deref().map(|d| format!(" ({d})")).unwrap_or_default();
            let verdict = match judged.outcome {
                Outcome::Held => format!("SLO held{disturbed}"),
                Outcome::ClientBound => format!("client-bound: {}", judged.step.why),
                Outcome::Failed => format!("SLO failed: {}", judged.step.why),
                Outcome::NotJudged => format!("not judged: {}", judged.step.why),
            };
            self.events.say(&format!(
                "{} step {} ({}): {}/s offered, {}/s sent{}: {verdict}",
                cell.label(),
                steps.len() + 1,
                phase.as_str(),
                thousands(rate.round() as u64),
                thousands(judged.step.achieved_rate.round() as u64),
                judged.step.p99_ms.map(|p| format!(", p99 {p:.2}ms")).unwrap_or_default(),
            ));
            steps.push(judged.step);
            outcomes.push(judged.outcome);
            // A retry that held: the failures it retried were noise.
            if phase == Phase::Retry && judged.outcome == Outcome::Held {
                mark_noise(&mut steps);
            }
            match judged.outcome {
                Outcome::NotJudged => {
                    searcher.stop();
                    ended = Some(result);
                }
                outcome => {
                    let met = outcome == Outcome::Held;
                    searcher.record(rate, phase, met, outcome == Outcome::ClientBound);
                    if met {
                        held.push((rate, result.clone()));
                    }
                    last = Some(result);
                }
            }
        };
        let capacity = match bound {
            Bound::Floor => None,
            _ => searcher.knee(),
        };
        let search = CapacitySearch {
            slo: search.slo.clone(),
            rate_from: search.rate.from,
            rate_to: search.rate.to,
            slo_limits: slo.latency_limits().into_iter().map(|(metric, ms)| SloLimit { metric, ms }).collect(),
            capacity,
            failed_at: searcher.failed_at(),
            bound,
            non_monotone: contradiction(&steps, &outcomes),
            steps,
            tolerance: search.tolerance,
            repeats: None,
        };
        // The cell's numbers are those of the last step at the capacity;
        // a search a step ended is that step's cell, failed or unjudged.
        let at_capacity = capacity.and_then(|c| held.into_iter().rev().find(|(r, _)| *r == c)).map(|(_, r)| r);
        let mut result = match ended {
            Some(ended) => ended,
            None => at_capacity.or(last).unwrap_or_else(|| self.skipped(cell)),
        };
        // A step whose SLO could not be judged measured, but decided nothing.
        if bound == Bound::Stopped && result.status == CellStatus::Completed && result.error.is_none() {
            result.error = search.steps.last().map(|s| format!("the capacity search stopped: {}", s.why));
        }
        result.capacity = Some(search);
        result
    }
}

/// Marks the failed tries before the last step (a retry that held) at its
/// rate as noise, back to the step they retried.
fn mark_noise(steps: &mut [CapacityStep]) {
    let Some((last, earlier)) = steps.split_last_mut() else { return };
    for step in earlier.iter_mut().rev() {
        if step.rate != last.rate {
            break;
        }
        step.noise |= !step.met;
        if step.phase != Phase::Retry {
            break;
        }
    }
}

/// Steps that contradict each other, if any: a rate that held above one
/// that failed (the target's failure, tried again and failed again). A rate
/// that held once and then failed its confirmation is the knee moving
/// down, not a contradiction.
fn contradiction(steps: &[CapacityStep], outcomes: &[Outcome]) -> Option<String> {
    let at = |i: usize| format!("{}/s (step {})", thousands(steps[i].rate.round() as u64), i + 1);
    let failed = (0..steps.len()).filter(|&i| outcomes[i] == Outcome::Failed && !steps[i].noise);
    let lowest_failed = failed.min_by(|&a, &b| steps[a].rate.total_cmp(&steps[b].rate))?;
    let highest_held = (0..steps.len())
        .filter(|&i| outcomes[i] == Outcome::Held)
        .max_by(|&a, &b| steps[a].rate.total_cmp(&steps[b].rate))?;
    (steps[highest_held].rate > steps[lowest_failed].rate).then(|| {
        format!(
            "the steps contradict each other: the SLO held at {} but failed at {}, tried again",
            at(highest_held),
            at(lowest_failed)
        )
    })
}

/// Takes each capacity search's repeats together (the same scenario,
/// profile, variant and matrix point): their median, range and spread, and
/// whether they agree within the search's tolerance. A single repeat is
/// left alone.
pub fn judge_repeats(cells: &mut [CellResult]) {
    let key = |c: &CellResult| (c.scenario.clone(), c.profile.clone(), c.variant().to_string(), c.matrix.clone());
    let mut groups: Vec<(_, Vec<usize>)> = Vec::new();
    for (i, c) in cells.iter().enumerate().filter(|(_, c)| c.capacity.is_some()) {
        let k = key(c);
        match groups.iter_mut().find(|(g, _)| *g == k) {
            Some((_, members)) => members.push(i),
            None => groups.push((k, vec![i])),
        }
    }
    for (_, members) in groups.into_iter().filter(|(_, m)| m.len() > 1) {
        let searches: Vec<&CapacitySearch> = members.iter().filter_map(|&i| cells[i].capacity.as_ref()).collect();
        let repeats = repeats_of(&searches);
        for &i in &members {
            if let Some(search) = cells[i].capacity.as_mut() {
                search.repeats = Some(repeats.clone());
            }
        }
    }
}

fn repeats_of(searches: &[&CapacitySearch]) -> Repeats {
    let mut found: Vec<f64> = searches.iter().filter_map(|s| s.target_capacity()).collect();
    found.sort_by(f64::total_cmp);
    let tolerance = searches.iter().map(|s| s.tolerance).fold(f64::INFINITY, f64::min);
    let mut repeats = Repeats {
        count: searches.len() as u32,
        found: found.len() as u32,
        median: None,
        min: None,
        max: None,
        spread: None,
        repeatable: true,
        why: String::new(),
    };
    if found.len() < 2 {
        return repeats;
    }
    let median = match found.len() % 2 {
        1 => found[found.len() / 2],
        _ => (found[found.len() / 2 - 1] + found[found.len() / 2]) / 2.0,
    };
    let (min, max) = (found[0], found[found.len() - 1]);
    let spread = (max - min) / 2.0 / median;
    repeats.median = Some(median);
    repeats.min = Some(min);
    repeats.max = Some(max);
    repeats.spread = Some(spread);
    if spread > tolerance {
        let rate = |r: f64| thousands(r.round() as u64);
        repeats.repeatable = false;
        repeats.why = format!(
            "its {} repeats found {} to {}/s (median {}/s, ±{:.0}%), wider than the ±{:.0}% tolerance",
            found.len(),
            rate(min),
            rate(max),
            rate(median),
            spread * 100.0,
            tolerance * 100.0
        );
    }
    repeats
}

/// How a step came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// The SLO held on the load asked for.
    Held,
    /// It failed only because of the load generator (see [`client_bound`]).
    ClientBound,
    /// It failed: the target's.
    Failed,
    /// The step did not complete, or the SLO could not be judged on it.
    NotJudged,
}

struct Judged {
    step: CapacityStep,
    outcome: Outcome,
}

/// Whether the SLO holds in a step, on the load asked for, with its
/// evidence; an error when it cannot be judged.
fn holds(slo: &Expr, result: &CellResult) -> Result<(bool, String), String> {
    let (holds, evidence) = faultline_judge::gate::holds_in(slo, result)?;
    match (holds, faultline_judge::gate::load_not_sent(result, false)) {
        (true, Some(why)) => Ok((false, why)),
        (held, _) => Ok((held, evidence.join(", "))),
    }
}

/// The step as if faultline had sent in time the ops it owed for its own
/// lateness: what the target would have been judged on.
fn without_late_unsent(result: &CellResult) -> Option<CellResult> {
    let mut result = result.clone();
    let open = result.stats.as_mut()?.open_loop.as_mut().filter(|o| o.unsent_late > 0)?;
    open.unsent -= open.unsent_late;
    open.due -= open.unsent_late;
    open.unsent_late = 0;
    Some(result)
}

/// One step's row and outcome. A failure is the client's when faultline's
/// CPU was saturated, when other processes took the host's cores, or when
/// the SLO would have held but for the ops it owed for its own lateness;
/// otherwise the target's.
fn judge_step(slo: &Expr, result: &CellResult, rate: f64, phase: Phase) -> Judged {
    let stats = result.stats.as_ref();
    let host = stats.and_then(|s| s.host.clone());
    let disturbed = host.as_ref().and_then(super::host_watch::disturbed);
    let values = faultline_model::compare::RepeatValues::of(result);
    let (ok, failed) = stats.map_or((0, 0), |s| (s.ok, s.failed));
    let (outcome, why) = match result.status {
        CellStatus::Completed => match holds(slo, result) {
            Ok((true, evidence)) => (Outcome::Held, evidence),
            Ok((false, evidence)) => {
                let late = without_late_unsent(result).is_some_and(|r| holds(slo, &r).is_ok_and(|(h, _)| h));
                match (client_bound(result).or(disturbed.clone()), late) {
                    (Some(client), _) => (Outcome::ClientBound, format!("{client} ({evidence})")),
                    (None, true) => (
                        Outcome::ClientBound,
                        format!(
                            "it held but for {} ops a lane owed because it saw the window's end late with slots free ({evidence})",
                            thousands(stats.and_then(|s| s.open_loop).map_or(0, |o| o.unsent_late))
                        ),
                    ),
                    (None, false) => (Outcome::Failed, evidence),
                }
            }
            Err(why) => (Outcome::NotJudged, format!("the SLO cannot be judged on this step: {why}")),
        },
        status => (
            Outcome::NotJudged,
            format!(
                "the step did not complete ({}){}",
                format!("{status:?}").to_lowercase(),
                result.error.as_deref().map(|e| format!(": {e}")).unwrap_or_default()
            ),
        ),
    };
    let step = CapacityStep {
        rate,
        phase,
        achieved_rate: stats.and_then(|s| s.open_loop).map_or(0.0, |o| o.achieved_rate),
        throughput: stats.map_or(0.0, |s| s.throughput),
        p50_ms: values.and_then(|v| v.p50_ms),
        p99_ms: values.and_then(|v| v.p99_ms),
        error_rate: match ok + failed {
            0 => 0.0,
            n => failed as f64 / n as f64,
        },
        unsent: stats.and_then(|s| s.open_loop).map_or(0, |o| o.unsent),
        client_cpu: stats.and_then(|s| s.client_cpu.clone()),
        met: outcome == Outcome::Held,
        client_bound: outcome == Outcome::ClientBound,
        noise: false,
        host,
        disturbed,
        why,
    };
    Judged { step, outcome }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::capacity::RateRange;

    fn spec(from: f64, to: f64, confirm: u32) -> CapacitySpec {
        CapacitySpec {
            rate: RateRange { from, to },
            slo: "errors == 0".into(),
            step: None,
            growth: 2.0,
            precision: 0.05,
            confirm,
            retries: 0,
            tolerance: 0.15,
            max_steps: 40,
        }
    }

    /// Runs a search against a target that meets the SLO below `knee`.
    fn search(c: &CapacitySpec, held: impl Fn(f64, u32) -> bool) -> (Searcher, Bound, Vec<(f64, Phase)>) {
        let mut s = Searcher::new(c);
        let mut tried = Vec::new();
        loop {
            match s.next() {
                Next::Done(bound) => return (s, bound, tried),
                Next::Step(rate, phase) => {
                    let n = tried.len() as u32;
                    tried.push((rate, phase));
                    s.record(rate, phase, held(rate, n), false);
                }
            }
        }
    }

    #[test]
    fn grows_then_bisects_to_the_precision_and_confirms_the_knee() {
        let c = spec(1000.0, 1_000_000.0, 1);
        let (s, bound, tried) = search(&c, |r, _| r <= 37_000.0);
        assert_eq!(bound, Bound::Target);
        let knee = s.knee().unwrap();
        let failed = s.failed_at().unwrap();
        assert!(knee <= 37_000.0 && failed > 37_000.0 && failed / knee <= 1.05, "{knee} {failed} {tried:?}");
        let grown: Vec<f64> = tried.iter().filter(|(_, p)| *p == Phase::Grow).map(|(r, _)| *r).collect();
        assert_eq!(grown, [1000.0, 2000.0, 4000.0, 8000.0, 16_000.0, 32_000.0, 64_000.0]);
        assert_eq!(tried.last(), Some(&(knee, Phase::Confirm)));
        assert!(tried.len() as u32 <= c.planned_steps(), "{} steps, planned {}", tried.len(), c.planned_steps());
    }

    #[test]
    fn a_failed_confirmation_moves_the_knee_down() {
        let c = spec(1000.0, 1_000_000.0, 2);
        // Holds up to 37k, except at the first rate run a second time (the
        // first confirmation).
        let seen = std::cell::RefCell::new(Vec::new());
        let first_confirm = std::cell::Cell::new(None);
        let (s, bound, tried) = search(&c, |r, _| {
            let again = seen.borrow().contains(&r);
            seen.borrow_mut().push(r);
            if again && first_confirm.get().is_none() {
                first_confirm.set(Some(r));
                return false;
            }
            r <= 37_000.0
        });
        assert_eq!(bound, Bound::Target);
        let moved = first_confirm.get().unwrap();
        assert!(s.knee().unwrap() < moved && s.failed_at().unwrap() <= moved, "{tried:?}");
        // The final knee held twice more after its own step.
        let knee = s.knee().unwrap();
        let confirmations = tried.iter().filter(|(r, p)| *r == knee && *p == Phase::Confirm).count();
        assert_eq!(confirmations, 2, "{tried:?}");
    }

    #[test]
    fn the_range_bounds_the_search_on_both_sides() {
        let c = spec(1000.0, 50_000.0, 1);
        let (s, bound, tried) = search(&c, |_, _| true);
        assert_eq!((bound, s.knee()), (Bound::Ceiling, Some(50_000.0)));
        assert_eq!(tried.iter().filter(|(r, _)| *r == 50_000.0).count(), 2, "its step and one confirmation");
        let (s, bound, tried) = search(&c, |_, _| false);
        assert_eq!((bound, s.knee(), tried.len()), (Bound::Floor, None, 1));
    }

    #[test]
    fn a_client_bound_failure_stops_the_search_with_a_lower_bound() {
        let c = spec(1000.0, 1_000_000.0, 1);
        let mut s = Searcher::new(&c);
        s.record(1000.0, Phase::Grow, true, false);
        s.record(2000.0, Phase::Grow, true, false);
        s.record(4000.0, Phase::Grow, false, true);
        assert_eq!(s.next(), Next::Done(Bound::Client));
        assert_eq!(s.knee(), Some(2000.0));
    }

    #[test]
    fn out_of_steps_it_brackets_the_capacity() {
        let mut c = spec(1000.0, 1_000_000.0, 1);
        c.max_steps = 5;
        let (s, bound, tried) = search(&c, |r, _| r <= 5000.0);
        assert_eq!((bound, tried.len()), (Bound::Steps, 5));
        assert!(s.knee().unwrap() >= 4000.0 && s.failed_at().unwrap() <= 8000.0);
        // Out of steps while still growing: at least the last rate that held.
        let (s, bound, _) = search(&c, |_, _| true);
        assert_eq!((bound, s.knee(), s.failed_at()), (Bound::Steps, Some(16_000.0), None));
    }

    /// A completed open-loop step at 10,000/s: `unsent` ops unsent, `late`
    /// of them owed for the client's lateness, faultline's busiest thread at
    /// `busiest`.
    fn step(unsent: u64, late: u64, busiest: f64) -> CellResult {
        let latency = serde_json::json!({"p50": 1.0, "p95": 1.0, "p99": 1.0, "p999": 1.0, "max": 1.0, "mean": 1.0});
        let errors = serde_json::json!({"deadline": 0, "connection": 0, "server": 0, "hang": 0});
        serde_json::from_value(serde_json::json!({
            "scenario": "s", "profile": "p", "shape": "open", "target": "t", "workload": "w", "repeat": 1,
            "status": "completed", "measured_s": 1.0,
            "stats": {
                "ok": 10_000, "failed": 0, "throughput": 10_000.0, "errors": errors, "over_deadline": 0,
                "per_op": {"get": {"ok": 10_000, "failed": 0, "errors": errors, "over_deadline": 0,
                    "throughput": 10_000.0, "latency_ms": latency, "max_any_ms": 1.0}},
                "timeline": [],
                "open_loop": {"rate": 10_000.0, "min_sent": 0.99, "due": 10_000 + unsent, "sent": 10_000,
                    "unsent": unsent, "unsent_late": late, "achieved_rate": 10_000.0},
                "client_cpu": {"cores": busiest, "host_cores": 8, "busiest_thread": "load-thread-0",
                    "busiest_share": busiest}
            }
        }))
        .unwrap()
    }

    #[test]
    fn a_failure_is_the_clients_when_its_cpu_was_saturated_or_it_held_but_for_lateness() {
        let slo = expr::parse("unsent == 0 and p99(get) < 10ms", &[]).unwrap();
        let judge = |unsent, late, busiest| judge_step(&slo, &step(unsent, late, busiest), 10_000.0, Phase::Grow);
        // Unsent with every slot busy at the end: the target's.
        assert_eq!(judge(500, 0, 0.4).outcome, Outcome::Failed);
        // Every unsent op owed for faultline's lateness: the client's.
        let late = judge(500, 500, 0.4);
        assert_eq!(late.outcome, Outcome::ClientBound);
        assert!(late.step.why.contains("but for 500 ops"), "{}", late.step.why);
        // Some of them the target's: still the target's failure.
        assert_eq!(judge(500, 120, 0.4).outcome, Outcome::Failed);
        assert_eq!(judge(0, 0, 0.4).outcome, Outcome::Held);
        // A load thread at 95% of a core: a failure is the client's.
        let busy = judge(500, 0, 0.95);
        assert_eq!(busy.outcome, Outcome::ClientBound);
        assert!(busy.step.why.contains("`load-thread-0` at 95% of a core"), "{}", busy.step.why);
        // An SLO no step can answer stops the search, unjudged.
        let unanswerable = expr::parse("p99(set) < 10ms", &[]).unwrap();
        let judged = judge_step(&unanswerable, &step(0, 0, 0.4), 10_000.0, Phase::Grow);
        assert_eq!(judged.outcome, Outcome::NotJudged);
    }

    /// The noisy host: a step fails once in a burst of other work.
    /// Tried again it holds, so the search goes on past it instead of
    /// bisecting below noise; a failure that repeats is taken.
    #[test]
    fn a_failure_counts_once_it_repeats() {
        let c = CapacitySpec { retries: 1, ..spec(1000.0, 1_000_000.0, 1) };
        // Holds up to 37k, but the first try at 4000 fails (a burst).
        let (s, bound, tried) = search(&c, |r, n| r <= 37_000.0 && !(r == 4000.0 && n == 2));
        assert_eq!(bound, Bound::Target);
        assert!(s.knee().unwrap() > 30_000.0, "the noise at 4000 did not stop the search: {tried:?}");
        assert_eq!(&tried[2..4], &[(4000.0, Phase::Grow), (4000.0, Phase::Retry)]);
        // The real limit failed twice before it counted.
        let failed = s.failed_at().unwrap();
        assert_eq!(tried.iter().filter(|(r, _)| *r == failed).count(), 2, "{tried:?}");
        // Without retries the noise ends the growth: a knee below 4000.
        let (s, _, _) = search(&spec(1000.0, 1_000_000.0, 1), |r, n| r <= 37_000.0 && !(r == 4000.0 && n == 2));
        assert!(s.knee().unwrap() < 4000.0);
    }

    fn row(rate: f64, phase: Phase, met: bool) -> CapacityStep {
        CapacityStep {
            rate,
            phase,
            achieved_rate: rate,
            throughput: rate,
            p50_ms: None,
            p99_ms: None,
            error_rate: 0.0,
            unsent: 0,
            client_cpu: None,
            met,
            client_bound: false,
            noise: false,
            host: None,
            disturbed: None,
            why: String::new(),
        }
    }

    #[test]
    fn steps_that_contradict_each_other_are_said_to() {
        use Outcome::{Failed, Held};
        let mut steps =
            vec![row(1000.0, Phase::Grow, true), row(2000.0, Phase::Grow, false), row(2000.0, Phase::Retry, true)];
        mark_noise(&mut steps);
        assert!(steps[1].noise && !steps[0].noise);
        assert_eq!(contradiction(&steps, &[Held, Failed, Held]), None, "noise contradicts nothing");
        // Held at 4000, failed (twice) at 3000.
        let steps =
            [row(4000.0, Phase::Grow, true), row(3000.0, Phase::Confirm, false), row(3000.0, Phase::Retry, false)];
        let why = contradiction(&steps, &[Held, Failed, Failed]).unwrap();
        assert!(why.contains("held at 4,000/s (step 1) but failed at 3,000/s (step 2)"), "{why}");
    }

    fn searched(repeat: u32, capacity: f64, bound: Bound) -> CellResult {
        let mut cell = step(0, 0, 0.4);
        cell.repeat = repeat;
        cell.capacity = Some(CapacitySearch {
            slo: "errors == 0".into(),
            rate_from: 1000.0,
            rate_to: 1_000_000.0,
            slo_limits: vec![],
            capacity: Some(capacity),
            failed_at: None,
            bound,
            steps: vec![],
            tolerance: 0.15,
            non_monotone: None,
            repeats: None,
        });
        cell
    }

    #[test]
    fn repeats_agree_within_the_tolerance_or_are_not_repeatable() {
        let mut quiet = vec![
            searched(1, 100_000.0, Bound::Target),
            searched(2, 110_000.0, Bound::Target),
            searched(3, 95_000.0, Bound::Target),
        ];
        judge_repeats(&mut quiet);
        let r = quiet[0].capacity.as_ref().unwrap().repeats.clone().unwrap();
        assert_eq!(
            (r.count, r.found, r.median, r.min, r.max),
            (3, 3, Some(100_000.0), Some(95_000.0), Some(110_000.0))
        );
        assert!(r.repeatable && (r.spread.unwrap() - 0.075).abs() < 1e-9, "{r:?}");
        assert_eq!(quiet[2].capacity.as_ref().unwrap().not_repeatable(), None);
        // The busy host: 30,600, 181,000 and 347,000/s.
        let mut noisy = vec![
            searched(1, 30_600.0, Bound::Target),
            searched(2, 181_000.0, Bound::Target),
            searched(3, 347_000.0, Bound::Target),
        ];
        judge_repeats(&mut noisy);
        let why = noisy[1].capacity.as_ref().unwrap().not_repeatable().unwrap();
        assert!(why.contains("30,600 to 347,000/s (median 181,000/s, ±87%), wider than the ±15% tolerance"), "{why}");
        // One search alone has no repeats to agree with.
        let mut alone = vec![searched(1, 1000.0, Bound::Target)];
        judge_repeats(&mut alone);
        assert_eq!(alone[0].capacity.as_ref().unwrap().repeats, None);
    }

    #[test]
    fn a_bisection_rate_lies_strictly_between() {
        assert_eq!(between(4000.0, 8000.0), 5660.0);
        let (low, high) = (1000.0, 1000.5);
        let mid = between(low, high);
        assert!(mid > low && mid < high);
    }
}
