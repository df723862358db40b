//! The crash-recovery matrix: for each scenario, matrix point and variant,
//! how many times the server was killed (or shut down cleanly) and started
//! again on its own data, and whether every write acknowledged before was
//! still there afterwards — the lost-acknowledged-write checker, run on
//! the cell's history against the state read after the restart. "3/3
//! crashes with nothing lost", or the count and examples of what was lost
//! and when it had been acknowledged, relative to the kill. The rows
//! ([`RecoveryRow`]) are results.json's; the report renders them.

use faultline_model::checks::CheckStatus;

use crate::checker::lost_write;
use faultline_model::faults::FaultRecord;
use faultline_model::results::CellResult;

pub use faultline_model::recovery::RecoveryRow;

/// Whether the fault took the server down and started it again on its own
/// data, and how it went down: what the fault itself recorded
/// ([`FaultRecord::restart`]).
fn restart_kind(fault: &FaultRecord) -> Option<&'static str> {
    fault.restart.map(|r| r.as_str())
}

/// The rows for every cell whose faults restarted a server.
pub fn matrix(cells: &[CellResult]) -> Vec<RecoveryRow> {
    let mut rows: Vec<RecoveryRow> = Vec::new();
    for cell in cells {
        let check = cell.checks.iter().find(|c| c.checker == lost_write::NAME);
        for fault in &cell.faults {
            let Some(kind) = restart_kind(fault) else { continue };
            let index = rows.iter().position(|r| {
                r.scenario == cell.scenario
                    && r.matrix == cell.matrix
                    && r.variant == cell.variant()
                    && r.restart == kind
            });
            let row = match index {
                Some(i) => &mut rows[i],
                None => {
                    rows.push(RecoveryRow {
                        scenario: cell.scenario.clone(),
                        matrix: cell.matrix.clone(),
                        variant: cell.variant().to_string(),
                        restart: kind.to_string(),
                        restarts: 0,
                        nothing_lost: 0,
                        unchecked: 0,
                        acknowledged: 0,
                        lost: 0,
                        lost_acked_relative_s: None,
                        examples: Vec::new(),
                        failures: Vec::new(),
                        notes: Vec::new(),
                    });
                    rows.last_mut().expect("just pushed")
                }
            };
            if fault.confirmed_s.is_none() || fault.error.is_some() {
                row.failures.push(format!(
                    "{} #{} {}: {}",
                    cell.variant(),
                    cell.repeat,
                    fault.name,
                    fault.error.as_deref().unwrap_or("not confirmed")
                ));
                continue;
            }
            row.restarts += 1;
            match check {
                Some(c) if c.status == CheckStatus::Ok => row.nothing_lost += 1,
                Some(c) if c.status == CheckStatus::Violated => {
                    if let Some((first, last)) =
                        fault.lost_writes.as_ref().and_then(|l| Some((l.lost.first_s?, l.lost.last_s?)))
                    {
                        let relative = (first - fault.requested_s, last - fault.requested_s);
                        row.lost_acked_relative_s = Some(match row.lost_acked_relative_s {
                            Some((e, l)) => (e.min(relative.0), l.max(relative.1)),
                            None => relative,
                        });
                    }
                }
                Some(c) => {
                    row.unchecked += 1;
                    row.notes.push(c.note.clone());
                }
                None => {
                    row.unchecked += 1;
                    row.notes.push("the spec does not name the lost-acknowledged-write checker".into());
                }
            }
        }
        // The cell's own totals count once, however many restarts it had.
        if let (Some(c), Some(row)) = (
            check,
            rows.iter_mut()
                .rev()
                .find(|r| r.scenario == cell.scenario && r.matrix == cell.matrix && r.variant == cell.variant()),
        ) {
            if cell.faults.iter().any(|f| restart_kind(f).is_some() && f.confirmed_s.is_some()) {
                row.acknowledged += c.checked;
                row.lost += c.violations;
                for w in c.witnesses.iter().take(3usize.saturating_sub(row.examples.len())) {
                    row.examples.push(format!("{} #{}: {w}", cell.variant(), cell.repeat));
                }
            }
        }
    }
    for row in &mut rows {
        row.notes.dedup();
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use faultline_model::checks::{CheckResult, LostWritesAround, Spread};
    use faultline_model::faults::Restart;

    fn cell(repeat: u32, lost: u64, restart: Restart) -> CellResult {
        let mut fault = FaultRecord::requested("crash", "restart", "cache", 2.0);
        fault.confirmed_s = Some(2.3);
        fault.restart = Some(restart);
        if lost > 0 {
            fault.lost_writes = Some(LostWritesAround {
                lost: Spread { count: lost, first_s: Some(1.1), last_s: Some(1.95) },
                ..Default::default()
            });
        }
        let status = if lost == 0 { CheckStatus::Ok } else { CheckStatus::Violated };
        let check = CheckResult {
            checker: "lost-acknowledged-write".into(),
            status,
            checked: 1000,
            judged: "acknowledged writes".into(),
            violations: lost,
            witnesses: (0..lost.min(5)).map(|i| format!("write {i} lost")).collect(),
            note: String::new(),
            index: None,
        };
        let json = serde_json::json!({
            "scenario": "crash", "profile": "p", "shape": "closed 1x1", "target": "cache", "workload": "w",
            "variant": "cache", "matrix": {"fsync": "everysec"}, "repeat": repeat, "status": "completed",
            "measured_s": 3.0,
        });
        let mut c: CellResult = serde_json::from_value(json).unwrap();
        c.checks = vec![check];
        c.faults = vec![fault];
        c
    }

    #[test]
    fn counts_crashes_with_nothing_lost_and_says_when_the_lost_writes_were_acknowledged() {
        let crash = Restart::Crash;
        let rows = matrix(&[cell(1, 0, crash), cell(2, 40, crash), cell(3, 0, crash)]);
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!((r.restarts, r.nothing_lost, r.lost, r.acknowledged), (3, 2, 40, 3000));
        assert_eq!(r.examples.len(), 3);
        assert_eq!(
            r.sentence(),
            "2/3 crashes with nothing lost; 40 of 3,000 acknowledged writes lost, acknowledged from -900.0 ms to -50.0 ms around the restart request"
        );
        assert_eq!(matrix(&[cell(1, 0, Restart::Clean)])[0].sentence(), "1/1 clean restarts with nothing lost");
        let mut not_restarted = cell(1, 0, crash);
        not_restarted.faults[0].restart = None;
        assert!(matrix(&[not_restarted]).is_empty());
    }
}
