//! The last phase: the cell's after-probes, then its result. Takes
//! `Judged`; gives the `CellResult` that results.json records. Separate
//! because the after-probes see the target as the checkers left it, and
//! only a cell that got this far runs them: a cell that stopped early ends
//! with `Stopped::into_result` instead.

use super::judge::Judged;
use super::CellRun;
use faultline_model::probes::ProbeWhen;
use faultline_model::results::CellResult;

pub async fn finish(run: &CellRun<'_>, judged: Judged) -> CellResult {
    let Judged { status, measured_s, stats, roles, non_primary_reads, checks, mut kept } = judged;
    kept.probes.extend(run.probes(ProbeWhen::After).await);
    CellResult {
        status,
        measured_s,
        stats: Some(stats),
        checks,
        faults: kept.faults,
        roles,
        non_primary_reads,
        probes: kept.probes,
        ..run.engine.skipped(run.cell)
    }
}
