//! Drives one connection: keeps up to `in_flight` ops outstanding on the
//! socket, batching requests into one write and replies out of one read, the
//! way redis-benchmark and memtier do, so the load generator stays cheap.
//!
//! Closed loop: a slot issues its next op as soon as the previous one ends.
//! Open loop ([`Pacing`]): ops are due on a fixed schedule whatever the target
//! does, and latency counts from when an op was due, so a stalled target is
//! charged for every op that had to wait (no coordinated omission).
//!
//! Deadlines and the hang watchdog: an op still unanswered at its deadline is
//! given up (when the spec says the client cancels at the deadline) or, when
//! it does not, counted as a hang `hang_after` later. Either way its slot is
//! freed; its reply, if it ever comes, is read and dropped. A broken
//! connection fails its outstanding ops; new ops then wait for a reconnect,
//! within their deadlines, as a driver's would.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::metrics::{Completion, ErrorClass, Recorder};
use crate::plan::CellTiming;
use crate::target::{Connection, TargetDriver, WireProtocol};
use crate::workload::{Op, OpStream, Workload};

/// tokio's timers tick in milliseconds; lateness up to one tick is the
/// timer's, not the target's, and is not charged to latency (it still shows
/// in the schedule lag).
pub const TIMER_SLACK: Duration = Duration::from_millis(1);

/// How long to wait between reconnect attempts.
const RECONNECT_PAUSE: Duration = Duration::from_millis(100);

/// The slice of an open loop's schedule one connection serves: ops
/// `first, first + stride, …` due at `t0 + i × period`.
pub struct Pacing {
    pub t0: Instant,
    pub period: Duration,
    pub first: u64,
    pub stride: u64,
}

impl Pacing {
    fn due(&self, i: u64) -> Instant {
        self.t0 + self.period.mul_f64(i as f64)
    }
}

/// Where a connection comes from again after it breaks.
pub struct Dialer {
    pub driver: Arc<dyn TargetDriver>,
    pub uri: String,
    pub workload: Arc<Workload>,
}

pub struct Settings {
    pub in_flight: u32,
    pub timing: CellTiming,
    pub cancel_at_deadline: bool,
    pub stop_at: Instant,
}

struct Pending {
    op: Op,
    /// When it was issued (closed loop) or due (open loop): decides its window.
    issued: Instant,
    /// Latency counts from here.
    start: Instant,
    deadline: Instant,
    /// Given up at its deadline or by the watchdog; its reply is dropped.
    abandoned: bool,
}

struct Socket {
    reader: OwnedReadHalf,
    writer: OwnedWriteHalf,
    protocol: Box<dyn WireProtocol>,
}

/// One connection's ops: those on the wire (or waiting for a reconnect) in
/// request order, which is also reply order.
struct Lane {
    socket: Option<Socket>,
    outstanding: VecDeque<Pending>,
    /// Outstanding ops not given up: the slots in use.
    live: u32,
    write_buf: Vec<u8>,
    read_buf: Vec<u8>,
    read_start: usize,
    read_end: usize,
    next_reconnect: Instant,
    timing: CellTiming,
}

impl Lane {
    fn connected(&mut self, c: Connection) {
        let (reader, writer) = c.stream.into_split();
        let mut protocol = c.protocol;
        // Ops issued while disconnected go out now; replies to ops given up
        // meanwhile will never come on the new socket, so they are forgotten.
        self.outstanding.retain(|p| !p.abandoned);
        self.write_buf.clear();
        for p in &self.outstanding {
            protocol.encode(&p.op, &mut self.write_buf);
        }
        self.socket = Some(Socket { reader, writer, protocol });
        (self.read_start, self.read_end) = (0, 0);
    }

    /// The connection broke: every op on it failed; reconnect after a pause.
    fn disconnected(&mut self, recorder: &mut Recorder) {
        self.socket = None;
        self.write_buf.clear();
        (self.read_start, self.read_end) = (0, 0);
        let now = Instant::now();
        for p in self.outstanding.drain(..).filter(|p| !p.abandoned) {
            self.live -= 1;
            recorder.record(&Completion {
                kind: p.op.kind,
                issued: p.issued,
                start: p.start,
                end: now,
                result: Err(ErrorClass::Connection),
                over_deadline: now > p.deadline + self.timing.over_deadline_after,
            });
        }
        self.next_reconnect = now + RECONNECT_PAUSE;
    }

    fn issue(&mut self, op: Op, issued: Instant, start: Instant, now: Instant) {
        if let Some(s) = &mut self.socket {
            s.protocol.encode(&op, &mut self.write_buf);
        }
        let deadline = now + self.timing.deadline;
        self.outstanding.push_back(Pending { op, issued, start, deadline, abandoned: false });
        self.live += 1;
    }

    /// Makes room at the end of the read buffer.
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

    /// Matches complete replies with the oldest outstanding ops.
    fn take_replies(&mut self, end: Instant, recorder: &mut Recorder) {
        loop {
            let s = self.socket.as_mut().expect("replies arrive only while connected");
            match s.protocol.decode(&self.read_buf[self.read_start..self.read_end]) {
                Ok(Some(reply)) => {
                    self.read_start += reply.len;
                    let Some(p) = self.outstanding.pop_front() else {
                        // A reply nobody asked for: the stream is out of step.
                        return self.disconnected(recorder);
                    };
                    if !p.abandoned {
                        self.live -= 1;
                        recorder.record(&Completion {
                            kind: p.op.kind,
                            issued: p.issued,
                            start: p.start,
                            end,
                            result: reply.outcome,
                            over_deadline: end > p.deadline + self.timing.over_deadline_after,
                        });
                    }
                }
                Ok(None) => return,
                // Garbled: nothing more on this stream can be trusted.
                Err(_) => return self.disconnected(recorder),
            }
        }
    }

    /// Gives up on ops past their deadline (or, without client cancellation,
    /// past the hang watchdog).
    fn expire(&mut self, cancel_at_deadline: bool, now: Instant, recorder: &mut Recorder) {
        let t = self.timing;
        for p in self.outstanding.iter_mut().filter(|p| !p.abandoned) {
            let give_up_at = if cancel_at_deadline { p.deadline } else { p.deadline + t.hang_after };
            if give_up_at > now {
                break;
            }
            p.abandoned = true;
            self.live -= 1;
            // A hang is counted as a hang only; over-deadline is for ops that
            // did end, late.
            recorder.record(&Completion {
                kind: p.op.kind,
                issued: p.issued,
                start: p.start,
                end: now,
                result: Err(if cancel_at_deadline { ErrorClass::Deadline } else { ErrorClass::Hang }),
                over_deadline: cancel_at_deadline && now > p.deadline + t.over_deadline_after,
            });
        }
    }

    /// When the oldest op still in play must be given up.
    fn watchdog_at(&self, cancel_at_deadline: bool) -> Option<Instant> {
        let p = self.outstanding.iter().find(|p| !p.abandoned)?;
        Some(if cancel_at_deadline { p.deadline } else { p.deadline + self.timing.hang_after })
    }
}

pub async fn run(
    connection: Connection,
    dialer: Dialer,
    mut ops: OpStream,
    settings: Settings,
    pacing: Option<Pacing>,
    mut recorder: Recorder,
    cancel: CancellationToken,
) -> Recorder {
    let mut lane = Lane {
        socket: None,
        outstanding: VecDeque::new(),
        live: 0,
        write_buf: Vec::with_capacity(16 * 1024),
        read_buf: vec![0; 64 * 1024],
        read_start: 0,
        read_end: 0,
        next_reconnect: Instant::now(),
        timing: settings.timing,
    };
    lane.connected(connection);
    let mut next_due = pacing.as_ref().map(|p| p.first);

    loop {
        let now = Instant::now();
        if cancel.is_cancelled() || (now >= settings.stop_at && lane.live == 0) {
            break;
        }

        // Issue ops into free slots.
        while lane.live < settings.in_flight && now < settings.stop_at {
            let (issued, start) = match (&pacing, next_due) {
                (Some(p), Some(i)) => {
                    let due = p.due(i);
                    if due > now || due >= settings.stop_at {
                        break;
                    }
                    recorder.record_lag(due, now);
                    next_due = Some(i + p.stride);
                    (due, now.min(due + TIMER_SLACK))
                }
                _ => (now, now),
            };
            lane.issue(ops.next_op(), issued, start, now);
        }

        // Send what was encoded.
        if let (Some(s), false) = (&mut lane.socket, lane.write_buf.is_empty()) {
            let sent = s.writer.write_all(&lane.write_buf).await;
            lane.write_buf.clear();
            if sent.is_err() {
                lane.disconnected(&mut recorder);
            }
        }

        // Wait for replies, a deadline, the next due op or a reconnect.
        let due_at = match (&pacing, next_due) {
            (Some(p), Some(i)) if lane.live < settings.in_flight => Some(p.due(i)).filter(|d| *d < settings.stop_at),
            _ => None,
        };
        let reconnect_at = lane.socket.is_none().then_some(lane.next_reconnect);
        // Waking at the stop time ends a lane that has nothing in flight then.
        let stop_at = (now < settings.stop_at).then_some(settings.stop_at);
        let wake_at =
            [lane.watchdog_at(settings.cancel_at_deadline), due_at, reconnect_at, stop_at].into_iter().flatten().min();
        lane.compact();
        let read = async {
            match &mut lane.socket {
                Some(s) => s.reader.read(&mut lane.read_buf[lane.read_end..]).await,
                None => std::future::pending().await,
            }
        };
        let wake = async {
            match wake_at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            _ = cancel.cancelled() => break,
            n = read => match n {
                Ok(n) if n > 0 => {
                    lane.read_end += n;
                    lane.take_replies(Instant::now(), &mut recorder);
                }
                _ => lane.disconnected(&mut recorder),
            },
            _ = wake => {
                let now = Instant::now();
                lane.expire(settings.cancel_at_deadline, now, &mut recorder);
                if lane.socket.is_none() && now >= lane.next_reconnect {
                    match dialer.driver.connect(&dialer.uri, Arc::clone(&dialer.workload)).await {
                        Ok(c) => lane.connected(c),
                        Err(_) => lane.next_reconnect = Instant::now() + RECONNECT_PAUSE,
                    }
                }
            }
        }
    }
    recorder
}
