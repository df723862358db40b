//! Runs one op under its deadline and the hang watchdog, and classifies how
//! it ended. Both executors go through here so the rules are the same.

use tokio::time::Instant;

use crate::metrics::{Completion, ErrorClass};
use crate::plan::CellTiming;
use crate::target::Client;
use crate::workload::Op;

/// `measured_from` is the op's start for latency: its actual start in a
/// closed loop, its (slack-adjusted) scheduled start in an open loop.
pub async fn run_op(
    client: &dyn Client,
    op: Op,
    timing: &CellTiming,
    measured_from: Option<Instant>,
) -> Completion {
    let started = Instant::now();
    let deadline = started + timing.deadline;
    // The watchdog abandons the op if the target neither answers nor honours
    // the deadline: a hang, whatever the driver does with cancellation.
    let result =
        match tokio::time::timeout_at(deadline + timing.hang_after, client.execute(op, deadline))
            .await
        {
            Ok(result) => result,
            Err(_) => Err(ErrorClass::Hang),
        };
    let end = Instant::now();
    Completion {
        kind: op.kind,
        start: measured_from.unwrap_or(started),
        end,
        result,
        over_deadline: end > deadline + timing.over_deadline_after,
    }
}
