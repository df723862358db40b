//! Open loop: ops arrive on a fixed schedule whatever the target does.
//! Latency counts from the scheduled start, so a stalled target is charged for
//! every op that had to wait (no coordinated omission).

use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::watchdog::run_op;
use crate::metrics::Recorder;
use crate::plan::CellTiming;
use crate::target::Client;
use crate::workload::OpStream;

/// tokio's timers tick in milliseconds; lateness up to one tick is the
/// timer's, not the target's, and is not charged to latency (it still shows
/// in the schedule lag).
pub const TIMER_SLACK: Duration = Duration::from_millis(1);

/// The slice of the global schedule one connection serves: ops
/// `first, first + stride, …` at `t0 + i × period`.
pub struct Schedule {
    pub t0: Instant,
    pub period: Duration,
    pub first: u64,
    pub stride: u64,
}

impl Schedule {
    fn at(&self, i: u64) -> Instant {
        self.t0 + self.period.mul_f64(i as f64)
    }
}

#[allow(clippy::too_many_arguments)]
pub async fn run_client(
    client: Box<dyn Client>,
    mut ops: OpStream,
    in_flight: u32,
    schedule: Schedule,
    timing: CellTiming,
    stop_at: Instant,
    mut recorder: Recorder,
    cancel: CancellationToken,
) -> Recorder {
    let client = &*client;
    let timing = &timing;
    let issue = |op, scheduled: Instant| async move {
        tokio::time::sleep_until(scheduled).await;
        let started = Instant::now();
        let charged_from = started.min(scheduled + TIMER_SLACK);
        (
            scheduled,
            started,
            run_op(client, op, timing, Some(charged_from)).await,
        )
    };
    let mut next = schedule.first;
    let mut pending = FuturesUnordered::new();
    for _ in 0..in_flight {
        let at = schedule.at(next);
        if at >= stop_at {
            break;
        }
        pending.push(issue(ops.next_op(), at));
        next += schedule.stride;
    }
    loop {
        tokio::select! {
            biased;
            _ = cancel.cancelled() => break,
            done = pending.next() => {
                let Some((scheduled, started, done)) = done else { break };
                recorder.record_lag(scheduled, started);
                recorder.record(&done);
                let at = schedule.at(next);
                if at < stop_at {
                    pending.push(issue(ops.next_op(), at));
                    next += schedule.stride;
                }
            }
        }
    }
    recorder
}
