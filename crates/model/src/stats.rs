//! A cell's measured statistics as results.json holds them: op counts,
//! error classes and labels, latency percentiles, the timeline, the open
//! loop's accounting, each fault's cost and the latency around it. The
//! recording that produces them (histograms, the hot path) is the engine's.

use serde::{Deserialize, Serialize};

/// Why an op failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// The client gave up at the deadline, or the server said it timed out.
    Deadline,
    /// No connection, or it broke while the op was outstanding.
    Connection,
    /// The server answered with an error.
    Server,
    /// Still running `hang_after` past its deadline: the watchdog abandoned it.
    Hang,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorCounts {
    pub deadline: u64,
    pub connection: u64,
    pub server: u64,
    pub hang: u64,
}

impl ErrorCounts {
    pub fn total(&self) -> u64 {
        self.deadline + self.connection + self.server + self.hang
    }

    pub fn add(&mut self, class: ErrorClass) {
        match class {
            ErrorClass::Deadline => self.deadline += 1,
            ErrorClass::Connection => self.connection += 1,
            ErrorClass::Server => self.server += 1,
            ErrorClass::Hang => self.hang += 1,
        }
    }

    pub fn merge(&mut self, o: &ErrorCounts) {
        self.deadline += o.deadline;
        self.connection += o.connection;
        self.server += o.server;
        self.hang += o.hang;
    }
}

/// Failures under one label: the error class, refined for server errors by
/// the server's own error code (`server LOADING`, `server READONLY`), with
/// the first few distinct messages as examples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorLabel {
    pub label: String,
    pub count: u64,
    pub examples: Vec<String>,
}

/// The status class a failure label counts under in gates: the HTTP status
/// (`server 503 ServiceUnavailable` is `503`), `timeout` for deadlines and
/// hangs, `network` for broken connections, `error` for a server error with
/// no status (another kind's).
pub fn status_class(label: &str) -> &str {
    let mut words = label.split(' ');
    match words.next() {
        Some("deadline") | Some("hang") => "timeout",
        Some("connection") => "network",
        Some("server") => match words.next() {
            Some(s) if s.len() == 3 && s.bytes().all(|b| b.is_ascii_digit()) => s,
            _ => "error",
        },
        _ => "error",
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellStats {
    /// Successful ops in the measured window.
    pub ok: u64,
    pub failed: u64,
    /// Successful ops per second.
    pub throughput: f64,
    pub errors: ErrorCounts,
    pub over_deadline: u64,
    pub per_op: indexmap::IndexMap<String, OpStats>,
    pub timeline: Vec<TimelinePoint>,
    /// The width of each timeline point, in seconds: 1, or 0.1 for windows
    /// of 5 s or less (results written before it have 1).
    #[serde(default = "one_second")]
    pub timeline_step_s: f64,
    /// Open loop only: how late ops started against the schedule.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub schedule_lag_ms: Option<LatencyStats>,
    /// Open loop only: the schedule against what was sent.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub open_loop: Option<OpenLoopStats>,
    /// Calls by status class (`200` the successes, then each failure's:
    /// `503`, `400`, `timeout`, `network`, `error`), largest first.
    #[serde(default)]
    pub status_classes: indexmap::IndexMap<String, u64>,
    /// Failures by label, most frequent first, with example messages.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub error_labels: Vec<ErrorLabel>,
    /// Cells with faults: what each fault cost.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub fault_impact: Vec<FaultImpact>,
    /// Cells with faults: latency before, during and after each fault.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub window_latency: Vec<WindowLatency>,
    /// Staged profiles: each stage's schedule (open loop) and latency.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub stages: Vec<StageStats>,
    /// How busy faultline itself was over the measured window.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub client_cpu: Option<ClientCpu>,
    /// Publish/subscribe fan-out (a workload with `fanout`): what the
    /// subscribers received of what was published.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub fanout: Option<FanoutStats>,
    /// A run on agents: each agent's share of the cell, beside the merged
    /// figures above (which are their sums), so a slow agent shows.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub agents: Vec<AgentShare>,
    /// A run on agents: the successes they claim held against the
    /// server's own counters, where the target kind can read them.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub served: Option<ServedCheck>,
    /// How busy the host was over the window, and with whose work.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub host: Option<HostLoad>,
}

/// The agents' claimed successes against the target's own count of the
/// calls it served over the cell (its warm-up, probes and other clients
/// included, so the server may count more, never fewer): forged or replayed
/// measurements of ops the server never executed show as `violated`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServedCheck {
    /// Where the server's count comes from, e.g. `INFO commandstats`.
    pub source: String,
    /// Per op kind: what the agents claimed and what the server counted.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub ops: Vec<ServedOp>,
    pub outcome: ServedOutcome,
    /// Why the check was violated or could not be made.
    #[serde(skip_serializing_if = "String::is_empty", default)]
    pub why: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServedOp {
    pub op: String,
    /// Successes the agents' shares claim over the measured window.
    pub claimed: u64,
    /// Calls the server counted from before the agents started to after
    /// their last share arrived.
    pub served: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServedOutcome {
    /// The server counted at least what the agents claim, for every op kind.
    Held,
    /// The agents claim successes the server never counted: the run FAILs.
    Violated,
    /// The counters could be read before the cell but not after it (a
    /// server that stopped answering): the run is INCOMPLETE, never a PASS.
    Unreadable,
    /// The counters cannot be compared (the server restarted or another
    /// one became primary, so they began again): shown, decides nothing.
    Unverified,
}

/// How busy the host was over a cell's measured window, from the kernel's
/// own counts (/proc/stat and each process's CPU): whose CPU it was, so a
/// number measured while something else took the cores is known as such.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostLoad {
    /// The cores faultline may run on (its CPU affinity; all of the host's
    /// unless a cpuset or `taskset` narrows it): the ones watched.
    pub host_cores: usize,
    /// Of them, cores busy in all, on average over the window.
    pub busy_cores: f64,
    /// Of those, faultline's (its agents on this host included) and the
    /// target's (its processes, or its containers' here), at most all.
    pub ours_cores: f64,
    /// The rest: other processes (a noisy neighbour, another CI job).
    pub others_cores: f64,
    /// Taken by the hypervisor from this virtual machine (steal time).
    pub steal_cores: f64,
    /// Runnable threads, on average over the window (procs_running).
    pub run_queue: f64,
}

/// One agent's share of a cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentShare {
    pub agent: String,
    /// The lanes (connections) it ran.
    pub lanes: u32,
    pub ok: u64,
    pub failed: u64,
    /// Its successes per second of the cell's window.
    pub throughput: f64,
    /// Open loop: ops of its share of the schedule it never sent.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub unsent: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub client_cpu: Option<ClientCpu>,
    /// How far its clock may be from the coordinator's for this cell (half
    /// the round trip of the reading its start was placed with): its ops'
    /// times in the history are widened by this much on both sides.
    #[serde(default)]
    pub clock_uncertainty_us: f64,
}

/// The load generator's own CPU over a cell's measured window, read from
/// the kernel's per-thread run times: what tells a target's limit from
/// faultline's (a capacity search stops at the second, and says so).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientCpu {
    /// CPU seconds per second of all of faultline's threads together.
    pub cores: f64,
    /// The cores this host has.
    pub host_cores: usize,
    /// The busiest thread (a load thread, or a worker of the main runtime)
    /// and its share of one core, 0 to 1.
    pub busiest_thread: String,
    pub busiest_share: f64,
}

impl ClientCpu {
    /// A share of a core, or of the host, above which the load generator
    /// counts as the limit: the kernel's accounting and the window's edges
    /// keep a busy thread a little under 1.
    pub const SATURATED: f64 = 0.9;

    /// Whether the load generator was the limit: one of its threads (a load
    /// thread runs its lanes on one core) or the host's every core busy.
    pub fn saturated(&self) -> bool {
        self.busiest_share >= Self::SATURATED || self.cores >= Self::SATURATED * self.host_cores as f64
    }
}

/// What a fan-out cell's subscribers received of the messages published in
/// its measured window. A message counts as published when its PUBLISH was
/// acknowledged and it was issued in the window; each subscriber of its
/// channel should receive it once. Every count is exact: the subscribers
/// keep each publisher's sequence numbers per channel.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FanoutStats {
    pub channels: u32,
    pub subscribers: u32,
    /// Messages published in the window (PUBLISH acknowledged).
    pub published: u64,
    /// Deliveries owed: each message times the subscribers of its channel.
    pub expected: u64,
    /// Deliveries made: distinct messages each subscriber received, summed
    /// (`expected - drops`).
    pub delivered: u64,
    /// `delivered` per second of the measured window.
    pub delivered_per_s: f64,
    /// Deliveries owed and never received, up to the end of the drain.
    pub drops: u64,
    /// Messages a subscriber received again (a sequence number it had).
    pub duplicates: u64,
    /// Messages a subscriber received after a later one of the same
    /// publisher on the same channel.
    pub reordered: u64,
    /// The subscribers PUBLISH said it reached, summed over the window's
    /// messages: below `expected` while a subscriber was disconnected.
    pub receivers: u64,
    /// Times a subscriber's connection broke and it subscribed again.
    pub reconnects: u64,
    /// How long the subscribers read after the last publish was answered
    /// (the drain), in milliseconds.
    pub drain_ms: f64,
    /// Whether every subscriber had every publisher's last message by the
    /// end of the drain (else the drain ran out: in flight counts as dropped).
    pub drained: bool,
    /// From PUBLISH to receipt, of the window's messages received
    /// (duplicates not counted).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub latency_ms: Option<LatencyStats>,
    /// Each subscriber, in order.
    pub per_subscriber: Vec<SubscriberStats>,
}

/// One subscriber's books: what was published on its channels in the
/// window, and what of it arrived.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SubscriberStats {
    pub subscriber: u32,
    /// The channels it subscribed to, by number.
    pub channels: Vec<u32>,
    /// Messages published on its channels in the window.
    pub published: u64,
    /// Of those, the distinct ones it received.
    pub received: u64,
    /// `published - received`.
    pub drops: u64,
    pub duplicates: u64,
    pub reordered: u64,
    pub reconnects: u64,
    /// The workload paused its reading (`fanout.pause`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
}

/// One stage of a staged profile: an open loop's share of the schedule and
/// what was sent of it, or a closed loop's step; and the latency of its
/// ops. An op belongs to the stage it was due in (issued in, in a closed
/// loop), as it belongs to the window.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StageStats {
    pub name: String,
    /// Seconds into the measured window.
    pub from_s: f64,
    pub to_s: f64,
    /// Open loop: the rate the stage asked, ops per second: its
    /// schedule's ops over its length (the mean of a ramp).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_rate: Option<f64>,
    /// A ramp: the rate it asks at its start and at its end (none for a
    /// hold, whose `target_rate` is both).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ramp: Option<(f64, f64)>,
    /// Closed loop: the clients the step runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clients: Option<u32>,
    /// Ops the schedule had due in the stage: `sent + unsent` (a closed
    /// loop has no schedule: what it sent).
    pub due: u64,
    pub sent: u64,
    pub unsent: u64,
    /// Of the ops due in the stage, those sent (`sent`), per second of the
    /// stage.
    pub achieved_rate: f64,
    /// Ops sent while the stage ran, whenever they were due: what the
    /// target was asked to serve then. A client behind its schedule sends
    /// an earlier stage's ops in this one, so a saturated stage can have
    /// sent little of its own schedule (`achieved_rate`) at full speed.
    #[serde(default)]
    pub sent_during: u64,
    #[serde(default)]
    pub sent_during_rate: f64,
    /// Open loop: ops due by the stage's end (in it or before) that were
    /// not sent by then, the backlog the next stage inherits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behind_at_end: Option<u64>,
    /// Of the ops due in the stage, those that succeeded and those that
    /// failed.
    pub ok: u64,
    pub failed: u64,
    /// Latency of the stage's successful ops per op kind; `null` when none
    /// of that kind succeeded.
    pub per_op: indexmap::IndexMap<String, Option<LatencyStats>>,
}

/// An open loop's accounting: every op due in the measured window was sent
/// (and then succeeded or failed) or is counted as unsent — due, but no free
/// slot came before the window ended (k6's dropped iterations).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OpenLoopStats {
    /// The rate the profile asked for, ops per second; with stages, the
    /// mean rate the stages asked over the window.
    pub rate: f64,
    /// The share of the schedule that must be sent for the cell to count
    /// as measured (the profile's `min_sent`).
    pub min_sent: f64,
    /// Ops the schedule had due in the measured window.
    pub due: u64,
    pub sent: u64,
    pub unsent: u64,
    /// Of `unsent`, those a lane owed when it first looked past the
    /// window's end late, with slots free: faultline's lateness (its thread
    /// was not run in time), not a target that kept the slots busy.
    #[serde(default)]
    pub unsent_late: u64,
    /// Ops sent per second of the window.
    pub achieved_rate: f64,
}

impl OpenLoopStats {
    /// The share of the schedule that was sent (1 when nothing was due).
    pub fn sent_fraction(&self) -> f64 {
        if self.due == 0 {
            1.0
        } else {
            self.sent as f64 / self.due as f64
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpStats {
    pub ok: u64,
    pub failed: u64,
    pub errors: ErrorCounts,
    pub over_deadline: u64,
    pub throughput: f64,
    /// Latency of successful ops; absent when none succeeded.
    pub latency_ms: Option<LatencyStats>,
    /// Longest op of any outcome, failures included.
    pub max_any_ms: f64,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct LatencyStats {
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    pub mean: f64,
}

/// serde's default for `timeline_step_s`.
pub fn one_second() -> f64 {
    1.0
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TimelinePoint {
    /// Seconds since the measured window began, at the point's start.
    pub t: f64,
    pub ok: u64,
    pub failed: u64,
    pub mean_ms: f64,
    /// The second's 99th percentile of successes, at most 25% high (its log
    /// bucket's upper edge); none when nothing succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ms: Option<f64>,
    pub max_ms: f64,
    /// Open loop: the rate the schedule asked over the point, ops per
    /// second (its due ops over its width), beside the achieved `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_rate: Option<f64>,
}

/// One fault's cost, times in seconds after the fault was requested.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FaultImpact {
    pub fault: String,
    /// Ops that ended between this fault and the next (the last fault: until
    /// the cell's last op ended, also after the window).
    pub ops: u64,
    pub failed: u64,
    /// Longest op, failures included.
    pub max_latency_ms: f64,
    /// Until the last failed op ended; absent when nothing failed, and when
    /// the target had not recovered (see `not_recovered`).
    pub denied_window_s: Option<f64>,
    /// Not recovered: until the last failed op the cell saw, a lower bound.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub denied_at_least_s: Option<f64>,
    /// Ops failed after the fault and none succeeded after the last failure,
    /// up to the end of the cell: the denied window is unbounded.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub not_recovered: bool,
    /// The first success after the last failure (after the fault, if none failed).
    pub first_success_s: Option<f64>,
    /// Successful ops per second in the 10 s before the fault.
    pub throughput_before: f64,
    /// When a 1 s stretch first reached 90% of that again, after the denied window.
    pub recovered_s: Option<f64>,
    /// The same, per op kind (`get`, `set`, …): each kind's own failures,
    /// denied window and first success. Empty inside a kind's own entry.
    #[serde(default, skip_serializing_if = "indexmap::IndexMap::is_empty")]
    pub per_op: indexmap::IndexMap<String, FaultImpact>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// From the start of the measured window to the fault's request.
    Before,
    /// From the request to the heal (to the end, for a fault never healed).
    During,
    /// From the heal (the request, for a fault never healed) to the end.
    After,
}

impl Side {
    pub const ALL: [Side; 3] = [Side::Before, Side::During, Side::After];

    pub fn from_name(name: &str) -> Option<Side> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Side::Before => "before",
            Side::During => "during",
            Side::After => "after",
        }
    }
}

/// Latency of the successful ops that ended in one window around a fault.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WindowLatency {
    pub fault: String,
    pub window: Side,
    pub from_s: f64,
    pub to_s: f64,
    /// Per op kind; `null` when none of that kind succeeded in the window.
    pub per_op: indexmap::IndexMap<String, Option<LatencyStats>>,
}
