//! The books every executor keeps on its ops, shared so the pipelined lane
//! and the request/response slots time out, classify and record an op the
//! same way: one place decides when an op is given up (its deadline, or the
//! hang watchdog), what its history outcome is, and what the recorder, the
//! history and a shape plugin that observes outcomes are told.

use std::sync::Arc;
use tokio::time::Instant;

use crate::metrics::{Completion, Recorder};
use crate::plan::CellTiming;
use faultline_check::history::{HistoryWriter, Observed, OpRecord, Outcome, Scope};
use faultline_kind::workload::{Op, OpStream};
use faultline_model::stats::ErrorClass;

use super::fanout::PublishLedger;
use super::rounds::RoundSeat;
use super::schedule::{Issue, Pacing};

/// How a lane runs, whatever its executor.
pub struct Settings {
    pub in_flight: u32,
    pub timing: CellTiming,
    pub cancel_at_deadline: bool,
    pub measure_from: Instant,
    pub stop_at: Instant,
    /// Open loop: the schedule this lane serves.
    pub pacing: Option<Pacing>,
    /// A closed loop in steps: when this lane runs (always, when empty).
    pub active: Vec<(Instant, Instant)>,
    /// Contention rounds with several clients: the lane's seat at the gate.
    pub rounds: Option<RoundSeat>,
    /// Fan-out: where the lane books its acknowledged messages.
    pub published: Option<PublishLedger>,
}

/// An op in play.
pub struct Pending {
    pub op: Op,
    /// When the client created it (for the history: not moved by pacing).
    pub began: Instant,
    /// Its request may have reached the server, so it may have taken effect.
    pub sent: bool,
    /// When it was issued (closed loop) or due (open loop): decides its window.
    pub issued: Instant,
    /// Latency counts from here.
    pub start: Instant,
    pub deadline: Instant,
    /// Given up at its deadline or by the watchdog; its reply is dropped.
    pub abandoned: bool,
}

impl Pending {
    #[inline]
    pub fn new(issue: Issue, now: Instant, sent: bool, timing: &CellTiming) -> Pending {
        let Issue { op, issued, start } = issue;
        Pending { op, began: now, sent, issued, start, deadline: now + timing.deadline, abandoned: false }
    }
}

/// Where a lane writes its history, when checkers need one.
pub struct HistoryLog {
    pub writer: HistoryWriter,
    /// The cell's clock: record times are nanoseconds since this.
    pub t0: Instant,
    pub scope: Scope,
    /// The members a record's `member` counts (`TargetDriver::members`).
    pub members: Arc<[String]>,
}

impl HistoryLog {
    /// The record's number for the member at `address` (0: unknown).
    fn member(&self, address: Option<&str>) -> u8 {
        let place = address.and_then(|a| self.members.iter().position(|m| m == a));
        place.map_or(0, |i| u8::try_from(i + 1).unwrap_or(0))
    }
}

/// How an op ended, as its executor saw it.
pub struct Ending<'a> {
    pub result: Result<(), ErrorClass>,
    /// For the history: whether a failed op may still have taken effect.
    pub outcome: Outcome,
    pub observed: Observed,
    /// A failure's own words (the server's message, why a connection broke).
    pub detail: &'a [u8],
    /// A driver's name for the failure (`NotWritablePrimary`), when it has one.
    pub code: Option<&'a str>,
    /// The member that answered (`host:port`), where the driver said so.
    pub answered_by: Option<&'a str>,
}

impl Ending<'_> {
    /// A failure no reply explains (a broken connection, a deadline): the op
    /// may have taken effect if its request was sent.
    pub fn failed(class: ErrorClass, sent: bool, detail: &[u8]) -> Ending<'_> {
        let outcome = if sent { Outcome::Unknown } else { Outcome::Fail };
        Ending { result: Err(class), outcome, observed: Observed::Nothing, detail, code: None, answered_by: None }
    }
}

/// The books of one lane.
pub struct Books {
    /// Ops in play and not given up: the slots in use.
    pub live: u32,
    pub timing: CellTiming,
    cancel_at_deadline: bool,
    pub recorder: Recorder,
    pub history: Option<HistoryLog>,
    /// Ops that ended and whether they succeeded, for a shape plugin that
    /// observes outcomes; handed over before the next op is drawn.
    completions: Option<Vec<(Op, bool)>>,
    /// Fan-out: the lane's acknowledged messages.
    pub published: Option<PublishLedger>,
}

impl Books {
    pub fn new(settings: &Settings, recorder: Recorder, history: Option<HistoryLog>, ops: &OpStream) -> Books {
        Books {
            live: 0,
            timing: settings.timing,
            cancel_at_deadline: settings.cancel_at_deadline,
            recorder,
            history,
            completions: ops.observes().then(Vec::new),
            published: None,
        }
    }

    /// Tells a shape plugin how the ops since the last call ended.
    pub fn report_completions(&mut self, ops: &mut OpStream) {
        if let Some(c) = &mut self.completions {
            c.drain(..).for_each(|(op, ok)| ops.completed(&op, ok));
        }
    }

    /// Records the end of an op that was still live.
    pub fn end(&mut self, p: &Pending, end: Instant, ending: Ending) {
        self.live -= 1;
        if let Some(h) = &mut self.history {
            let ns = |t: Instant| t.saturating_duration_since(h.t0).as_nanos() as u64;
            let outcome = if ending.result.is_ok() { Outcome::Ok } else { ending.outcome };
            h.writer.append(&OpRecord {
                start: ns(p.began),
                end: ns(end),
                key: p.op.key,
                kind: p.op.kind,
                outcome,
                written: p.op.write_id,
                written_len: p.op.value_len,
                member: h.member(ending.answered_by),
                observed: ending.observed,
            });
        }
        if let Some(c) = &mut self.completions {
            c.push((p.op.clone(), ending.result.is_ok()));
        }
        // A hang is counted as a hang only; over-deadline is for ops that
        // did end, late.
        let late = end > p.deadline + self.timing.over_deadline_after;
        self.recorder.record(&Completion {
            kind: p.op.kind,
            issued: p.issued,
            start: p.start,
            end,
            result: ending.result,
            over_deadline: late && ending.result != Err(ErrorClass::Hang),
            detail: ending.detail,
            code: ending.code,
            answered_by: ending.answered_by,
        });
    }

    /// When an op is given up: at its deadline if the client cancels there
    /// or it was never sent, else when the hang watchdog fires.
    pub fn give_up_at(&self, p: &Pending) -> Instant {
        if self.cancel_at_deadline || !p.sent {
            p.deadline
        } else {
            p.deadline + self.timing.hang_after
        }
    }

    /// Gives `p` up (its time has come, by `now`): a deadline when the client
    /// cancels there, or when it never reached a server that could hang it
    /// (it timed out like a driver's server selection); else a hang. It
    /// ends when it was due to be given up ([`Books::give_up_at`]), as the
    /// client gives it up: a watchdog that a busy machine ran late does not
    /// make a deadline error end late (and count as over-deadline), nor a
    /// hang longer.
    pub fn give_up(&mut self, p: &mut Pending, now: Instant) {
        p.abandoned = true;
        let class = if self.cancel_at_deadline || !p.sent { ErrorClass::Deadline } else { ErrorClass::Hang };
        let end = self.give_up_at(p).min(now);
        self.end(p, end, Ending::failed(class, p.sent, b""));
    }

    /// The lane's end: what it leaves for the cell.
    pub fn close(self, ran_out: Option<Instant>) -> LaneEnd {
        LaneEnd { recorder: self.recorder, history: self.history.map(|h| h.writer), ran_out, published: self.published }
    }
}

/// What a lane leaves when its load ends.
pub struct LaneEnd {
    pub recorder: Recorder,
    pub history: Option<HistoryWriter>,
    /// When the workload's shape ran out of ops for it, if it did.
    pub ran_out: Option<Instant>,
    /// Fan-out: the messages it published and had acknowledged.
    pub published: Option<PublishLedger>,
}
