//! The fourth phase: what the window measured. Takes `Merged`; gives
//! `Measured`: the cell's stats (with each confirmed fault's impact and the
//! latency in windows around the faults), the role changes, and the reads a
//! non-primary answered. Separate because it is where the fault records and
//! the role timeline meet the metrics: only what a fault really did is
//! measured around it, and a fault that failed is said on the console.

use std::sync::Arc;

use super::merge::Merged;
use super::{CellRun, Kept};
use crate::metrics::windows::FaultSpan;
use crate::metrics::OpenLoad;
use faultline_kind::TargetDriver;
use faultline_model::results::CellStatus;
use faultline_model::roles::{NonPrimaryReads, RoleChange};
use faultline_model::stats::CellStats;

/// The cell's numbers, and what the checkers still need.
pub struct Measured {
    /// Completed, or Interrupted.
    pub status: CellStatus,
    pub measured_s: f64,
    pub stats: CellStats,
    pub roles: Vec<RoleChange>,
    pub non_primary_reads: Option<NonPrimaryReads>,
    /// The checkers read the final state through it.
    pub driver: Arc<dyn TargetDriver>,
    /// Why the history cannot be judged, if it cannot.
    pub incomplete: Option<anyhow::Error>,
    pub kept: Kept,
}

pub fn summarize(run: &CellRun<'_>, merged: Merged) -> Measured {
    let Merged {
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
    } = merged;
    let schedule = run.schedule();
    let open = schedule.as_ref().map(|(spec, arrivals)| OpenLoad {
        spec,
        arrivals,
        window_start_s: run.cell.timing.warmup.as_secs_f64(),
    });
    let mut stats = metrics.summarize(window, open.as_ref(), &run.stages());
    stats.client_cpu = client_cpu;
    stats.agents = agents;
    stats.served = served;
    stats.host = host;
    // Only what a fault really did is measured around it: one that was
    // never confirmed has no cost to show (a gate on it is unmeasured, not
    // a pass with no denial), and one whose heal failed has no "after".
    let requested: Vec<(String, f64)> =
        kept.faults.iter().filter(|f| f.confirmed_s.is_some()).map(|f| (f.name.clone(), f.requested_s)).collect();
    stats.fault_impact = metrics.fault_impacts(&requested, window);
    if let (Some(books), Some(spec)) = (&fanout, &run.workload.fanout) {
        stats.fanout =
            Some(crate::engine::fanout::summarize(spec, &books.ledgers, &books.subscribers, window, books.drain));
    }
    let spans: Vec<FaultSpan> = kept
        .faults
        .iter()
        .filter(|f| f.confirmed_s.is_some() && f.error.is_none())
        .map(|f| FaultSpan { fault: f.name.clone(), requested_s: f.requested_s, healed_s: f.healed_s })
        .collect();
    stats.window_latency = metrics.window_latency(&spans, window);
    // A fault that failed changes what the cell measured: say why on the
    // console, in the server's words, not only in results.json.
    for f in kept.faults.iter().filter(|f| f.error.is_some()) {
        let error = f.error.as_deref().unwrap_or_default();
        run.engine.events.say(&format!("fault `{}` ({} on {}) failed: {error}", f.name, f.action, f.target));
    }
    let non_primary_reads = match (&role_changes, &read_rule) {
        (Some(sampled), Some(rule)) => {
            let sampled = (sampled.changes.as_slice(), sampled.last_sample_s, sampled.addresses.as_slice());
            metrics.non_primary_reads(&rule.read_concern, rule.requires_primary, sampled, window)
        }
        _ => None,
    };
    let roles = role_changes.map(|sampled| sampled.changes).unwrap_or_default();
    Measured { status, measured_s: window.as_secs_f64(), stats, roles, non_primary_reads, driver, incomplete, kept }
}
