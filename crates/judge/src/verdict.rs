//! The run's verdict: INCOMPLETE if the run was interrupted (its numbers cover
//! an arbitrary part of the plan); otherwise FAIL if any gate failed, or if
//! agents claimed successes the server never counted (agent/served.rs);
//! otherwise INCOMPLETE if any part of the plan did not run or any gate could
//! not be evaluated; PASS only when everything ran and every gate held on
//! measured values.

use faultline_model::results::{CellResult, CellStatus, GateOutcome, GateResult, Verdict};
use faultline_model::stats::ServedOutcome;

pub fn decide(
    gates: &[GateResult],
    cells: &[CellResult],
    subset_reasons: &[String],
    errors: &[String],
    interrupted: bool,
) -> (Verdict, Vec<String>) {
    let mut fail = Vec::new();
    let mut incomplete = Vec::new();
    let decisive: Vec<&GateResult> = gates.iter().filter(|g| !g.informational).collect();
    for g in &decisive {
        match g.result {
            GateOutcome::Fail => fail.push(format!("gate `{}` failed", g.name)),
            GateOutcome::Incomplete => incomplete.push(format!("gate `{}` could not be evaluated", g.name)),
            GateOutcome::Pass => {}
        }
    }
    if interrupted {
        incomplete.push("the run was interrupted".into());
    }
    // Measurements from agents that the server's own counters contradict,
    // or could not be held against them.
    for c in cells {
        let Some(check) = c.stats.as_ref().and_then(|s| s.served.as_ref()) else { continue };
        let cell = format!("cell {}", c.label());
        match check.outcome {
            ServedOutcome::Violated => fail.push(format!("{cell}: {} ({})", check.why, check.source)),
            ServedOutcome::Unreadable => incomplete.push(format!("{cell}: {}", check.why)),
            ServedOutcome::Held | ServedOutcome::Unverified => {}
        }
    }
    let not_run = cells.iter().filter(|c| c.status != CellStatus::Completed).count();
    if not_run > 0 {
        incomplete.push(format!("{not_run} of {} cells did not complete", cells.len()));
    }
    if let Some(e) = errors.first() {
        incomplete.push(format!("error: {}", e.lines().next().unwrap_or(e)));
    }
    incomplete.extend(subset_reasons.iter().cloned());
    if decisive.is_empty() {
        incomplete.push("the spec has no gates but informational ones, so nothing was decided".into());
    }
    if !fail.is_empty() && !interrupted {
        fail.extend(incomplete);
        (Verdict::Fail, fail)
    } else if !incomplete.is_empty() {
        incomplete.extend(fail);
        (Verdict::Incomplete, incomplete)
    } else {
        (Verdict::Pass, vec![format!("all {} gates held in all {} cells", decisive.len(), cells.len())])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(result: GateOutcome) -> GateResult {
        GateResult {
            name: "g".into(),
            expr: "errors == 0".into(),
            result,
            evidence: String::new(),
            criteria: Vec::new(),
            informational: false,
            cells: Vec::new(),
        }
    }

    #[test]
    fn fail_wins_then_incomplete_then_pass() {
        assert_eq!(decide(&[gate(GateOutcome::Pass)], &[], &[], &[], false).0, Verdict::Pass);
        assert_eq!(decide(&[gate(GateOutcome::Pass), gate(GateOutcome::Fail)], &[], &[], &[], false).0, Verdict::Fail);
        // Interrupted: partial numbers decide nothing, not even a failure.
        let (v, reasons) = decide(&[gate(GateOutcome::Fail)], &[], &[], &[], true);
        assert_eq!(v, Verdict::Incomplete);
        assert!(reasons.iter().any(|r| r.contains("failed")), "{reasons:?}");
        assert_eq!(
            decide(&[gate(GateOutcome::Pass), gate(GateOutcome::Incomplete)], &[], &[], &[], false).0,
            Verdict::Incomplete
        );
        assert_eq!(decide(&[gate(GateOutcome::Pass)], &[], &["--quick".into()], &[], false).0, Verdict::Incomplete);
        assert_eq!(decide(&[gate(GateOutcome::Pass)], &[], &[], &["boom".into()], false).0, Verdict::Incomplete);
        assert_eq!(decide(&[gate(GateOutcome::Pass)], &[], &[], &[], true).0, Verdict::Incomplete);
        // No gates: nothing was decided, so nothing passed.
        assert_eq!(decide(&[], &[], &[], &[], false).0, Verdict::Incomplete);
        // An informational gate is reported, never decisive: its failure
        // fails nothing, and it alone decides nothing.
        let info = GateResult { informational: true, ..gate(GateOutcome::Fail) };
        assert_eq!(decide(&[gate(GateOutcome::Pass), info.clone()], &[], &[], &[], false).0, Verdict::Pass);
        assert_eq!(decide(&[info], &[], &[], &[], false).0, Verdict::Incomplete);
    }

    /// Agents' shares the server's counters contradict fail the run even
    /// when every gate held; counters that went unreadable leave it
    /// INCOMPLETE; a restarted server's decide nothing.
    #[test]
    fn claims_the_server_never_counted_fail_the_run() {
        use faultline_model::stats::ServedCheck;
        let with = |outcome| {
            let mut c = crate::gate::tests::cell("p", Some(1.0), 0);
            c.stats.as_mut().unwrap().served =
                Some(ServedCheck { source: "INFO commandstats".into(), ops: vec![], outcome, why: "why".into() });
            c
        };
        let decided = |outcome| decide(&[gate(GateOutcome::Pass)], &[with(outcome)], &[], &[], false);
        let (v, reasons) = decided(ServedOutcome::Violated);
        assert_eq!(v, Verdict::Fail);
        assert!(reasons[0].contains("why (INFO commandstats)"), "{reasons:?}");
        assert_eq!(decided(ServedOutcome::Unreadable).0, Verdict::Incomplete);
        assert_eq!(decided(ServedOutcome::Unverified).0, Verdict::Pass);
        assert_eq!(decided(ServedOutcome::Held).0, Verdict::Pass);
    }
}
