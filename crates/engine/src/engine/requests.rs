//! The request/response executor, for official drivers (MongoDB, the AWS
//! SDK) that issue every op as its own future over their own connection
//! pool. A lane keeps up to `in_flight` request futures running and polls
//! them together; when ops are issued ([`Issuer`]) and how they are given up
//! and recorded ([`Books`]) is the same code the pipelined lane uses.
//!
//! The driver classifies each outcome (ok, failed, or unknown when it may
//! have been applied) and names its failures; the engine owns time. An op
//! still running at its deadline is dropped there when the client cancels at
//! the deadline, else it is left running until the hang watchdog fires
//! `hang_after` later and counts it as a hang. Dropping the future is the
//! cancellation: whether or not the driver would have honoured one, the slot
//! is free again and the op is never counted twice.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use futures::stream::{FuturesUnordered, StreamExt};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::books::{Books, Ending, HistoryLog, LaneEnd, Pending, Settings};
use super::schedule::Issuer;
use crate::metrics::Recorder;
use faultline_check::history::{parse_value, Observed, Outcome};
use faultline_kind::workload::OpStream;
use faultline_kind::{Applied, ReadValue, RequestClient, Response};

/// An op's number in its lane, how it ended, and who answered it.
type Request = Pin<Box<dyn Future<Output = (u64, Response, Option<String>)> + Send>>;

/// One op in flight: its number in this lane and its books entry; the
/// future runs in the lane's set under the same number.
struct InFlight {
    id: u64,
    pending: Pending,
    abort: futures::future::AbortHandle,
}

pub async fn run(
    client: Arc<dyn RequestClient>,
    mut ops: OpStream,
    settings: Settings,
    recorder: Recorder,
    history: Option<HistoryLog>,
    cancel: CancellationToken,
) -> LaneEnd {
    let mut books = Books::new(&settings, recorder, history, &ops);
    let mut issuer =
        Issuer::new(settings.pacing, settings.active, settings.in_flight, settings.stop_at, settings.rounds);
    let mut running: FuturesUnordered<futures::future::Abortable<Request>> = FuturesUnordered::new();
    // In issue order; a handful of entries, so a scan beats a map.
    let mut in_flight: Vec<InFlight> = Vec::with_capacity(settings.in_flight as usize);
    let mut next_id = 0u64;
    let attributed = client.attributes_reads();

    loop {
        let now = Instant::now();
        if cancel.is_cancelled() || issuer.done(now, books.live) {
            break;
        }
        books.report_completions(&mut ops);
        while let Some(issue) = issuer.next(now, books.live, &mut ops, &mut books.recorder) {
            let (id, client) = (next_id, Arc::clone(&client));
            next_id += 1;
            let op = issue.op.clone();
            let request: Request = Box::pin(async move {
                match attributed {
                    true => {
                        let (response, answered_by) = client.execute_attributed(&op).await;
                        (id, response, answered_by)
                    }
                    false => (id, client.execute(&op).await, None),
                }
            });
            let (abort, registration) = futures::future::AbortHandle::new_pair();
            running.push(futures::future::Abortable::new(request, registration));
            // A driver may send at once: the op may take effect from here on.
            in_flight.push(InFlight { id, pending: Pending::new(issue, now, true, &books.timing), abort });
            books.live += 1;
        }
        if issuer.exhausted() && books.live == 0 {
            break;
        }
        if !issuer.exhausted() {
            ops.prepare(settings.in_flight as usize);
        }

        let watchdog_at = in_flight.iter().map(|f| books.give_up_at(&f.pending)).min();
        let stop_at = (now < settings.stop_at).then_some(settings.stop_at);
        let wake_at = [watchdog_at, issuer.wake_at(books.live, now), stop_at].into_iter().flatten().min();
        let wake = async {
            match wake_at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let next_done = async {
            match running.is_empty() {
                true => std::future::pending().await,
                false => running.next().await,
            }
        };
        tokio::select! {
            biased;
            _ = cancel.cancelled() => break,
            _ = issuer.round_opened() => {}
            done = next_done => {
                // An aborted request ends as `Err`: it was given up already.
                if let Some(Ok((id, response, answered_by))) = done {
                    if let Some(at) = in_flight.iter().position(|f| f.id == id) {
                        let f = in_flight.remove(at);
                        end_request(&mut books, &f.pending, Instant::now(), response, answered_by.as_deref());
                    }
                }
            }
            _ = wake => {
                let now = Instant::now();
                in_flight.retain_mut(|f| {
                    if books.give_up_at(&f.pending) > now {
                        return true;
                    }
                    f.abort.abort();
                    books.give_up(&mut f.pending, now);
                    false
                });
            }
        }
    }
    // Whatever is still running when the load stops is dropped with the set.
    issuer.count_unsent(&mut books.recorder, settings.measure_from, cancel.is_cancelled());
    books.close(issuer.ran_out)
}

/// Records how a driver said an op ended, and which member answered it.
fn end_request(books: &mut Books, p: &Pending, end: Instant, response: Response, answered_by: Option<&str>) {
    let ending = match &response {
        Ok(value) => {
            let observed = match (value, &books.history) {
                (_, None) | (ReadValue::None, _) => Observed::Nothing,
                (ReadValue::Nil, _) => Observed::Nil,
                (ReadValue::Bytes(bytes), Some(h)) => parse_value(bytes, h.scope),
            };
            Ending { result: Ok(()), outcome: Outcome::Ok, observed, detail: b"", code: None, answered_by }
        }
        Err(e) => Ending {
            result: Err(e.class),
            outcome: match e.applied {
                Applied::No => Outcome::Fail,
                Applied::Maybe => Outcome::Unknown,
            },
            observed: Observed::Nothing,
            detail: e.message.as_bytes(),
            code: e.code.as_deref(),
            answered_by: None,
        },
    };
    books.end(p, end, ending);
}

/// The executor's accounting against a server in memory: every op due is
/// sent or counted unsent, every op sent ends once (ok, failed, or given
/// up at its deadline), whatever the server does.
#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Duration;

    use super::*;
    use faultline_kind::workload::Op;
    use faultline_kind::DriverError;
    use faultline_model::stats::ErrorClass;

    /// Answers each op after `delay`; fails every `fail_every`th; from op
    /// `hangs_from` on never answers.
    struct Fake {
        served: AtomicU64,
        delay: Duration,
        fail_every: u64,
        hangs_from: u64,
    }

    #[async_trait::async_trait]
    impl RequestClient for Fake {
        async fn execute(&self, _op: &Op) -> Response {
            let n = self.served.fetch_add(1, Ordering::SeqCst);
            if n >= self.hangs_from {
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(self.delay).await;
            match (n + 1).is_multiple_of(self.fail_every) {
                true => Err(DriverError {
                    class: ErrorClass::Server,
                    applied: Applied::No,
                    code: Some("Refused".into()),
                    message: "refused".into(),
                }),
                false => Ok(ReadValue::None),
            }
        }
    }

    /// One lane of an open loop at `rate` over a `window` of ms against
    /// `fake`, with `in_flight` slots and a 40 ms deadline: the cell's stats.
    async fn one_lane(fake: Fake, rate: f64, window: u64, in_flight: u32) -> faultline_model::stats::CellStats {
        let lane = crate::engine::test_lane::OneLane::new(rate, window, in_flight);
        lane.run(|ops, settings, recorder| run(Arc::new(fake), ops, settings, recorder, None, CancellationToken::new()))
            .await
    }

    #[tokio::test]
    async fn every_op_due_is_sent_or_unsent_and_every_op_sent_ends_once() {
        let fake =
            Fake { served: AtomicU64::new(0), delay: Duration::from_micros(200), fail_every: 5, hangs_from: u64::MAX };
        let stats = one_lane(fake, 1000.0, 300, 8).await;
        let open = stats.open_loop.expect("an open loop");
        assert_eq!(open.due, open.sent + open.unsent, "{open:?}");
        assert_eq!(stats.ok + stats.failed, open.sent, "{stats:?}");
        // 1,000/s over 300 ms: 300 ops due (the first at the window's start).
        assert!(open.due.abs_diff(300) <= 1, "{open:?}");
        // The fake fails every fifth op it serves, and it served them all.
        assert_eq!(stats.errors.server, stats.failed);
        assert!(stats.failed.abs_diff(open.sent / 5) <= 1, "{} of {}", stats.failed, open.sent);
    }

    /// A server that stops answering: the slots fill, each op is given up at
    /// its deadline (a failure of its own class) and what no slot could
    /// take stays owed, unsent, never lost from the books.
    #[tokio::test]
    async fn a_server_that_stops_answering_leaves_every_op_accounted_for() {
        let fake = Fake { served: AtomicU64::new(0), delay: Duration::ZERO, fail_every: u64::MAX, hangs_from: 50 };
        let stats = one_lane(fake, 1000.0, 300, 4).await;
        let open = stats.open_loop.expect("an open loop");
        assert_eq!(open.due, open.sent + open.unsent, "{open:?}");
        assert_eq!(stats.ok + stats.failed, open.sent, "{stats:?}");
        assert_eq!(stats.ok, 50, "the fake answered its first 50 ops");
        assert!(stats.errors.deadline > 0 && stats.errors.deadline == stats.failed, "{:?}", stats.errors);
        // 4 slots, each freed every 40 ms, cannot send 1,000/s.
        assert!(open.unsent > 100, "{open:?}");
    }
}
