//! The pipelined executor: drives one connection of a protocol faultline
//! encodes itself, keeping up to `in_flight` ops outstanding on the socket,
//! batching requests into one write and replies out of one read, the way
//! redis-benchmark and memtier do, so the load generator stays cheap.
//! Replies come back in request order, so they are matched first in, first
//! out. When ops are issued ([`Issuer`]) and how they are given up and
//! recorded ([`Books`]) is shared with the request/response executor.
//!
//! Deadlines and the hang watchdog: an op still unanswered at its deadline is
//! given up (when the spec says the client cancels at the deadline) or, when
//! it does not, counted as a hang `hang_after` later. Either way its slot is
//! freed; its reply, if it ever comes, is read and dropped. A broken
//! connection fails its outstanding ops; new ops then wait for a reconnect,
//! within their deadlines, as a driver's would. So does a connection whose
//! server says it is the wrong one (a demoted primary's `READONLY`): it is
//! dropped, and the reconnect finds the current primary.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::books::{Books, Ending, HistoryLog, LaneEnd, Pending, Settings};
use super::schedule::{Issue, Issuer};
use crate::metrics::{ErrorClass, Recorder};
use faultline_check::history::{parse_value, Observed, Outcome};
use faultline_kind::workload::{OpStream, Workload};
use faultline_kind::{Connection, PipelinedConnection, ReplyValue, Stream, TargetDriver, WireProtocol};

/// How long to wait between reconnect attempts.
const RECONNECT_PAUSE: Duration = Duration::from_millis(100);

/// How long one reconnect attempt may take.
const RECONNECT_TIMEOUT: Duration = Duration::from_millis(500);

/// Where a connection comes from again after it breaks.
pub struct Dialer {
    pub driver: Arc<dyn TargetDriver>,
    pub uri: String,
    pub workload: Arc<Workload>,
}

impl Dialer {
    /// A new connection within `limit`, or why not.
    pub async fn dial(&self, limit: Duration) -> anyhow::Result<PipelinedConnection> {
        let dial = self.driver.connect(&self.uri, Arc::clone(&self.workload));
        match tokio::time::timeout(limit, dial).await {
            Ok(Ok(Connection::Pipelined(c))) => Ok(c),
            Ok(Ok(Connection::Requests(_))) => {
                anyhow::bail!("the driver gave a request client, not a pipelined connection")
            }
            Ok(Err(e)) => Err(e),
            Err(_) => anyhow::bail!("no connection within {limit:?}"),
        }
    }
}

struct Socket {
    stream: Stream,
    protocol: Box<dyn WireProtocol>,
}

/// One connection's ops: those on the wire (or waiting for a reconnect) in
/// request order, which is also reply order.
struct Lane {
    socket: Option<Socket>,
    outstanding: VecDeque<Pending>,
    books: Books,
    write_buf: Vec<u8>,
    read_buf: Vec<u8>,
    read_start: usize,
    read_end: usize,
    next_reconnect: Instant,
}

impl Lane {
    fn connected(&mut self, c: PipelinedConnection) {
        let mut protocol = c.protocol;
        // Ops issued while disconnected go out now; replies to ops given up
        // meanwhile will never come on the new socket, so they are forgotten.
        self.outstanding.retain(|p| !p.abandoned);
        self.write_buf.clear();
        for p in &mut self.outstanding {
            protocol.encode(&p.op, &mut self.write_buf);
            p.sent = true;
        }
        self.socket = Some(Socket { stream: c.stream, protocol });
        (self.read_start, self.read_end) = (0, 0);
    }

    /// The connection broke (`why`): every op on it failed; reconnect after a pause.
    fn disconnected(&mut self, why: &str) {
        self.socket = None;
        self.write_buf.clear();
        (self.read_start, self.read_end) = (0, 0);
        let now = Instant::now();
        for p in self.outstanding.drain(..).filter(|p| !p.abandoned) {
            self.books.end(&p, now, Ending::failed(ErrorClass::Connection, p.sent, why.as_bytes()));
        }
        self.next_reconnect = now + RECONNECT_PAUSE;
    }

    #[inline]
    fn issue(&mut self, issue: Issue, now: Instant) {
        let sent = match &mut self.socket {
            Some(s) => {
                s.protocol.encode(&issue.op, &mut self.write_buf);
                true
            }
            None => false,
        };
        self.outstanding.push_back(Pending::new(issue, now, sent, &self.books.timing));
        self.books.live += 1;
    }

    /// Makes room at the end of the read buffer.
    #[inline]
    fn compact(&mut self) {
        if self.read_start == self.read_end {
            (self.read_start, self.read_end) = (0, 0);
        } else if self.read_end == self.read_buf.len() {
            self.read_buf.copy_within(self.read_start..self.read_end, 0);
            (self.read_start, self.read_end) = (0, self.read_end - self.read_start);
            if self.read_end == self.read_buf.len() {
                self.read_buf.resize(self.read_buf.len() * 2, 0);
            }
        }
    }

    /// Matches complete replies with the oldest outstanding ops. A reply that
    /// says the connection points at the wrong server counts as the server
    /// error it is; the replies already read are matched too, then the
    /// connection is dropped so the reconnect finds the current server.
    fn take_replies(&mut self, end: Instant) {
        let mut wrong_server = false;
        loop {
            let s = self.socket.as_mut().expect("replies arrive only while connected");
            match s.protocol.decode(&self.read_buf[self.read_start..self.read_end]) {
                Ok(Some(reply)) => {
                    let start = self.read_start;
                    self.read_start += reply.len;
                    wrong_server |= reply.wrong_server;
                    let Some(p) = self.outstanding.pop_front() else {
                        // A reply nobody asked for: the stream is out of step.
                        return self.disconnected("a reply nobody asked for: the stream is out of step");
                    };
                    if p.abandoned {
                        continue;
                    }
                    let bytes = |range: &std::ops::Range<usize>| &self.read_buf[start + range.start..start + range.end];
                    let observed = match (&reply.value, &self.books.history) {
                        (_, None) | (ReplyValue::None | ReplyValue::Count(_), _) => Observed::Nothing,
                        (ReplyValue::Nil, _) => Observed::Nil,
                        (ReplyValue::Bytes(range), Some(h)) => parse_value(bytes(range), h.scope),
                    };
                    // A publish's acknowledgement, with the receivers it reached.
                    if let (Some(m), Some(ledger), ReplyValue::Count(receivers)) =
                        (p.op.message, &mut self.books.published, &reply.value)
                    {
                        ledger.acknowledged(p.op.key as usize, m.seq, *receivers, p.issued);
                    }
                    let detail = reply.message.as_ref().map(bytes).unwrap_or_default();
                    // An error reply: the server refused it.
                    let outcome = if reply.outcome.is_ok() { Outcome::Ok } else { Outcome::Fail };
                    let ending =
                        Ending { result: reply.outcome, outcome, observed, detail, code: None, answered_by: None };
                    self.books.end(&p, end, ending);
                }
                Ok(None) if wrong_server => {
                    return self.disconnected("the server is no longer the primary; reconnecting")
                }
                Ok(None) => return,
                // Garbled: nothing more on this stream can be trusted.
                Err(e) => return self.disconnected(&format!("garbled reply: {e}")),
            }
        }
    }

    /// Gives up on ops whose time has come. Ops in one lane are all sent or
    /// all waiting, so their give-up times rise along the queue.
    fn expire(&mut self, now: Instant) {
        for p in self.outstanding.iter_mut().filter(|p| !p.abandoned) {
            if self.books.give_up_at(p) > now {
                break;
            }
            self.books.give_up(p, now);
        }
    }

    /// When the oldest op still in play must be given up.
    #[inline]
    fn watchdog_at(&self) -> Option<Instant> {
        let p = self.outstanding.iter().find(|p| !p.abandoned)?;
        Some(self.books.give_up_at(p))
    }
}

pub async fn run(
    connection: PipelinedConnection,
    dialer: Dialer,
    mut ops: OpStream,
    mut settings: Settings,
    recorder: Recorder,
    history: Option<HistoryLog>,
    cancel: CancellationToken,
) -> LaneEnd {
    let published = settings.published.take();
    let mut lane = Lane {
        socket: None,
        outstanding: VecDeque::new(),
        books: Books::new(&settings, recorder, history, &ops),
        write_buf: Vec::with_capacity(16 * 1024),
        read_buf: vec![0; 64 * 1024],
        read_start: 0,
        read_end: 0,
        next_reconnect: Instant::now(),
    };
    lane.books.published = published;
    lane.connected(connection);
    let mut issuer =
        Issuer::new(settings.pacing, settings.active, settings.in_flight, settings.stop_at, settings.rounds);
    // One cancellation waiter and one timer for the lane's life, re-armed
    // each turn: a fresh one per turn cost a lock and a timer-wheel entry
    // per batch of replies.
    let cancelled = cancel.cancelled();
    tokio::pin!(cancelled);
    let wake = tokio::time::sleep_until(settings.stop_at);
    tokio::pin!(wake);

    loop {
        let now = Instant::now();
        // Cancellation is noticed in the wait below (checking the token
        // here too took a lock per turn).
        if issuer.done(now, lane.books.live) {
            break;
        }
        lane.books.report_completions(&mut ops);

        // Issue ops into free slots.
        while let Some(issue) = issuer.next(now, lane.books.live, &mut ops, &mut lane.books.recorder) {
            lane.issue(issue, now);
        }
        let exhausted = issuer.exhausted();
        // The shape has no more ops and nothing is in flight: done now, not
        // when the window ends.
        if exhausted && lane.books.live == 0 {
            break;
        }

        // Send what was encoded.
        if let (Some(s), false) = (&mut lane.socket, lane.write_buf.is_empty()) {
            let sent = s.stream.write_all(&lane.write_buf).await;
            lane.write_buf.clear();
            if let Err(e) = sent {
                lane.disconnected(&format!("sending failed: {e}"));
            }
        }
        // The server is busy with what was sent: the time to make the next ops.
        if !exhausted {
            ops.prepare(settings.in_flight as usize);
        }

        // Wait for replies, a deadline, the next due op or a reconnect.
        let reconnect_at = lane.socket.is_none().then_some(lane.next_reconnect);
        // Waking at the stop time ends a lane that has nothing in flight then.
        let stop_at = (now < settings.stop_at).then_some(settings.stop_at);
        let wake_at = [lane.watchdog_at(), issuer.wake_at(lane.books.live, now), reconnect_at, stop_at]
            .into_iter()
            .flatten()
            .min();
        lane.compact();
        let read = async {
            match &mut lane.socket {
                Some(s) => s.stream.read(&mut lane.read_buf[lane.read_end..]).await,
                None => std::future::pending().await,
            }
        };
        if let Some(at) = wake_at.filter(|at| *at != wake.deadline()) {
            wake.as_mut().reset(at);
        }
        tokio::select! {
            biased;
            _ = &mut cancelled => break,
            _ = issuer.round_opened() => {}
            n = read => match n {
                Ok(n) if n > 0 => {
                    lane.read_end += n;
                    lane.take_replies(Instant::now());
                }
                Ok(_) => lane.disconnected("the server closed the connection"),
                Err(e) => lane.disconnected(&format!("reading failed: {e}")),
            },
            _ = &mut wake, if wake_at.is_some() => {
                let now = Instant::now();
                lane.expire(now);
                if lane.socket.is_none() && now >= lane.next_reconnect {
                    // Bounded, so a host that drops packets cannot hold up
                    // deadlines or Ctrl-C.
                    match dialer.dial(RECONNECT_TIMEOUT).await {
                        Ok(c) => lane.connected(c),
                        Err(_) => lane.next_reconnect = Instant::now() + RECONNECT_PAUSE,
                    }
                }
            }
        }
    }
    issuer.count_unsent(&mut lane.books.recorder, settings.measure_from, cancel.is_cancelled());
    lane.books.close(issuer.ran_out)
}
