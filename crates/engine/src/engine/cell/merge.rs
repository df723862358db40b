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
use crate::engine::agent::{served, AgentEnd};
use crate::engine::fanout::FanoutBooks;
use crate::engine::role_watch;
use crate::metrics::CellMetrics;
use faultline_check::history::HistoryWriter;
use faultline_kind::{ReadRule, TargetDriver};
use faultline_model::ops::OpKind;
use faultline_model::results::CellStatus;
use faultline_model::stats::{AgentShare, ClientCpu, HostLoad, ServedCheck};
use faultline_model::units::format_duration;

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
    pub host: Option<HostLoad>,
    pub kept: Kept,
    /// Fan-out: the publishers' and the subscribers' books.
    pub fanout: Option<FanoutBooks>,
    /// On agents: each agent's share.
    pub agents: Vec<AgentShare>,
    /// On agents: their claimed successes against the server's counters.
    pub served: Option<ServedCheck>,
}

pub fn merge(run: &CellRun<'_>, ran: Ran) -> Result<Merged, Stopped> {
    let Ran {
        driver,
        shape,
        clock,
        ends,
        timelines,
        watcher,
        role_changes,
        read_rule,
        mut client_cpu,
        host,
        kept,
        subscribers,
        remote,
        served: served_readings,
    } = ran;
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
    // An agent's share: its lanes' books, merged there.
    let mut lost = None;
    let mut shares = Vec::new();
    let mut claimed: Vec<(OpKind, u64)> = OpKind::ALL.iter().map(|k| (*k, 0)).collect();
    for end in remote {
        match end {
            Ok(AgentEnd { agent, done, widened_ns }) => {
                if let Some(e) = done.crashed {
                    panicked = Some(format!("agent `{agent}`: {e}"));
                }
                if let Some(e) = done.history_incomplete {
                    incomplete = Some(anyhow::anyhow!("agent `{agent}`: {e}"));
                }
                for lane in &done.lanes {
                    // An instant the clock cannot hold (a share that lies)
                    // counts as never.
                    let at = lane.ran_out_ns.and_then(|ns| match ns >= 0 {
                        true => clock.measure_from.checked_add(Duration::from_nanos(ns as u64)),
                        false => clock.measure_from.checked_sub(Duration::from_nanos(ns.unsigned_abs())),
                    });
                    ran_out = ran_out.max(at.filter(|at| *at < clock.stop_at));
                    every_lane_ran_out &= at.is_some_and(|at| at < clock.stop_at);
                }
                for ((_, total), ok) in claimed.iter_mut().zip(done.metrics.ok_by_kind()) {
                    *total = total.saturating_add(ok);
                }
                let (ok, failed) = done.metrics.counts();
                let clock_uncertainty_us = widened_ns as f64 / 1e3;
                let counts = (done.lanes.len() as u32, ok, failed, done.metrics.unsent());
                shares.push((agent, counts, done.client_cpu, clock_uncertainty_us));
                metrics.absorb(done.metrics);
            }
            Err(why) => lost = Some(why),
        }
    }
    // The load generator is the agents: the busiest of them says whether it was the limit.
    if !shares.is_empty() {
        client_cpu =
            shares.iter().filter_map(|s| s.2.clone()).max_by(|a, b| a.busiest_share.total_cmp(&b.busiest_share));
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
    // A lost agent's share was never measured: the cell is not passed
    // on the others' share.
    if let Some(why) = lost {
        return Err(Stopped::failed(kept, why));
    }
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
    let open_loop = run.schedule().is_some();
    let agents = shares
        .into_iter()
        .map(|(agent, (lanes, ok, failed, unsent), client_cpu, clock_uncertainty_us)| AgentShare {
            agent,
            lanes,
            ok,
            failed,
            throughput: ok as f64 / window.as_secs_f64().max(1e-9),
            unsent: open_loop.then_some(unsent),
            client_cpu,
            clock_uncertainty_us,
        })
        .collect();
    let served = served_readings.map(|(before, after)| served::check(before, after, &claimed));
    Ok(Merged {
        driver,
        metrics,
        window,
        status,
        incomplete,
        role_changes,
        read_rule,
        client_cpu,
        host,
        kept,
        fanout,
        agents,
        served,
    })
}
