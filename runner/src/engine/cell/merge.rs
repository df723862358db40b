//! The third phase: merge what the lanes recorded. Takes `Ran`; gives
//! `Merged`: one set of metrics, the window they cover, whether the cell
//! completed or was interrupted, and why its history is incomplete if it
//! is. Separate because it decides whether what ran can be measured at
//! all: a crashed lane, a failed shape plugin, or a load that ran out
//! before the window ended fails the cell here, with its fault records.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::window::Ran;
use super::{CellRun, Kept, Stopped};
use crate::engine::fanout::FanoutBooks;
use crate::engine::role_watch;
use crate::metrics::CellMetrics;
use crate::results::CellStatus;
use crate::spec::units::format_duration;
use faultline_check::history::HistoryWriter;
use faultline_kind::{ReadRule, TargetDriver};
use faultline_model::stats::ClientCpu;

/// The lanes' books as one, over the window they measured.
pub struct Merged {
    pub driver: Arc<dyn TargetDriver>,
    pub metrics: CellMetrics,
    /// What the stats are per: the cell's duration, or less when the run was
    /// interrupted or the contention rounds were all answered sooner.
    pub window: Duration,
    /// Completed, or Interrupted.
    pub status: CellStatus,
    /// Why some lane's history could not be written in full, if so: the
    /// checkers then cannot judge.
    pub incomplete: Option<anyhow::Error>,
    pub role_changes: Option<role_watch::Sampled>,
    pub read_rule: Option<ReadRule>,
    pub client_cpu: Option<ClientCpu>,
    pub kept: Kept,
    /// Fan-out: the publishers' and the subscribers' books.
    pub fanout: Option<FanoutBooks>,
}

pub fn merge(run: &CellRun<'_>, ran: Ran) -> Result<Merged, Stopped> {
    let Ran { driver, shape, clock, ends, timelines, watcher, role_changes, read_rule, client_cpu, kept, subscribers } =
        ran;
    let cancel = &run.engine.cancel;
    let (workload, t) = (&run.workload, run.cell.timing);
    let mut metrics = CellMetrics::new();
    let mut panicked = None;
    let mut incomplete = None;
    let mut ran_out = None;
    let mut every_lane_ran_out = true;
    let mut ledgers = Vec::new();
    for end in ends {
        match end {
            Ok(end) => {
                ledgers.extend(end.published);
                metrics.merge(end.recorder);
                if let Some(Err(e)) = end.history.map(HistoryWriter::finish) {
                    incomplete = Some(e);
                }
                ran_out = ran_out.max(end.ran_out.filter(|at| *at < clock.stop_at));
                every_lane_ran_out &= end.ran_out.is_some_and(|at| at < clock.stop_at);
            }
            Err(e) => panicked = Some(format!("a load client crashed: {e}")),
        }
    }
    let fanout = match subscribers {
        Some((books, drain)) => {
            let mut subscribers = Vec::with_capacity(books.len());
            for b in books {
                match b {
                    Ok(b) => subscribers.push(b),
                    Err(e) => panicked = Some(format!("a fan-out subscriber crashed: {e}")),
                }
            }
            Some(FanoutBooks { ledgers, subscribers, drain })
        }
        None => None,
    };
    metrics.absorb_timelines(&timelines);
    watcher.abort();
    let ended = Instant::now();

    let (status, window) = if cancel.is_cancelled() {
        (CellStatus::Interrupted, ended.min(clock.stop_at).saturating_duration_since(clock.measure_from))
    } else {
        // Contention rounds end the load when the last round is answered:
        // the window is the time they took.
        let window = match workload.is_rounds() && every_lane_ran_out {
            true => ended.min(clock.stop_at).saturating_duration_since(clock.measure_from),
            false => t.duration,
        };
        (CellStatus::Completed, window)
    };
    if let Some(e) = panicked {
        return Err(Stopped::failed(kept, e));
    }
    // A shape plugin that failed took the load down with it: what was
    // measured is not the workload the spec asked for.
    if let Some(e) = shape.as_ref().and_then(|s| s.lock().expect("shape lock").stopped().cloned()) {
        return Err(Stopped::failed(kept, e.to_string()));
    }
    // A shape that ran out of ops before the window ended left part of
    // the window without the load the spec asked for.
    if workload.is_rounds() && !cancel.is_cancelled() && !every_lane_ran_out {
        return Err(Stopped::failed(
            kept,
            format!(
                "the {} window ended before every contention round was answered: give the rounds a longer duration",
                format_duration(t.duration)
            ),
        ));
    }
    if workload.is_rounds() && !cancel.is_cancelled() && window.is_zero() {
        return Err(Stopped::failed(
            kept,
            "every contention round was done before the warm-up ended: nothing was measured (use warmup: 0s with distribution: rounds)".into(),
        ));
    }
    if let (Some(at), false, false) = (ran_out, cancel.is_cancelled(), workload.is_rounds()) {
        let secs = |i: Instant| i.saturating_duration_since(clock.measure_from).as_secs_f64();
        return Err(Stopped::failed(
            kept,
            format!(
                "the workload's shape ran out of ops {:.2}s into the {} window: the rest of the window had no load",
                secs(at),
                format_duration(t.duration)
            ),
        ));
    }
    Ok(Merged { driver, metrics, window, status, incomplete, role_changes, read_rule, client_cpu, kept, fanout })
}
