//! The fifth phase: run the scenario's checkers on what the cell recorded.
//! Takes `Measured`; gives `Judged`: a result per checker, and the fault
//! records with the lost writes placed around them. Separate because it
//! reads what the window left behind, not the window: the history files and
//! the target's final state (through the driver), after the load has ended.
//! Anything that cannot be read leaves the checkers `unknown`, never passed.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::summarize::Measured;
use super::{CellRun, Kept};
use faultline_check::checker::lost_write_times::{self, AckTimes};
use faultline_check::checker::{self, CheckResult, Checker};
use faultline_check::history::Scope;
use faultline_kind::TargetDriver;
use faultline_model::ops::OpKind;
use faultline_model::results::CellStatus;
use faultline_model::roles::{self, NonPrimaryReads, RoleChange};
use faultline_model::stats::CellStats;

/// How long the linearizability search may take per cell before it says `unknown`.
const LINEARIZABILITY_BUDGET: Duration = Duration::from_secs(60);

/// The cell measured and judged: all of its result but the after-probes.
pub struct Judged {
    /// Completed, or Interrupted.
    pub status: CellStatus,
    pub measured_s: f64,
    pub stats: CellStats,
    pub roles: Vec<RoleChange>,
    pub non_primary_reads: Option<NonPrimaryReads>,
    /// One per checker of the scenario (none without checkers).
    pub checks: Vec<CheckResult>,
    /// The faults now carry the lost writes placed around them.
    pub kept: Kept,
}

pub async fn judge(run: &CellRun<'_>, measured: Measured) -> Judged {
    let Measured { status, measured_s, stats, roles, non_primary_reads, driver, incomplete, mut kept } = measured;
    let checkers = run.checkers();
    let checks = if checkers.is_empty() {
        Vec::new()
    } else if run.engine.cancel.is_cancelled() {
        let why = "not checked: the run was interrupted".to_string();
        checkers.iter().map(|c| c.unknown(why.clone())).collect()
    } else {
        match incomplete {
            Some(e) => checkers.iter().map(|c| c.unknown(format!("the history is incomplete: {e:#}"))).collect(),
            None => {
                // Lost writes are held against the spans a demoted
                // primary was still primary, each fault taking its share.
                let demoted = roles::demoted_primaries(&roles, measured_s);
                let window_start_ns = run.cell.timing.warmup.as_nanos() as u64;
                let spans = lost_write_times::spans_ns(&demoted, window_start_ns);
                let (checks, ack_times) = check_cell(run, checkers, &driver, spans).await;
                if let Some(times) = ack_times {
                    lost_write_times::place(&mut kept.faults, &demoted, &times, window_start_ns);
                }
                checks
            }
        }
    };
    Judged { status, measured_s, stats, roles, non_primary_reads, checks, kept }
}

/// Reads the cell's history, then the final values of the keys it wrote,
/// and runs the checkers. Anything that cannot be read leaves them
/// `unknown`, never passed.
async fn check_cell(
    run: &CellRun<'_>,
    checkers: Vec<&'static dyn Checker>,
    driver: &Arc<dyn TargetDriver>,
    demoted_spans: Vec<(u64, u64)>,
) -> (Vec<CheckResult>, Option<AckTimes>) {
    let (uri, workload, timing) = (run.running.uri.as_str(), &run.workload, run.cell.timing);
    let unknown = |why: String| (checkers.iter().map(|c| c.unknown(why.clone())).collect::<Vec<_>>(), None);
    let dir = run.history_dir();
    // Names the members the records count; without it witnesses name none.
    let _ = faultline_check::history::write_members(&dir, &driver.members(uri));
    let longest_op = timing.deadline + timing.hang_after;
    let first = {
        let (dir, checkers) = (dir.clone(), checkers.clone());
        tokio::task::spawn_blocking(move || checker::first_pass(&dir, &checkers, longest_op)).await
    };
    let pass = match first {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => return unknown(format!("cannot read the history: {e:#}")),
        Err(e) => return unknown(format!("the history reader crashed: {e}")),
    };
    let keys: Vec<u64> = pass.written_keys.iter().copied().collect();
    let key_bytes: Vec<Vec<u8>> = keys
        .iter()
        .map(|k| {
            let mut b = Vec::new();
            workload.put_key(OpKind::Set, *k, &mut b);
            b
        })
        .collect();
    let values = match tokio::time::timeout(Duration::from_secs(60), driver.read_values(uri, &key_bytes)).await {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => return unknown(format!("cannot read the final state: {e:#}")),
        Err(_) => return unknown("reading the final state took longer than 60s".into()),
    };
    // A checker of whole items (hot-key) holds them and their index
    // entries against the images the writes returned.
    let stored_items = match (checkers.iter().any(|c| c.reads_items()), driver.stored_items()) {
        (false, _) => None,
        (true, None) => return unknown("this kind has no stored items to inspect".into()),
        (true, Some(items)) => match tokio::time::timeout(items.budget(), items.read(uri, &key_bytes)).await {
            Ok(Ok(items)) => Some(keys.iter().copied().zip(items).collect::<HashMap<_, _>>()),
            Ok(Err(e)) => return unknown(format!("cannot read the stored items: {e:#}")),
            Err(_) => {
                let budget = faultline_model::units::format_duration(items.budget());
                return unknown(format!("reading the stored items took longer than {budget}"));
            }
        },
    };
    let final_values: HashMap<u64, Option<Vec<u8>>> = keys.into_iter().zip(values).collect();
    let scope = Scope { run: run.engine.run_tag, cell: run.position.0 as u16 };
    let fresh_keys = workload.is_rounds();
    let judging = checkers.clone();
    tokio::task::spawn_blocking(move || {
        let stored = checker::Stored { values: &final_values, items: stored_items.as_ref(), fresh_keys };
        checker::run(&dir, &judging, pass, stored, scope, LINEARIZABILITY_BUDGET, &demoted_spans)
    })
    .await
    .unwrap_or_else(|e| unknown(format!("a checker crashed: {e}")))
}
