//! Holding what agents claim against what the server saw. The link (link.rs)
//! keeps strangers out; this catches a key holder that lies, or a share
//! replayed from another cell: the coordinator reads the target's own call
//! counters (a kind's [`TargetDriver::served`], e.g. Redis's `INFO
//! commandstats`) just before the agents start a cell and again once their
//! shares are in, and a share claiming successes the server never counted
//! fails the run. The server also counts the warm-up, probes and anyone
//! else's calls, so the check is one-sided: it can miss a lie that stays
//! under the server's real count, never blame an honest share.

use std::sync::Arc;
use std::time::Duration;

use faultline_kind::{Served, TargetDriver};
use faultline_model::ops::OpKind;
use faultline_model::stats::{ServedCheck, ServedOp, ServedOutcome};

/// How long a reading of the counters may take: a server that does not
/// answer within it (stopped, cut off) has counters that cannot be read.
const READ_LIMIT: Duration = Duration::from_secs(5);

/// The server's counters, or why they could not be read.
pub(crate) type Reading = Result<Served, String>;

/// The target's counters now; None when its kind keeps none faultline reads.
pub(crate) async fn read(driver: &Arc<dyn TargetDriver>, uri: &str) -> Option<Reading> {
    match tokio::time::timeout(READ_LIMIT, driver.served(uri)).await {
        Ok(None) => None,
        Ok(Some(reading)) => Some(reading.map_err(|e| format!("{e:#}"))),
        Err(_) => Some(Err(format!("the server did not answer within {}s", READ_LIMIT.as_secs()))),
    }
}

/// The check of one cell: the agents' claimed successes per op kind
/// against the calls counted between `before` and `after`.
pub(crate) fn check(before: Reading, after: Reading, claimed: &[(OpKind, u64)]) -> ServedCheck {
    let source = before.as_ref().or(after.as_ref()).map_or("the server's counters", |s| s.source).to_string();
    let done = |ops, outcome, why: String| ServedCheck { source: source.clone(), ops, outcome, why };
    let before = match before {
        Ok(b) => b,
        Err(e) => {
            return done(
                Vec::new(),
                ServedOutcome::Unverified,
                format!("the counters could not be read before the cell: {e}"),
            )
        }
    };
    let after = match after {
        Ok(a) => a,
        Err(e) => {
            let why = format!("the server's counters could be read before the cell but not after it: {e}");
            return done(Vec::new(), ServedOutcome::Unreadable, why);
        }
    };
    if before.server_id != after.server_id {
        let why = "the server restarted or another one answered (its run id changed): its counters began again".into();
        return done(Vec::new(), ServedOutcome::Unverified, why);
    }
    let count = |of: &Served, kind: OpKind| of.calls.iter().filter(|(k, _)| *k == kind).map(|(_, n)| n).sum::<u64>();
    let ops: Vec<ServedOp> = claimed
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|&(kind, claimed)| ServedOp {
            op: kind.as_str().to_string(),
            claimed,
            served: count(&after, kind).saturating_sub(count(&before, kind)),
        })
        .collect();
    let short: Vec<String> = ops
        .iter()
        .filter(|o| o.served < o.claimed)
        .map(|o| format!("the agents claim {} `{}` successes, the server counted {} calls", o.claimed, o.op, o.served))
        .collect();
    match (ops.is_empty(), short.is_empty()) {
        // Nothing claimed: nothing to hold against the server, and no pass.
        (true, _) => done(ops, ServedOutcome::Unverified, "the agents claim no successes of ops it counts".into()),
        (false, true) => done(ops, ServedOutcome::Held, String::new()),
        (false, false) => done(ops, ServedOutcome::Violated, short.join("; ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(id: &str, get: u64, set: u64) -> Reading {
        Ok(Served {
            server_id: id.into(),
            source: "INFO commandstats",
            calls: vec![(OpKind::Get, get), (OpKind::Set, set)],
        })
    }

    #[test]
    fn claims_within_what_the_server_counted_hold() {
        let c = check(served("a", 100, 50), served("a", 1_300, 900), &[(OpKind::Get, 1_000), (OpKind::Set, 800)]);
        assert_eq!(c.outcome, ServedOutcome::Held, "{}", c.why);
        assert_eq!(c.ops[0], ServedOp { op: "get".into(), claimed: 1_000, served: 1_200 });
    }

    /// The forged shares: successes claimed of a server that
    /// executed nothing over the cell.
    #[test]
    fn claims_the_server_never_counted_are_violated() {
        let c = check(served("a", 100, 50), served("a", 100, 50), &[(OpKind::Get, 1_000), (OpKind::Set, 0)]);
        assert_eq!(c.outcome, ServedOutcome::Violated);
        assert!(c.why.contains("claim 1000 `get` successes, the server counted 0 calls"), "{}", c.why);
        assert_eq!(c.ops.len(), 1, "kinds nobody claimed are not listed");
        // No claims: nothing held, so not `held`.
        let none = check(served("a", 1, 1), served("a", 1, 1), &[(OpKind::Get, 0)]);
        assert_eq!(none.outcome, ServedOutcome::Unverified);
    }

    #[test]
    fn a_server_that_stops_answering_or_restarts_decides_nothing_it_cannot() {
        let silent = check(served("a", 0, 0), Err("no answer".into()), &[(OpKind::Get, 1)]);
        assert_eq!(silent.outcome, ServedOutcome::Unreadable);
        let restarted = check(served("a", 500, 0), served("b", 10, 0), &[(OpKind::Get, 400)]);
        assert_eq!(restarted.outcome, ServedOutcome::Unverified);
        let never = check(Err("refused".into()), served("a", 0, 0), &[(OpKind::Get, 1)]);
        assert_eq!(never.outcome, ServedOutcome::Unverified);
    }
}
