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
//! within their deadlines, as a driver's would. So does a connection whose
//! server says it is the wrong one (a demoted primary's `READONLY`): it is
//! dropped, and the reconnect finds the current primary.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::history::{parse_value, HistoryWriter, Observed, OpRecord, Outcome, Scope};
use crate::metrics::{Completion, ErrorClass, Recorder};
use crate::plan::CellTiming;
use crate::target::{Connection, ReplyValue, TargetDriver, WireProtocol};
use crate::workload::{Op, OpStream, Workload};

/// tokio's timers tick in milliseconds and wake up to a tick late, so an
/// open loop wakes this much early and sends ops due within it: an op sent
/// early counts from when it was sent, one sent late from when it was due.
pub const EARLY_ISSUE: Duration = Duration::from_millis(2);

/// How long to wait between reconnect attempts.
const RECONNECT_PAUSE: Duration = Duration::from_millis(100);

/// How long one reconnect attempt may take.
const RECONNECT_TIMEOUT: Duration = Duration::from_millis(500);

/// The slice of an open loop's schedule one connection serves: ops
/// `first, first + stride, …` due at `t0 + i / rate`. Due times are computed
/// from the index, not by adding periods, so no rounding drifts and any
/// positive rate works, also one far beyond what the lane can send.
pub struct Pacing {
    pub t0: Instant,
    /// Ops per second over the whole schedule (all connections).
    pub rate: f64,
    pub first: u64,
    pub stride: u64,
}

impl Pacing {
    fn due(&self, i: u64) -> Instant {
        // Saturating float-to-int casts: an index past the end of time is due never.
        let ns = (i as f64 * 1e9 / self.rate) as u64;
        self.t0.checked_add(Duration::from_nanos(ns)).unwrap_or(self.t0 + FAR_FUTURE)
    }

    /// How many of this lane's ops from index `next` on are due in
    /// `[from, until)`: the ops it still owed when it stopped.
    fn due_between(&self, next: u64, from: Instant, until: Instant) -> u64 {
        // The first lane index at or after `t`: estimated, then walked to the
        // exact boundary `due` draws (a step or two at most).
        let first_at = |t: Instant| -> u64 {
            let secs = t.saturating_duration_since(self.t0).as_secs_f64();
            let estimate = (secs * self.rate) as u64;
            let mut k = estimate.saturating_sub(self.first).div_ceil(self.stride).saturating_sub(1);
            while self.due(self.first + k * self.stride) < t {
                k += 1;
            }
            while k > 0 && self.due(self.first + (k - 1) * self.stride) >= t {
                k -= 1;
            }
            k
        };
        let start = first_at(from).max(next.saturating_sub(self.first).div_ceil(self.stride));
        first_at(until).saturating_sub(start)
    }
}

/// Stands for "never" where an Instant would overflow.
const FAR_FUTURE: Duration = Duration::from_secs(100 * 365 * 86_400);

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
    pub measure_from: Instant,
    pub stop_at: Instant,
    /// Open loop: the schedule this connection serves.
    pub pacing: Option<Pacing>,
}

struct Pending {
    op: Op,
    /// When the client created it (for the history: not moved by pacing).
    began: Instant,
    /// Its request went onto a socket, so it may have taken effect.
    sent: bool,
    /// When it was issued (closed loop) or due (open loop): decides its window.
    issued: Instant,
    /// Latency counts from here.
    start: Instant,
    deadline: Instant,
    /// Given up at its deadline or by the watchdog; its reply is dropped.
    abandoned: bool,
}

/// Where a lane writes its history, when checkers need one.
pub struct HistoryLog {
    pub writer: HistoryWriter,
    /// The cell's clock: record times are nanoseconds since this.
    pub t0: Instant,
    pub scope: Scope,
}

impl HistoryLog {
    fn record(&mut self, p: &Pending, end: Instant, result: Result<(), ErrorClass>, observed: Observed) {
        let outcome = match result {
            Ok(()) => Outcome::Ok,
            // An error reply: the server refused it.
            Err(ErrorClass::Server) => Outcome::Fail,
            Err(_) if p.sent => Outcome::Unknown,
            Err(_) => Outcome::Fail,
        };
        let ns = |t: Instant| t.saturating_duration_since(self.t0).as_nanos() as u64;
        self.writer.append(&OpRecord {
            start: ns(p.began),
            end: ns(end),
            key: p.op.key,
            kind: p.op.kind,
            outcome,
            written: p.op.write_id,
            written_len: p.op.value_len,
            observed,
        });
    }
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
    history: Option<HistoryLog>,
    /// Ops that ended and whether they succeeded, for a shape plugin that
    /// observes outcomes; handed over before the next op is drawn.
    completions: Option<Vec<(Op, bool)>>,
}

impl Lane {
    fn connected(&mut self, c: Connection) {
        let (reader, writer) = c.stream.into_split();
        let mut protocol = c.protocol;
        // Ops issued while disconnected go out now; replies to ops given up
        // meanwhile will never come on the new socket, so they are forgotten.
        self.outstanding.retain(|p| !p.abandoned);
        self.write_buf.clear();
        for p in &mut self.outstanding {
            protocol.encode(&p.op, &mut self.write_buf);
            p.sent = true;
        }
        self.socket = Some(Socket { reader, writer, protocol });
        (self.read_start, self.read_end) = (0, 0);
    }

    /// The connection broke (`why`): every op on it failed; reconnect after a pause.
    fn disconnected(&mut self, recorder: &mut Recorder, why: &str) {
        self.socket = None;
        self.write_buf.clear();
        (self.read_start, self.read_end) = (0, 0);
        let now = Instant::now();
        for p in self.outstanding.drain(..).filter(|p| !p.abandoned) {
            self.live -= 1;
            if let Some(h) = &mut self.history {
                h.record(&p, now, Err(ErrorClass::Connection), Observed::Nothing);
            }
            if let Some(c) = &mut self.completions {
                c.push((p.op.clone(), false));
            }
            recorder.record(&Completion {
                kind: p.op.kind,
                issued: p.issued,
                start: p.start,
                end: now,
                result: Err(ErrorClass::Connection),
                over_deadline: now > p.deadline + self.timing.over_deadline_after,
                detail: why.as_bytes(),
            });
        }
        self.next_reconnect = now + RECONNECT_PAUSE;
    }

    fn issue(&mut self, op: Op, issued: Instant, start: Instant, now: Instant) {
        let sent = match &mut self.socket {
            Some(s) => {
                s.protocol.encode(&op, &mut self.write_buf);
                true
            }
            None => false,
        };
        let deadline = now + self.timing.deadline;
        self.outstanding.push_back(Pending { op, began: now, sent, issued, start, deadline, abandoned: false });
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

    /// Matches complete replies with the oldest outstanding ops. A reply that
    /// says the connection points at the wrong server counts as the server
    /// error it is; the replies already read are matched too, then the
    /// connection is dropped so the reconnect finds the current server.
    fn take_replies(&mut self, end: Instant, recorder: &mut Recorder) {
        let mut wrong_server = false;
        loop {
            let s = self.socket.as_mut().expect("replies arrive only while connected");
            match s.protocol.decode(&self.read_buf[self.read_start..self.read_end]) {
                Ok(Some(reply)) => {
                    self.read_start += reply.len;
                    wrong_server |= reply.wrong_server;
                    let Some(p) = self.outstanding.pop_front() else {
                        // A reply nobody asked for: the stream is out of step.
                        return self.disconnected(recorder, "a reply nobody asked for: the stream is out of step");
                    };
                    if !p.abandoned {
                        self.live -= 1;
                        if let Some(h) = &mut self.history {
                            let observed = match &reply.value {
                                ReplyValue::None => Observed::Nothing,
                                ReplyValue::Nil => Observed::Nil,
                                ReplyValue::Bytes(range) => {
                                    let start = self.read_start - reply.len;
                                    parse_value(&self.read_buf[start + range.start..start + range.end], h.scope)
                                }
                            };
                            h.record(&p, end, reply.outcome, observed);
                        }
                        if let Some(c) = &mut self.completions {
                            c.push((p.op.clone(), reply.outcome.is_ok()));
                        }
                        let start = self.read_start - reply.len;
                        let detail = match &reply.message {
                            Some(range) => &self.read_buf[start + range.start..start + range.end],
                            None => &[],
                        };
                        recorder.record(&Completion {
                            kind: p.op.kind,
                            issued: p.issued,
                            start: p.start,
                            end,
                            result: reply.outcome,
                            over_deadline: end > p.deadline + self.timing.over_deadline_after,
                            detail,
                        });
                    }
                }
                Ok(None) if wrong_server => {
                    return self.disconnected(recorder, "the server is no longer the primary; reconnecting")
                }
                Ok(None) => return,
                // Garbled: nothing more on this stream can be trusted.
                Err(e) => return self.disconnected(recorder, &format!("garbled reply: {e}")),
            }
        }
    }

    /// Gives up on ops past their deadline (or, without client cancellation,
    /// past the hang watchdog).
    fn expire(&mut self, cancel_at_deadline: bool, now: Instant, recorder: &mut Recorder) {
        let t = self.timing;
        for p in self.outstanding.iter_mut().filter(|p| !p.abandoned) {
            if give_up_at(p, cancel_at_deadline, &t) > now {
                break;
            }
            p.abandoned = true;
            self.live -= 1;
            // An op still waiting for a connection never reached a server that
            // could hang it: it timed out like a driver's server selection.
            let class = if cancel_at_deadline || !p.sent { ErrorClass::Deadline } else { ErrorClass::Hang };
            if let Some(h) = &mut self.history {
                h.record(p, now, Err(class), Observed::Nothing);
            }
            if let Some(c) = &mut self.completions {
                c.push((p.op.clone(), false));
            }
            // A hang is counted as a hang only; over-deadline is for ops that
            // did end, late.
            recorder.record(&Completion {
                kind: p.op.kind,
                issued: p.issued,
                start: p.start,
                end: now,
                result: Err(class),
                over_deadline: class == ErrorClass::Deadline && now > p.deadline + t.over_deadline_after,
                detail: b"",
            });
        }
    }

    /// When the oldest op still in play must be given up.
    fn watchdog_at(&self, cancel_at_deadline: bool) -> Option<Instant> {
        let p = self.outstanding.iter().find(|p| !p.abandoned)?;
        Some(give_up_at(p, cancel_at_deadline, &self.timing))
    }
}

/// When an op is given up: at its deadline if the client cancels there or
/// it was never sent, else when the hang watchdog fires. Ops in one lane are
/// all sent or all waiting, so these times rise along the queue.
fn give_up_at(p: &Pending, cancel_at_deadline: bool, t: &CellTiming) -> Instant {
    if cancel_at_deadline || !p.sent {
        p.deadline
    } else {
        p.deadline + t.hang_after
    }
}

pub async fn run(
    connection: Connection,
    dialer: Dialer,
    mut ops: OpStream,
    settings: Settings,
    mut recorder: Recorder,
    history: Option<HistoryLog>,
    cancel: CancellationToken,
) -> LaneEnd {
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
        history,
        completions: ops.observes().then(Vec::new),
    };
    lane.connected(connection);
    let pacing = &settings.pacing;
    let mut next_due = pacing.as_ref().map(|p| p.first);
    // When a shape plugin ran out of ops for this connection (or failed).
    let mut ran_out: Option<Instant> = None;

    loop {
        let now = Instant::now();
        let exhausted = ran_out.is_some();
        if cancel.is_cancelled() || ((now >= settings.stop_at || exhausted) && lane.live == 0) {
            break;
        }
        if let Some(c) = &mut lane.completions {
            c.drain(..).for_each(|(op, ok)| ops.completed(&op, ok));
        }

        // Issue ops into free slots.
        while lane.live < settings.in_flight && now < settings.stop_at && ran_out.is_none() {
            let due = match (pacing, next_due) {
                (Some(p), Some(i)) => {
                    let due = p.due(i);
                    if due > now + EARLY_ISSUE || due >= settings.stop_at {
                        break;
                    }
                    Some(due)
                }
                _ => None,
            };
            let Some(op) = ops.next_op() else {
                ran_out = Some(now);
                break;
            };
            match (due, pacing) {
                (Some(due), Some(p)) => {
                    recorder.record_lag(due, now.max(due));
                    next_due = next_due.map(|i| i + p.stride);
                    lane.issue(op, due, now.min(due), now);
                }
                _ => lane.issue(op, now, now, now),
            }
        }
        let exhausted = ran_out.is_some();
        // The shape has no more ops and nothing is in flight: done now, not
        // when the window ends.
        if exhausted && lane.live == 0 {
            break;
        }

        // Send what was encoded.
        if let (Some(s), false) = (&mut lane.socket, lane.write_buf.is_empty()) {
            let sent = s.writer.write_all(&lane.write_buf).await;
            lane.write_buf.clear();
            if let Err(e) = sent {
                lane.disconnected(&mut recorder, &format!("sending failed: {e}"));
            }
        }
        // The server is busy with what was sent: the time to make the next ops.
        if !exhausted {
            ops.prepare(settings.in_flight as usize);
        }

        // Wait for replies, a deadline, the next due op or a reconnect.
        let due_at = match (pacing, next_due) {
            (Some(p), Some(i)) if lane.live < settings.in_flight && !exhausted => {
                Some(p.due(i)).filter(|d| *d < settings.stop_at).map(|d| d.checked_sub(EARLY_ISSUE).unwrap_or(d))
            }
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
                Ok(_) => lane.disconnected(&mut recorder, "the server closed the connection"),
                Err(e) => lane.disconnected(&mut recorder, &format!("reading failed: {e}")),
            },
            _ = wake => {
                let now = Instant::now();
                lane.expire(settings.cancel_at_deadline, now, &mut recorder);
                if lane.socket.is_none() && now >= lane.next_reconnect {
                    // Bounded, so a host that drops packets cannot hold up
                    // deadlines or Ctrl-C.
                    let dial = dialer.driver.connect(&dialer.uri, Arc::clone(&dialer.workload));
                    match tokio::time::timeout(RECONNECT_TIMEOUT, dial).await {
                        Ok(Ok(c)) => lane.connected(c),
                        _ => lane.next_reconnect = Instant::now() + RECONNECT_PAUSE,
                    }
                }
            }
        }
    }
    // Every op due in the window was sent or is owed: count what is owed.
    if let (Some(p), Some(next)) = (pacing, next_due) {
        let until = if cancel.is_cancelled() { Instant::now().min(settings.stop_at) } else { settings.stop_at };
        recorder.record_unsent(p.due_between(next, settings.measure_from, until));
    }
    LaneEnd { recorder, history: lane.history.map(|h| h.writer), ran_out }
}

/// What a connection leaves when its load ends.
pub struct LaneEnd {
    pub recorder: Recorder,
    pub history: Option<HistoryWriter>,
    /// When the workload's shape ran out of ops for it, if it did.
    pub ran_out: Option<Instant>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lanes' counts of what they still owed add up to the schedule,
    /// exactly, at ordinary and absurd rates.
    #[test]
    fn owed_ops_add_up_to_the_schedule() {
        let t0 = Instant::now();
        for (rate, lanes) in [(1000.0, 3u64), (600_000.0, 2), (1e12, 2), (0.5, 4), (3.3, 1)] {
            let (from, until) = (t0 + Duration::from_millis(500), t0 + Duration::from_millis(2500));
            let lane = |first| Pacing { t0, rate, first, stride: lanes };
            let owed: u64 = (0..lanes).map(|l| lane(l).due_between(l, from, until)).sum();
            // Ops i with 0.5 s <= i / rate < 2.5 s.
            let expected = (2.5 * rate).ceil() as u64 - (0.5 * rate).ceil() as u64;
            assert!(owed.abs_diff(expected) <= lanes, "rate {rate}: {owed} vs {expected}");
            // A lane that sent up to some op owes only what comes after it.
            let sent_up_to = lane(0).due_between(0, t0, from);
            assert_eq!(lane(0).due_between(sent_up_to * lanes, from, until), lane(0).due_between(0, from, until));
            assert_eq!(lane(0).due_between(u64::MAX / 2, from, until), 0, "rate {rate}");
        }
    }
}
