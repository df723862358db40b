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
use crate::metrics::Recorder;
use faultline_check::history::{parse_value, Observed, Outcome};
use faultline_kind::workload::{OpStream, Workload};
use faultline_kind::{Connection, PipelinedConnection, ReplyValue, Stream, TargetDriver, WireProtocol};
use faultline_model::stats::ErrorClass;

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

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::atomic::{AtomicU64, Ordering};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::engine::test_lane::OneLane;
    use faultline_kind::workload::Op;
    use faultline_kind::{Reply, ServerInfo};
    use faultline_model::ops::OpKind;
    use faultline_model::stats::CellStats;

    /// A server of one-byte requests (`G`), each answered `+`, or `-` (a
    /// server error) every `fail_every`th; from its `hangs_from`th it reads
    /// and never answers; at its `closes_at`th it drops the connection.
    /// It counts over every connection.
    struct Server {
        served: AtomicU64,
        fail_every: u64,
        hangs_from: u64,
        closes_at: u64,
    }

    impl Server {
        fn new(fail_every: u64, hangs_from: u64, closes_at: u64) -> Arc<Server> {
            Arc::new(Server { served: AtomicU64::new(0), fail_every, hangs_from, closes_at })
        }

        /// A new connection to it, served by a task of its own.
        fn connect(self: &Arc<Server>) -> Stream {
            let (client, mut end) = tokio::io::duplex(64 * 1024);
            let server = Arc::clone(self);
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                loop {
                    let n = match end.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    let mut out = Vec::with_capacity(n);
                    for _ in 0..n {
                        let i = server.served.fetch_add(1, Ordering::SeqCst);
                        if i == server.closes_at {
                            let _ = end.write_all(&out).await;
                            return;
                        }
                        if i < server.hangs_from {
                            out.push(if (i + 1).is_multiple_of(server.fail_every) { b'-' } else { b'+' });
                        }
                    }
                    if end.write_all(&out).await.is_err() {
                        return;
                    }
                }
            });
            Stream::Wrapped(Box::new(client))
        }
    }

    struct OneByte;

    impl WireProtocol for OneByte {
        fn encode(&mut self, _op: &Op, out: &mut Vec<u8>) {
            out.push(b'G');
        }
        fn decode(&mut self, input: &[u8]) -> Result<Option<Reply>, String> {
            let Some(&byte) = input.first() else { return Ok(None) };
            let outcome = match byte {
                b'+' => Ok(()),
                b'-' => Err(ErrorClass::Server),
                other => return Err(format!("no reply starts with byte {other}")),
            };
            Ok(Some(Reply { len: 1, outcome, value: ReplyValue::None, message: None, wrong_server: false }))
        }
    }

    /// A kind whose every connection is a new one to the fake server.
    struct OneByteKind(Arc<Server>);

    crate::test_kind::kind_info_for_tests!(OneByteKind, command: "true", supports: |op| op == OpKind::Get);

    #[async_trait::async_trait]
    impl TargetDriver for OneByteKind {
        fn listen_args(&self, _: u16, _: &Path) -> Vec<String> {
            Vec::new()
        }
        fn uri(&self, host: &str, port: u16) -> String {
            format!("onebyte://{host}:{port}")
        }
        async fn ready(&self, _: &str) -> anyhow::Result<ServerInfo> {
            Ok(ServerInfo { version: "onebyte".into() })
        }
        async fn connect(&self, _: &str, _: Arc<Workload>) -> anyhow::Result<Connection> {
            Ok(Connection::Pipelined(PipelinedConnection { stream: self.0.connect(), protocol: Box::new(OneByte) }))
        }
        async fn read_values(&self, _: &str, keys: &[Vec<u8>]) -> anyhow::Result<Vec<Option<Vec<u8>>>> {
            Ok(vec![None; keys.len()])
        }
    }

    /// One pipelined lane of an open loop at `rate` over `window` ms with
    /// `in_flight` outstanding and a 40 ms deadline: the cell's stats.
    async fn one_lane(server: &Arc<Server>, rate: f64, window: u64, in_flight: u32) -> CellStats {
        let lane = OneLane::new(rate, window, in_flight);
        let driver = Arc::new(OneByteKind(Arc::clone(server)));
        let dialer = Dialer { driver, uri: "onebyte://fake".into(), workload: Arc::clone(&lane.workload) };
        let connection = dialer.dial(Duration::from_secs(1)).await.unwrap();
        lane.run(|ops, settings, recorder| {
            run(connection, dialer, ops, settings, recorder, None, CancellationToken::new())
        })
        .await
    }

    #[tokio::test]
    async fn every_op_due_is_sent_or_unsent_and_every_op_sent_ends_once() {
        let server = Server::new(5, u64::MAX, u64::MAX);
        let stats = one_lane(&server, 2000.0, 300, 16).await;
        let open = stats.open_loop.expect("an open loop");
        assert_eq!(open.due, open.sent + open.unsent, "{open:?}");
        assert_eq!(stats.ok + stats.failed, open.sent, "{stats:?}");
        // 2,000/s over 300 ms: 600 ops due (the first at the window's start).
        assert!(open.due.abs_diff(600) <= 1, "{open:?}");
        // Each failure is the server's refusal or, on a starved machine, a deadline.
        assert_eq!(stats.errors.server + stats.errors.deadline, stats.failed, "{:?}", stats.errors);
        let refused = server.served.load(Ordering::SeqCst) / 5;
        assert!(stats.errors.server > 0 && stats.errors.server <= refused, "{:?} of {refused}", stats.errors);
    }

    /// A server that stops answering: the outstanding ops are given up at
    /// their deadlines, their slots freed, and what no slot could take
    /// stays owed, unsent.
    #[tokio::test]
    async fn a_server_that_stops_answering_leaves_every_op_accounted_for() {
        let stats = one_lane(&Server::new(u64::MAX, 50, u64::MAX), 1000.0, 300, 4).await;
        let open = stats.open_loop.expect("an open loop");
        assert_eq!(open.due, open.sent + open.unsent, "{open:?}");
        assert_eq!(stats.ok + stats.failed, open.sent, "{stats:?}");
        assert!(stats.ok > 0 && stats.ok <= 50, "the server answered its first 50 requests: {stats:?}");
        assert!(stats.errors.deadline > 0 && stats.errors.deadline == stats.failed, "{:?}", stats.errors);
        assert!(open.unsent > 100, "{open:?}");
    }

    /// A connection that breaks fails the ops outstanding on it, and the
    /// lane dials again and goes on: nothing sent is counted twice or lost.
    #[tokio::test]
    async fn a_broken_connection_fails_its_outstanding_ops_and_the_lane_reconnects() {
        let stats = one_lane(&Server::new(u64::MAX, u64::MAX, 100), 1000.0, 400, 8).await;
        let open = stats.open_loop.expect("an open loop");
        assert_eq!(open.due, open.sent + open.unsent, "{open:?}");
        assert_eq!(stats.ok + stats.failed, open.sent, "{stats:?}");
        assert!(stats.errors.connection > 0, "{:?}", stats.errors);
        assert!(stats.ok > 100, "answered again after the reconnect: {stats:?}");
    }
}
