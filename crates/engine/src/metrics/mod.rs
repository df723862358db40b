//! Per-client recording (HDR histograms, error classes, a timeline of
//! 1 s or 100 ms buckets) and the merged, summarized statistics of a cell.
//!
//! Each client task owns its [`Recorder`], so the hot path takes no lock; the
//! cell merges them when the load stops.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::spec::StageSpan;
use faultline_model::ops::OpKind;

pub mod client_cpu;
pub mod fault_impact;
mod recent;
pub mod windows;
mod wire;
use fault_impact::{bucket_of, Bucket, FineTimelines};
use faultline_model::roles;
use faultline_model::stats::{FaultImpact, WindowLatency};
use recent::{absorb_at, entry_at, Absorb, Recent};
use windows::{FaultSpan, WindowSamples};

/// Latencies are recorded in microseconds, up to an hour, 3 significant digits.
const HIST_MAX_US: u64 = 3_600_000_000;

pub(crate) fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_MAX_US, 3).expect("static histogram bounds")
}

use faultline_model::stats::{
    status_class, CellStats, ErrorClass, ErrorCounts, ErrorLabel, LatencyStats, OpStats, OpenLoopStats, StageStats,
    TimelinePoint,
};

/// What the progress display reads while a cell runs. `ok` and `failed`
/// count exactly what the cell's result will count (ops of the measured
/// window), so the live numbers never disagree with the final ones; warm-up
/// ops only feed the rate.
#[derive(Debug, Default)]
pub struct LiveCounters {
    pub ok: AtomicU64,
    pub failed: AtomicU64,
    pub warmup: AtomicU64,
}

impl LiveCounters {
    /// (ok, failed) in the measured window, and warm-up ops.
    pub fn snapshot(&self) -> (u64, u64, u64) {
        (self.ok.load(Ordering::Relaxed), self.failed.load(Ordering::Relaxed), self.warmup.load(Ordering::Relaxed))
    }
}

/// Adds one to a live counter. Each client's counters have one writer, its
/// recorder, so a plain load and store suffice: no locked instruction per op.
fn bump(counter: &AtomicU64) {
    counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

/// One completed op as the executor saw it.
pub struct Completion<'a> {
    pub kind: OpKind,
    /// Which window the op belongs to: when it was issued in a closed loop,
    /// when it was due in an open loop.
    pub issued: Instant,
    /// Where latency counts from: its actual start in a closed loop, its
    /// scheduled start in an open loop (so stalls are not hidden).
    pub start: Instant,
    pub end: Instant,
    pub result: Result<(), ErrorClass>,
    /// Finished more than `over_deadline_after` past its deadline.
    pub over_deadline: bool,
    /// A failure's own words: the server's error reply, or why the
    /// connection broke; empty when there are none.
    pub detail: &'a [u8],
    /// A driver's name for the failure (`NotWritablePrimary`), counted as
    /// its own label; without one, a Redis-style error code is read off the
    /// detail.
    pub code: Option<&'a str>,
    /// The member that answered (`host:port`), where the driver said so:
    /// only in cells that judge reads against the role timeline.
    pub answered_by: Option<&'a str>,
}

/// How many distinct messages each error label keeps as examples.
const EXAMPLES_PER_LABEL: usize = 3;
/// Longest example message kept, in bytes.
const EXAMPLE_MAX_LEN: usize = 200;

/// Calls by status class: the successes as `200`, each failure by its label's class.
fn status_classes(ok: u64, labels: &[ErrorLabel]) -> indexmap::IndexMap<String, u64> {
    let mut classes: indexmap::IndexMap<String, u64> = indexmap::IndexMap::new();
    if ok > 0 {
        classes.insert("200".into(), ok);
    }
    for l in labels {
        *classes.entry(status_class(&l.label).to_string()).or_default() += l.count;
    }
    classes.sort_by(|a, x, b, y| y.cmp(x).then_with(|| a.cmp(b)));
    classes
}

/// The label a failure is counted under: its class, refined by the
/// driver's name for it or, failing that, a Redis-style error code.
fn error_label<'a>(class: ErrorClass, detail: &'a [u8], code: Option<&'a str>) -> (&'static str, &'a [u8]) {
    let name = match class {
        ErrorClass::Deadline => "deadline",
        ErrorClass::Connection => "connection",
        ErrorClass::Hang => "hang",
        ErrorClass::Server => "server",
    };
    if let Some(code) = code.filter(|c| !c.is_empty() && c.len() <= 64) {
        return (name, code.as_bytes());
    }
    if class != ErrorClass::Server {
        return (name, &[]);
    }
    // Redis-style errors start with an upper-case code.
    let code = detail.split(|b| *b == b' ').next().unwrap_or_default();
    let is_code = !code.is_empty() && code.len() <= 40 && code.iter().all(|b| b.is_ascii_uppercase() || *b == b'_');
    (name, if is_code { code } else { &[] })
}

fn example_text(class: ErrorClass, detail: &[u8]) -> std::borrow::Cow<'_, str> {
    if detail.is_empty() {
        return match class {
            ErrorClass::Deadline => "no reply by the op's deadline",
            ErrorClass::Connection => "the connection broke",
            ErrorClass::Hang => "still running past the hang watchdog",
            ErrorClass::Server => "an error reply",
        }
        .into();
    }
    match String::from_utf8_lossy(&detail[..detail.len().min(EXAMPLE_MAX_LEN)]) {
        std::borrow::Cow::Borrowed(text) => text.trim().into(),
        std::borrow::Cow::Owned(text) => text.trim().to_string().into(),
    }
}

/// Most labels a cell keeps apart; a server with more error codes has the
/// rest counted under its class alone.
const MAX_LABELS: usize = 32;

fn count_label(labels: &mut Vec<ErrorLabel>, class: ErrorClass, detail: &[u8], code: Option<&str>) {
    let (name, mut code) = error_label(class, detail, code);
    let matches = |l: &ErrorLabel, code: &[u8]| {
        let have = l.label.as_bytes();
        match code.is_empty() {
            true => have == name.as_bytes(),
            false => {
                have.len() == name.len() + 1 + code.len()
                    && have.starts_with(name.as_bytes())
                    && have[name.len()] == b' '
                    && have.ends_with(code)
            }
        }
    };
    let mut found = labels.iter().position(|l| matches(l, code));
    if found.is_none() && labels.len() >= MAX_LABELS {
        code = &[];
        found = labels.iter().position(|l| matches(l, code));
    }
    let index = match found {
        Some(i) => i,
        None => {
            let label = match code.is_empty() {
                true => name.to_string(),
                false => format!("{name} {}", String::from_utf8_lossy(code)),
            };
            labels.push(ErrorLabel { label, count: 0, examples: Vec::new() });
            labels.len() - 1
        }
    };
    let entry = &mut labels[index];
    entry.count += 1;
    if entry.examples.len() < EXAMPLES_PER_LABEL {
        // Compared before it is copied: a storm of one error allocates nothing.
        let text = example_text(class, detail);
        if !entry.examples.iter().any(|e| *e == text) {
            entry.examples.push(text.into_owned());
        }
    }
}

fn merge_labels(mine: &mut Vec<ErrorLabel>, theirs: Vec<ErrorLabel>) {
    for t in theirs {
        match mine.iter_mut().find(|m| m.label == t.label) {
            Some(m) => {
                m.count += t.count;
                for e in t.examples {
                    if m.examples.len() < EXAMPLES_PER_LABEL && !m.examples.contains(&e) {
                        m.examples.push(e);
                    }
                }
            }
            None => mine.push(t),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Second {
    ok: u64,
    failed: u64,
    max_us: u64,
    sum_ok_us: u64,
    /// The second's successes by latency, for its percentiles.
    latency: SecondLatency,
}

impl Second {
    fn record(&mut self, us: u64, ok: bool) {
        self.max_us = self.max_us.max(us);
        if ok {
            self.ok += 1;
            self.sum_ok_us += us;
            self.latency.record(us);
        } else {
            self.failed += 1;
        }
    }
}

impl Absorb for Second {
    fn absorb(&mut self, o: &Second) {
        self.ok += o.ok;
        self.failed += o.failed;
        self.max_us = self.max_us.max(o.max_us);
        self.sum_ok_us += o.sum_ok_us;
        self.latency.absorb(&o.latency);
    }
}

/// How many seconds of its timelines a recorder keeps before handing the
/// older ones to the cell's: its own ops end in time order, give or take
/// the few that ended while it was busy, so two seconds catch nearly every
/// late one (and the rare later one goes to the cell's timeline directly).
const KEEP_SECONDS: usize = 2;

/// How wide a cell's timeline buckets are: a second, or a tenth of one for
/// windows of 5 s or less (every `--quick` run), whose charts would
/// otherwise hold a point or two per line.
pub fn timeline_step(window: Duration) -> Duration {
    match window <= Duration::from_secs(5) {
        true => Duration::from_millis(100),
        false => Duration::from_secs(1),
    }
}

/// A cell's timelines, shared by its clients' recorders (see [`recent`]),
/// and the width of their buckets.
pub struct SharedTimelines {
    step_us: u64,
    timelines: Mutex<Timelines>,
}

impl Default for SharedTimelines {
    fn default() -> Self {
        SharedTimelines::new(Duration::from_secs(1))
    }
}

#[derive(Default)]
struct Timelines {
    seconds: Vec<Second>,
    fine: FineTimelines,
}

impl SharedTimelines {
    pub fn new(step: Duration) -> Self {
        SharedTimelines { step_us: (step.as_micros() as u64).max(1), timelines: Mutex::default() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Timelines> {
        // A recorder that panicked mid-hand-over left sums, not broken invariants.
        self.timelines.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Sub-buckets per power of two of a second's latency histogram: a bucket
/// spans at most a factor of 1.25, so a percentile read off it (its upper
/// edge) is at most 25% high — enough for a chart, at 416 bytes a second
/// instead of an HDR histogram's kilobytes (the cell's own percentiles stay
/// exact HDR ones).
const SUB_BUCKETS: u32 = 4;
/// 1 µs to 2^26 µs (67 s): past every deadline and hang watchdog.
const SECOND_BUCKETS: usize = 26 * SUB_BUCKETS as usize;

/// A second's successes counted in log buckets, allocated on first use.
#[derive(Debug, Clone, Default)]
struct SecondLatency(Option<Box<[u32; SECOND_BUCKETS]>>);

/// As a list of counts (serde's arrays stop at 32 entries).
impl Serialize for SecondLatency {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.as_ref().map(|counts| &counts[..]).serialize(s)
    }
}

impl<'de> Deserialize<'de> for SecondLatency {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let counts = Option::<Vec<u32>>::deserialize(d)?;
        let boxed = counts.map(|c| {
            let n = c.len();
            <Box<[u32; SECOND_BUCKETS]>>::try_from(c.into_boxed_slice())
                .map_err(|_| serde::de::Error::invalid_length(n, &"one count per latency bucket"))
        });
        Ok(SecondLatency(boxed.transpose()?))
    }
}

impl SecondLatency {
    /// The bucket of `us`: its power of two, and the next two bits.
    fn bucket(us: u64) -> usize {
        let us = us.max(1);
        let octave = 63 - us.leading_zeros();
        let sub = if octave >= 2 { (us >> (octave - 2)) & 0b11 } else { (us << (2 - octave)) & 0b11 };
        ((octave * SUB_BUCKETS) as usize + sub as usize).min(SECOND_BUCKETS - 1)
    }

    /// The upper edge of bucket `i`, in µs.
    fn upper_us(i: usize) -> f64 {
        let (octave, sub) = (i as u32 / SUB_BUCKETS, i as u32 % SUB_BUCKETS);
        2f64.powi(octave as i32) * (1.0 + (sub + 1) as f64 / SUB_BUCKETS as f64)
    }

    fn record(&mut self, us: u64) {
        let counts = self.0.get_or_insert_with(|| Box::new([0; SECOND_BUCKETS]));
        counts[Self::bucket(us)] = counts[Self::bucket(us)].saturating_add(1);
    }

    fn absorb(&mut self, o: &SecondLatency) {
        if let Some(theirs) = &o.0 {
            let mine = self.0.get_or_insert_with(|| Box::new([0; SECOND_BUCKETS]));
            for (m, t) in mine.iter_mut().zip(theirs.iter()) {
                *m = m.saturating_add(*t);
            }
        }
    }

    /// The `q`-quantile (0–1) in ms, as its bucket's upper edge; None with no success.
    fn quantile_ms(&self, q: f64) -> Option<f64> {
        let counts = self.0.as_ref()?;
        let total: u64 = counts.iter().map(|c| u64::from(*c)).sum();
        if total == 0 {
            return None;
        }
        let rank = ((total as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0u64;
        let i = counts.iter().position(|c| {
            seen += u64::from(*c);
            seen >= rank
        })?;
        Some(Self::upper_us(i) / 1e3)
    }
}

#[derive(Serialize, Deserialize)]
struct KindRecorder {
    #[serde(with = "wire::histogram")]
    latency: Histogram<u64>,
    ok: u64,
    errors: ErrorCounts,
    over_deadline: u64,
    max_any_us: u64,
}

impl KindRecorder {
    fn new() -> Self {
        KindRecorder {
            latency: new_histogram(),
            ok: 0,
            errors: ErrorCounts::default(),
            over_deadline: 0,
            max_any_us: 0,
        }
    }
}

/// Records one client's ops. Ops that start before `measure_from` are warm-up
/// and only feed the live counters.
pub struct Recorder {
    kinds: Vec<Option<KindRecorder>>,
    /// The last seconds of the timeline (buckets of `step_us`); the earlier
    /// ones are in `shared`.
    timeline: Recent<Second>,
    step_us: u64,
    /// How many `step_us` buckets make the seconds a recorder keeps
    /// (worked out once: a division per op showed in the instruction counts).
    keep_buckets: usize,
    /// The timeline bucket the last op ended in, and where it starts (µs
    /// into the window): ops end in about time order, so most fall in it
    /// without a 64-bit division, which costs more cycles than the rest of
    /// the bucket's bookkeeping.
    last_slot: (usize, u64),
    schedule_lag: Option<Histogram<u64>>,
    /// Cells with faults: the 10 ms timeline of each op kind their impact is
    /// measured on (its last seconds; the earlier ones are in `shared`).
    fine: Option<Vec<Option<Recent<Bucket>>>>,
    shared: Arc<SharedTimelines>,
    /// Cells with faults, when a gate asks for latency before/during/after
    /// one: every success (12 bytes an op).
    windows: Option<WindowSamples>,
    labels: Vec<ErrorLabel>,
    /// Open loop: ops due in the window that were never sent, and of them
    /// those owed for the client's own lateness at the window's end.
    unsent: u64,
    unsent_late: u64,
    /// Staged open loop: each stage's books.
    stages: Option<StageBooks>,
    measure_from: Instant,
    live: Arc<LiveCounters>,
}

/// A staged open loop's books, stage by stage: an op counts in the stage
/// it was due in, as it counts in the window it was due in.
struct StageBooks {
    /// Each stage's start and end.
    bounds: Vec<(Instant, Instant)>,
    tallies: Vec<StageTally>,
}

impl StageBooks {
    fn at(&mut self, due: Instant) -> Option<&mut StageTally> {
        let i = self.bounds.partition_point(|(_, end)| *end <= due);
        let (start, _) = *self.bounds.get(i)?;
        match start <= due {
            true => self.tallies.get_mut(i),
            false => None,
        }
    }
}

/// One stage's ops: sent and owed, and per op kind the latency of its
/// successes (a histogram made on the kind's first success in the stage).
#[derive(Default, Serialize, Deserialize)]
struct StageTally {
    #[serde(with = "wire::histograms")]
    latency: Vec<Option<Histogram<u64>>>,
    ok: u64,
    failed: u64,
    /// Of the ops due in the stage, those sent (whenever) and those never sent.
    sent: u64,
    unsent: u64,
    /// Ops sent while the stage ran, whenever they were due: behind its
    /// schedule a client is still sending an earlier stage's ops.
    sent_during: u64,
}

impl StageTally {
    fn record(&mut self, kind: OpKind, us: u64, ok: bool) {
        if !ok {
            self.failed += 1;
            return;
        }
        self.ok += 1;
        if self.latency.is_empty() {
            self.latency = (0..OpKind::ALL.len()).map(|_| None).collect();
        }
        self.latency[kind.index()].get_or_insert_with(new_histogram).saturating_record(us);
    }

    fn merge(&mut self, o: StageTally) {
        (self.ok, self.failed) = (self.ok + o.ok, self.failed + o.failed);
        (self.sent, self.unsent) = (self.sent + o.sent, self.unsent + o.unsent);
        self.sent_during += o.sent_during;
        if self.latency.is_empty() {
            self.latency = (0..OpKind::ALL.len()).map(|_| None).collect();
        }
        for (mine, theirs) in self.latency.iter_mut().zip(o.latency) {
            if let Some(h) = theirs {
                mine.get_or_insert_with(new_histogram).add(&h).expect("same histogram bounds");
            }
        }
    }
}

impl Recorder {
    pub fn new(
        kinds: impl Iterator<Item = OpKind>,
        measure_from: Instant,
        live: Arc<LiveCounters>,
        shared: Arc<SharedTimelines>,
        open_loop: bool,
        with_faults: bool,
        keep_windows: bool,
    ) -> Self {
        let mut slots: Vec<Option<KindRecorder>> = (0..OpKind::ALL.len()).map(|_| None).collect();
        for k in kinds {
            slots[k.index()] = Some(KindRecorder::new());
        }
        let fine = with_faults.then(|| slots.iter().map(|k| k.as_ref().map(|_| Recent::default())).collect());
        Recorder {
            kinds: slots,
            timeline: Recent::default(),
            step_us: shared.step_us,
            keep_buckets: (KEEP_SECONDS as u64 * 1_000_000 / shared.step_us).max(1) as usize,
            last_slot: (0, 0),
            schedule_lag: open_loop.then(new_histogram),
            fine,
            shared,
            windows: keep_windows.then(WindowSamples::default),
            labels: Vec::new(),
            unsent: 0,
            unsent_late: 0,
            stages: None,
            measure_from,
            live,
        }
    }

    /// A staged open loop: keeps books per stage, each from its start to
    /// its end.
    pub fn with_stages(mut self, bounds: Vec<(Instant, Instant)>) -> Self {
        let tallies = bounds.iter().map(|_| StageTally::default()).collect();
        self.stages = (!bounds.is_empty()).then_some(StageBooks { bounds, tallies });
        self
    }

    /// Each stage's start and end (none without stages).
    pub fn stage_bounds(&self) -> Vec<(Instant, Instant)> {
        self.stages.as_ref().map(|s| s.bounds.clone()).unwrap_or_default()
    }

    pub fn record(&mut self, c: &Completion) {
        if c.issued < self.measure_from {
            bump(&self.live.warmup);
            return;
        }
        match c.result {
            Ok(()) => bump(&self.live.ok),
            Err(class) => {
                count_label(&mut self.labels, class, c.detail, c.code);
                bump(&self.live.failed)
            }
        };
        let us = (c.end - c.start).as_micros().clamp(1, HIST_MAX_US as u128) as u64;
        let since_window = c.end.saturating_duration_since(self.measure_from);
        let end_us = since_window.as_micros() as u64;
        let slot = self.slot_of(end_us);
        let kind = self.kinds[c.kind.index()].as_mut().expect("op kind declared by the workload");
        kind.max_any_us = kind.max_any_us.max(us);
        if c.over_deadline {
            kind.over_deadline += 1;
        }
        let ok = c.result.is_ok();
        if let (Some(w), true) = (&mut self.windows, ok) {
            w.record(end_us, us, c.kind, c.answered_by);
        }
        match c.result {
            Ok(()) => {
                kind.ok += 1;
                kind.latency.saturating_record(us);
            }
            Err(class) => kind.errors.add(class),
        }
        if let Some(stage) = self.stages.as_mut().and_then(|s| s.at(c.issued)) {
            stage.record(c.kind, us, ok);
        }
        let keep = self.keep_buckets;
        if slot >= self.timeline.base() + 2 * keep {
            self.hand_over(slot + 1 - keep);
        }
        // An op that ended before what this recorder still keeps goes
        // straight to the cell's timelines.
        match self.timeline.entry(slot) {
            Some(s) => s.record(us, ok),
            None => entry_at(&mut self.shared.lock().seconds, slot).record(us, ok),
        }
        if let Some(fine) = &mut self.fine {
            let i = bucket_of(end_us);
            let recent = fine[c.kind.index()].as_mut().expect("op kind declared by the workload");
            match recent.entry(i) {
                Some(b) => b.record(end_us, us, ok),
                None => entry_at(self.shared.lock().fine.of(c.kind), i).record(end_us, us, ok),
            }
        }
    }

    /// The timeline bucket of an op that ended `end_us` into the window.
    #[inline]
    fn slot_of(&mut self, end_us: u64) -> usize {
        let (slot, start) = self.last_slot;
        // Wraps for an op that ended before the last bucket: worked out too.
        if end_us.wrapping_sub(start) < self.step_us {
            return slot;
        }
        let slot = end_us / self.step_us;
        self.last_slot = (slot as usize, slot * self.step_us);
        slot as usize
    }

    /// Hands the timelines' entries before bucket `keep_from` to the cell's.
    fn hand_over(&mut self, keep_from: usize) {
        let mut shared = self.shared.lock();
        let shared = &mut *shared;
        self.timeline.hand_over(&mut shared.seconds, keep_from);
        if let Some(fine) = &mut self.fine {
            for (kind, recent) in OpKind::ALL.into_iter().zip(fine.iter_mut()) {
                if let Some(recent) = recent {
                    recent.hand_over(shared.fine.of(kind), bucket_of(keep_from as u64 * self.step_us));
                }
            }
        }
    }

    /// Open loop: ops of the measured window's schedule (of one stage of
    /// it) this client never sent (no free slot before the window ended);
    /// `late`: owed because the client looked at the end late, with free
    /// slots.
    pub fn record_unsent(&mut self, stage: Option<usize>, n: u64, late: bool) {
        self.unsent += n;
        if late {
            self.unsent_late += n;
        }
        if let (Some(i), Some(books)) = (stage, &mut self.stages) {
            books.tallies[i].unsent += n;
        }
    }

    /// Open loop: how late an op started against its schedule.
    pub fn record_lag(&mut self, scheduled: Instant, started: Instant) {
        if scheduled < self.measure_from {
            return;
        }
        if let Some(books) = &mut self.stages {
            if let Some(stage) = books.at(scheduled) {
                stage.sent += 1;
            }
            if let Some(stage) = books.at(started) {
                stage.sent_during += 1;
            }
        }
        if let Some(h) = &mut self.schedule_lag {
            h.saturating_record((started - scheduled).as_micros().clamp(1, HIST_MAX_US as u128) as u64);
        }
    }
}

/// All clients of a cell merged: in one process, or an agent's share of
/// the cell on its way to the coordinator (serde, see `wire`).
#[derive(Serialize, Deserialize)]
pub struct CellMetrics {
    kinds: Vec<Option<KindRecorder>>,
    timeline: Vec<Second>,
    step_us: u64,
    #[serde(with = "wire::optional_histogram")]
    schedule_lag: Option<Histogram<u64>>,
    fine: Option<FineTimelines>,
    windows: Option<WindowSamples>,
    labels: Vec<ErrorLabel>,
    unsent: u64,
    unsent_late: u64,
    stages: Vec<StageTally>,
}

/// An open loop as its stats are summarized: the profile, its schedule on
/// the clock of the cell's start, and where the measured window lies on it.
pub struct OpenLoad<'a> {
    pub spec: &'a crate::spec::OpenSpec,
    pub arrivals: &'a crate::spec::arrivals::Arrivals,
    /// The warm-up's length: where the window starts on the schedule's clock.
    pub window_start_s: f64,
}

impl OpenLoad<'_> {
    /// The rate the schedule asks over `[from, to)` seconds of the window:
    /// its ops due there over the span.
    fn rate_over(&self, from: f64, to: f64) -> f64 {
        let (a, b) = (self.window_start_s + from, self.window_start_s + to);
        match b > a {
            true => (self.arrivals.count(b) - self.arrivals.count(a)) / (b - a),
            false => 0.0,
        }
    }

    /// The rates asked at the start and the end of `[from, to)` seconds of
    /// the window, when they differ (a ramp); None for a hold.
    fn ramp_over(&self, from: f64, to: f64) -> Option<(f64, f64)> {
        let (a, b) = (self.window_start_s + from, self.window_start_s + to);
        let edge = ((b - a) * 1e-6).max(1e-9);
        let (start, end) = (self.arrivals.rate_at(a + edge), self.arrivals.rate_at(b - edge));
        ((end - start).abs() > 0.5).then_some((start, end))
    }
}

impl CellMetrics {
    pub fn new() -> Self {
        CellMetrics {
            kinds: (0..OpKind::ALL.len()).map(|_| None).collect(),
            timeline: Vec::new(),
            step_us: 1_000_000,
            schedule_lag: None,
            fine: None,
            windows: None,
            labels: Vec::new(),
            unsent: 0,
            unsent_late: 0,
            stages: Vec::new(),
        }
    }

    pub fn merge(&mut self, r: Recorder) {
        self.merge_kinds(r.kinds);
        r.timeline.absorb_into(&mut self.timeline);
        self.step_us = r.step_us;
        if let Some(fine) = &r.fine {
            let mine = self.fine.get_or_insert_with(FineTimelines::default);
            for (kind, recent) in OpKind::ALL.into_iter().zip(fine) {
                if let Some(recent) = recent {
                    recent.absorb_into(mine.of(kind));
                }
            }
        }
        if let Some(w) = r.windows {
            self.windows.get_or_insert_with(WindowSamples::default).merge(w);
        }
        if let Some(lag) = r.schedule_lag {
            self.schedule_lag.get_or_insert_with(new_histogram).add(&lag).expect("same histogram bounds");
        }
        merge_labels(&mut self.labels, r.labels);
        self.unsent += r.unsent;
        self.unsent_late += r.unsent_late;
        for (i, tally) in r.stages.into_iter().flat_map(|s| s.tallies).enumerate() {
            if self.stages.len() <= i {
                self.stages.push(StageTally::default());
            }
            self.stages[i].merge(tally);
        }
    }

    fn merge_kinds(&mut self, kinds: Vec<Option<KindRecorder>>) {
        for (slot, theirs) in self.kinds.iter_mut().zip(kinds) {
            let Some(theirs) = theirs else { continue };
            let mine = slot.get_or_insert_with(KindRecorder::new);
            mine.latency.add(&theirs.latency).expect("same histogram bounds");
            mine.ok += theirs.ok;
            mine.errors.merge(&theirs.errors);
            mine.over_deadline += theirs.over_deadline;
            mine.max_any_us = mine.max_any_us.max(theirs.max_any_us);
        }
    }

    /// Takes in another process's metrics of the same cell (an agent's
    /// share, already merged there with its timelines): the sums, maxima
    /// and histograms are what one process recording every lane would hold.
    pub fn absorb(&mut self, o: CellMetrics) {
        self.merge_kinds(o.kinds);
        absorb_at(&mut self.timeline, 0, &o.timeline);
        self.step_us = o.step_us;
        if let Some(fine) = o.fine {
            let mine = self.fine.get_or_insert_with(FineTimelines::default);
            for (kind, timeline) in OpKind::ALL.into_iter().zip(fine.kinds) {
                if let Some(t) = timeline {
                    absorb_at(mine.of(kind), 0, &t.buckets);
                }
            }
        }
        if let Some(w) = o.windows {
            self.windows.get_or_insert_with(WindowSamples::default).merge(w);
        }
        if let Some(lag) = o.schedule_lag {
            self.schedule_lag.get_or_insert_with(new_histogram).add(&lag).expect("same histogram bounds");
        }
        merge_labels(&mut self.labels, o.labels);
        self.unsent += o.unsent;
        self.unsent_late += o.unsent_late;
        for (i, tally) in o.stages.into_iter().enumerate() {
            if self.stages.len() <= i {
                self.stages.push(StageTally::default());
            }
            self.stages[i].merge(tally);
        }
    }

    /// Open loop: ops of the window's schedule never sent.
    pub fn unsent(&self) -> u64 {
        self.unsent
    }

    /// Successes and failures of the measured window, over every op kind.
    pub fn counts(&self) -> (u64, u64) {
        self.kinds.iter().flatten().fold((0, 0), |(ok, failed), k| (ok + k.ok, failed + k.errors.total()))
    }

    /// Successes of the measured window per op kind, in [`OpKind::ALL`]'s order.
    pub fn ok_by_kind(&self) -> impl Iterator<Item = u64> + '_ {
        self.kinds.iter().map(|k| k.as_ref().map_or(0, |k| k.ok))
    }

    /// Takes in what the cell's recorders handed over of their timelines.
    pub fn absorb_timelines(&mut self, shared: &SharedTimelines) {
        self.step_us = shared.step_us;
        let shared = shared.lock();
        absorb_at(&mut self.timeline, 0, &shared.seconds);
        for (kind, timeline) in OpKind::ALL.into_iter().zip(&shared.fine.kinds) {
            if let Some(t) = timeline.as_ref().filter(|t| !t.buckets.is_empty()) {
                absorb_at(self.fine.get_or_insert_with(FineTimelines::default).of(kind), 0, &t.buckets);
            }
        }
    }

    /// Each fault's cost, given when (seconds into the window) it was requested.
    pub fn fault_impacts(&self, faults: &[(String, f64)], window: Duration) -> Vec<FaultImpact> {
        self.fine.as_ref().map(|f| f.impacts(faults, window.as_secs_f64())).unwrap_or_default()
    }

    /// Latency before, during and after each fault.
    pub fn window_latency(&self, faults: &[FaultSpan], window: Duration) -> Vec<WindowLatency> {
        let kinds: Vec<OpKind> = OpKind::ALL.into_iter().filter(|k| self.kinds[k.index()].is_some()).collect();
        self.windows.as_ref().map(|w| w.latencies(faults, &kinds, window.as_secs_f64())).unwrap_or_default()
    }

    /// The cell's reads (`get`) judged against the sampled role `changes`
    /// (the last sample taken at `last_sample_s`), under a read concern that
    /// does (or does not) require the primary; a read's address is named by
    /// the member the sampler found at it (`addresses`: address, member).
    /// None when the cell kept no per-op samples to judge.
    pub fn non_primary_reads(
        &self,
        read_concern: &str,
        requires_primary: bool,
        (changes, last_sample_s, addresses): (&[roles::RoleChange], f64, &[(String, String)]),
        window: Duration,
    ) -> Option<roles::NonPrimaryReads> {
        let windows = match (requires_primary, &self.windows) {
            (true, None) => return None,
            (_, windows) => windows.as_ref(),
        };
        let member = |address: &str| addresses.iter().find(|(a, _)| a == address).map(|(_, m)| m.as_str());
        let reads = windows.into_iter().flat_map(|w| w.reads(OpKind::Get)).map(|r| roles::Read {
            start_s: r.start_s,
            end_s: r.end_s,
            answered_s: r.answered_s,
            latency_ms: r.latency_ms,
            member: r.answered_by.and_then(member),
        });
        Some(roles::judge_reads(read_concern, requires_primary, reads, changes, last_sample_s, window.as_secs_f64()))
    }

    /// Summarizes over the measured window; an open loop's sent ops are
    /// accounted against its schedule.
    /// `stages`: a staged profile's, where they lie in the window.
    pub fn summarize(&self, window: Duration, open: Option<&OpenLoad>, stages: &[StageSpan]) -> CellStats {
        let secs = window.as_secs_f64().max(1e-9);
        let mut per_op = indexmap::IndexMap::new();
        let mut errors = ErrorCounts::default();
        let (mut ok, mut over_deadline) = (0, 0);
        for kind in OpKind::ALL {
            let Some(k) = &self.kinds[kind.index()] else {
                continue;
            };
            errors.merge(&k.errors);
            ok += k.ok;
            over_deadline += k.over_deadline;
            per_op.insert(
                kind.as_str().to_string(),
                OpStats {
                    ok: k.ok,
                    failed: k.errors.total(),
                    errors: k.errors,
                    over_deadline: k.over_deadline,
                    throughput: k.ok as f64 / secs,
                    latency_ms: latency_stats(&k.latency),
                    max_any_ms: k.max_any_us as f64 / 1e3,
                },
            );
        }
        // Ops that started inside the window but finished after it count in
        // its last bucket, so no partial bucket trails the timeline.
        let step = self.step_us as f64 / 1e6;
        let buckets = ((window.as_secs_f64() / step - 1e-9).ceil() as usize).max(1);
        let mut folded = self.timeline.clone();
        // An open loop shows what it asked in every bucket, also those
        // where nothing ended.
        if open.is_some() && folded.len() < buckets {
            folded.resize(buckets, Second::default());
        }
        if folded.len() > buckets {
            let tail: Vec<Second> = folded.split_off(buckets);
            let last = &mut folded[buckets - 1];
            for s in &tail {
                last.absorb(s);
            }
        }
        let timeline = folded
            .iter()
            .enumerate()
            .map(|(i, s)| TimelinePoint {
                t: (i as f64 * step * 1e3).round() / 1e3,
                ok: s.ok,
                failed: s.failed,
                mean_ms: if s.ok > 0 { s.sum_ok_us as f64 / s.ok as f64 / 1e3 } else { 0.0 },
                p99_ms: s.latency.quantile_ms(0.99),
                max_ms: s.max_us as f64 / 1e3,
                target_rate: open.map(|o| {
                    let from = i as f64 * step;
                    o.rate_over(from, (from + step).min(window.as_secs_f64()))
                }),
            })
            .collect();
        CellStats {
            ok,
            failed: errors.total(),
            throughput: ok as f64 / secs,
            errors,
            over_deadline,
            per_op,
            timeline,
            timeline_step_s: step,
            schedule_lag_ms: self.schedule_lag.as_ref().and_then(latency_stats),
            open_loop: open.map(|o| {
                let sent = self.schedule_lag.as_ref().map_or(0, |h| h.len());
                OpenLoopStats {
                    rate: o.spec.rate.unwrap_or_else(|| o.rate_over(0.0, window.as_secs_f64())),
                    min_sent: o.spec.min_sent,
                    due: sent + self.unsent,
                    sent,
                    unsent: self.unsent,
                    unsent_late: self.unsent_late,
                    achieved_rate: sent as f64 / secs,
                }
            }),
            status_classes: status_classes(ok, &self.labels),
            error_labels: {
                let mut labels = self.labels.clone();
                labels.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.label.cmp(&b.label)));
                labels
            },
            fault_impact: Vec::new(),
            fanout: None,
            agents: Vec::new(),
            served: None,
            host: None,
            window_latency: Vec::new(),
            stages: self.stage_stats(open, stages, window),
            client_cpu: None,
        }
    }

    /// Each stage's schedule, what was sent of it and its latency; a stage
    /// an interrupted window cut counts up to the cut. A closed loop sends
    /// what it issued and owes nothing.
    fn stage_stats(&self, open: Option<&OpenLoad>, stages: &[StageSpan], window: Duration) -> Vec<StageStats> {
        let kinds: Vec<OpKind> = OpKind::ALL.into_iter().filter(|k| self.kinds[k.index()].is_some()).collect();
        let empty = StageTally::default();
        // Open loop: ops due by a stage's end and not yet sent by it.
        let (mut due_by_end, mut sent_by_end) = (0u64, 0u64);
        stages
            .iter()
            .enumerate()
            .map(|(i, span)| {
                let tally = self.stages.get(i).unwrap_or(&empty);
                let ran_s = (span.to_s.min(window.as_secs_f64()) - span.from_s).max(0.0);
                let per_op = kinds
                    .iter()
                    .map(|k| {
                        let h = tally.latency.get(k.index()).and_then(Option::as_ref);
                        (k.as_str().to_string(), h.and_then(latency_stats))
                    })
                    .collect();
                let (sent, sent_during) = match open {
                    Some(_) => (tally.sent, tally.sent_during),
                    None => (tally.ok + tally.failed, tally.ok + tally.failed),
                };
                due_by_end += sent + tally.unsent;
                sent_by_end += sent_during;
                StageStats {
                    name: span.name.clone(),
                    from_s: span.from_s,
                    to_s: span.to_s,
                    target_rate: open.map(|o| o.rate_over(span.from_s, span.to_s)),
                    ramp: open.and_then(|o| o.ramp_over(span.from_s, span.to_s)),
                    clients: span.clients,
                    due: sent + tally.unsent,
                    sent,
                    unsent: tally.unsent,
                    achieved_rate: if ran_s > 0.0 { sent as f64 / ran_s } else { 0.0 },
                    sent_during,
                    sent_during_rate: if ran_s > 0.0 { sent_during as f64 / ran_s } else { 0.0 },
                    behind_at_end: open.map(|_| due_by_end.saturating_sub(sent_by_end)),
                    ok: tally.ok,
                    failed: tally.failed,
                    per_op,
                }
            })
            .collect()
    }
}

/// A histogram's percentiles in ms; none when it is empty.
pub fn latency_stats(h: &Histogram<u64>) -> Option<LatencyStats> {
    if h.is_empty() {
        return None;
    }
    let ms = |us: u64| us as f64 / 1e3;
    Some(LatencyStats {
        p50: ms(h.value_at_quantile(0.50)),
        p95: ms(h.value_at_quantile(0.95)),
        p99: ms(h.value_at_quantile(0.99)),
        p999: ms(h.value_at_quantile(0.999)),
        max: ms(h.max()),
        mean: h.mean() / 1e3,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_reckons_with_the_histograms_real_size() {
        let bytes = (new_histogram().distinct_values() * std::mem::size_of::<u64>()) as u64;
        assert_eq!(faultline_spec::memory::HISTOGRAM_BYTES, bytes);
    }

    #[test]
    fn an_ops_timeline_bucket_is_its_end_over_the_step_in_any_order() {
        let shared = Arc::new(SharedTimelines::new(Duration::from_millis(100)));
        let live = Arc::new(LiveCounters::default());
        let mut r = Recorder::new([OpKind::Get].into_iter(), Instant::now(), live, shared, false, false, false);
        for end_us in [0, 99_999, 100_000, 100_001, 350_000, 99_999, 2_000_000, 1_999_999, 2_100_000, 0, 250_000] {
            assert_eq!(r.slot_of(end_us), (end_us / 100_000) as usize, "{end_us}");
        }
    }

    #[test]
    fn warmup_is_excluded_and_classes_are_counted() {
        let t0 = Instant::now();
        let measure_from = t0 + Duration::from_secs(1);
        let live = Arc::new(LiveCounters::default());
        let shared = Arc::new(SharedTimelines::default());
        let mut r =
            Recorder::new([OpKind::Get].into_iter(), measure_from, live.clone(), shared.clone(), false, false, false);
        let done = |start: Instant, ms: u64, result| Completion {
            kind: OpKind::Get,
            issued: start,
            start,
            end: start + Duration::from_millis(ms),
            result,
            over_deadline: false,
            detail: b"",
            code: None,
            answered_by: None,
        };
        r.record(&done(t0, 3, Ok(())));
        r.record(&done(measure_from, 2, Ok(())));
        r.record(&done(measure_from, 4, Ok(())));
        r.record(&done(measure_from + Duration::from_millis(1500), 5000, Err(ErrorClass::Deadline)));
        let mut cell = CellMetrics::new();
        cell.merge(r);
        cell.absorb_timelines(&shared);
        let s = cell.summarize(Duration::from_secs(2), None, &[]);
        // Live counters count what the result counts; warm-up only feeds the rate.
        assert_eq!(live.snapshot(), (2, 1, 1));
        assert_eq!((s.ok, s.failed, s.errors.deadline), (2, 1, 1));
        assert_eq!(s.throughput, 1.0);
        let get = &s.per_op["get"];
        let lat = get.latency_ms.unwrap();
        assert!((lat.max - 4.0).abs() < 0.01 && (lat.p50 - 2.0).abs() < 0.01, "{lat:?}");
        assert!((get.max_any_ms - 5000.0).abs() < 5.0);
        // The deadline error finished 4.5 s after the 2 s window: folded into its last second.
        assert_eq!(s.timeline.len(), 2);
        assert_eq!((s.timeline[0].ok, s.timeline[1].failed), (2, 1));
    }

    /// A staged open loop's books: each op in the stage it was due in,
    /// sent and unsent adding up to each stage's due, and the timeline
    /// carrying the rate the schedule asked.
    #[test]
    fn stages_keep_their_own_books() {
        let t0 = Instant::now();
        let measure_from = t0 + Duration::from_millis(500);
        let at = |s: f64| measure_from + Duration::from_secs_f64(s);
        let shared = Arc::new(SharedTimelines::new(Duration::from_millis(100)));
        let live = Arc::new(LiveCounters::default());
        let mut r = Recorder::new(
            [OpKind::Get, OpKind::Set].into_iter(),
            measure_from,
            live,
            shared.clone(),
            true,
            false,
            false,
        )
        .with_stages(vec![(at(0.0), at(1.0)), (at(1.0), at(2.0))]);
        let done = |kind, due: Instant, ms: u64, result| Completion {
            kind,
            issued: due,
            start: due,
            end: due + Duration::from_millis(ms),
            result,
            over_deadline: false,
            detail: b"",
            code: None,
            answered_by: None,
        };
        // Warm-up, then two ops in the ramp, three at the peak (one failed).
        for (kind, due, ms, result) in [
            (OpKind::Get, t0, 1, Ok(())),
            (OpKind::Get, at(0.2), 2, Ok(())),
            (OpKind::Set, at(0.99), 30, Ok(())),
            (OpKind::Get, at(1.0), 4, Ok(())),
            (OpKind::Get, at(1.5), 8, Ok(())),
            (OpKind::Set, at(1.9), 5, Err(ErrorClass::Server)),
        ] {
            r.record_lag(due, due);
            r.record(&done(kind, due, ms, result));
        }
        // Due in the ramp, sent at the peak: the ramp's, sent during the peak.
        r.record_lag(at(0.5), at(1.2));
        r.record(&done(OpKind::Get, at(0.5), 3, Ok(())));
        r.record_unsent(Some(1), 7, false);
        assert_eq!(r.stage_bounds().len(), 2);
        let mut cell = CellMetrics::new();
        cell.merge(r);
        cell.absorb_timelines(&shared);
        let spec: crate::spec::OpenSpec =
            serde_yaml_ng::from_str("{stages: [{to: 10, over: 1s}, {hold: 1s}]}").unwrap();
        let arrivals = spec.arrivals(Duration::from_millis(500), 1.0);
        let open = OpenLoad { spec: &spec, arrivals: &arrivals, window_start_s: 0.5 };
        let profile = crate::spec::ProfileSpec { closed: None, open: Some(spec.clone()) };
        let s = cell.summarize(Duration::from_secs(2), Some(&open), &profile.stage_spans(1.0));
        let books: Vec<(&str, u64, u64, u64, u64)> =
            s.stages.iter().map(|st| (st.name.as_str(), st.due, st.sent, st.unsent, st.failed)).collect();
        assert_eq!(books, [("stage1", 3, 3, 0, 0), ("stage2", 10, 3, 7, 1)]);
        let backlog: Vec<(u64, Option<u64>)> = s.stages.iter().map(|st| (st.sent_during, st.behind_at_end)).collect();
        assert_eq!(backlog, [(2, Some(1)), (4, Some(7))], "the ramp's late op was sent during the peak");
        assert!((s.stages[1].sent_during_rate - 4.0).abs() < 1e-9, "{:?}", s.stages[1]);
        assert!((s.stages[1].per_op["get"].unwrap().max - 8.0).abs() < 0.01, "{:?}", s.stages[1].per_op);
        assert!(s.stages[1].per_op["set"].is_none(), "the peak's set failed");
        let close = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 1e-9);
        assert!(close(s.stages[0].target_rate, 5.0) && close(s.stages[1].target_rate, 10.0), "{:?}", s.stages);
        // The ramp asks from 0 to 10/s (its mean is 5/s); the hold asks 10/s throughout.
        let (from, to) = s.stages[0].ramp.expect("a ramp's rates at its ends");
        assert!(from.abs() < 0.01 && (to - 10.0).abs() < 0.01, "{:?}", s.stages[0].ramp);
        assert_eq!(s.stages[1].ramp, None);
        let open_loop = s.open_loop.unwrap();
        assert_eq!((open_loop.due, open_loop.unsent), (13, 7));
        assert!(close(Some(open_loop.rate), 7.5), "{open_loop:?}");
        // Every 100 ms point has the asked rate: the ramp's mean over it, then the hold.
        let asked: Vec<Option<f64>> = s.timeline.iter().map(|p| p.target_rate).collect();
        assert_eq!(asked.len(), 20);
        assert!(close(asked[0], 0.5) && close(asked[9], 9.5) && close(asked[19], 10.0), "{asked:?}");
    }

    #[test]
    fn failures_are_labelled_by_class_and_server_code_with_distinct_examples() {
        let mut labels = Vec::new();
        for _ in 0..1000 {
            count_label(&mut labels, ErrorClass::Server, b"LOADING Redis is loading the dataset in memory", None);
        }
        count_label(&mut labels, ErrorClass::Server, b"READONLY You can't write against a read only replica.", None);
        count_label(&mut labels, ErrorClass::Connection, b"the server closed the connection", None);
        count_label(&mut labels, ErrorClass::Deadline, b"", None);
        count_label(&mut labels, ErrorClass::Server, b"lower-case message without a code", None);
        let names: Vec<(&str, u64)> = labels.iter().map(|l| (l.label.as_str(), l.count)).collect();
        assert_eq!(
            names,
            [("server LOADING", 1000), ("server READONLY", 1), ("connection", 1), ("deadline", 1), ("server", 1)]
        );
        assert_eq!(labels[0].examples, ["LOADING Redis is loading the dataset in memory"]);
        assert_eq!(labels[3].examples, ["no reply by the op's deadline"]);
        // A server with endless codes: past the cap they count under `server`.
        for i in 0..100 {
            count_label(&mut labels, ErrorClass::Server, format!("E{} x", "Q".repeat(i + 1)).as_bytes(), None);
        }
        assert!(labels.len() <= MAX_LABELS + 1, "{}", labels.len());
        assert_eq!(labels.iter().map(|l| l.count).sum::<u64>(), 1004 + 100);
    }

    #[test]
    fn labels_map_to_status_classes() {
        assert_eq!(status_class("server 503 ServiceUnavailable"), "503");
        assert_eq!(status_class("server 400 ConditionalCheckFailedException"), "400");
        assert_eq!(status_class("deadline"), "timeout");
        assert_eq!(status_class("deadline timeout"), "timeout");
        assert_eq!(status_class("hang"), "timeout");
        assert_eq!(status_class("connection network"), "network");
        assert_eq!(status_class("server LOADING"), "error");
    }

    #[test]
    fn a_seconds_p99_is_read_off_its_log_buckets_at_most_a_quarter_high() {
        for us in [1u64, 2, 3, 5, 7, 100, 999, 1000, 12_345, 5_000_000] {
            let upper = SecondLatency::upper_us(SecondLatency::bucket(us));
            assert!(upper >= us as f64 && upper <= us as f64 * 1.25 + 1.0, "{us} µs -> bucket edge {upper}");
        }
        let mut l = SecondLatency::default();
        assert_eq!(l.quantile_ms(0.99), None);
        for i in 1..=1000u64 {
            l.record(i * 10); // 10 µs .. 10 ms
        }
        let p99 = l.quantile_ms(0.99).unwrap();
        assert!((9.9..=9.9 * 1.2).contains(&p99), "{p99}");
        let mut merged = SecondLatency::default();
        merged.absorb(&l);
        assert_eq!(merged.quantile_ms(0.5), l.quantile_ms(0.5));
    }
}
