//! Closed loop: each client keeps a fixed number of ops in flight on its
//! connection and issues the next as soon as one completes.

use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::watchdog::run_op;
use crate::metrics::{ErrorClass, Recorder};
use crate::plan::CellTiming;
use crate::target::Client;
use crate::workload::OpStream;

/// After a connection error, a slot waits this long before its next op so a
/// dead server is not hammered in a tight loop.
const CONNECTION_ERROR_PAUSE: Duration = Duration::from_millis(50);

#[allow(clippy::too_many_arguments)]
pub async fn run_client(
    client: Box<dyn Client>,
    mut ops: OpStream,
    in_flight: u32,
    timing: CellTiming,
    stop_at: Instant,
    mut recorder: Recorder,
    cancel: CancellationToken,
) -> Recorder {
    let client = &*client;
    let timing = &timing;
    let issue = |op, pause: Option<Duration>| async move {
        if let Some(p) = pause {
            tokio::time::sleep(p).await;
        }
        run_op(client, op, timing, None).await
    };
    let mut pending = FuturesUnordered::new();
    for _ in 0..in_flight {
        pending.push(issue(ops.next_op(), None));
    }
    loop {
        tokio::select! {
            biased;
            _ = cancel.cancelled() => break,
            done = pending.next() => {
                let Some(done) = done else { break };
                recorder.record(&done);
                if done.end < stop_at {
                    let pause = (done.result == Err(ErrorClass::Connection)).then_some(CONNECTION_ERROR_PAUSE);
                    pending.push(issue(ops.next_op(), pause));
                }
            }
        }
    }
    recorder
}
