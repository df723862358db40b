//! The typed spec: what a YAML campaign file may say. Every field here is
//! documented in docs/spec.md; `faultline schema` prints the JSON Schema
//! generated from these same types.

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::fault::FaultSpec;
use crate::target::TargetSpec;
use faultline_model::units::{Dur, Size};

/// A campaign: targets to run, workloads to drive them with, load profiles,
/// scenarios combining them, and gates that decide the verdict.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    /// Short name; used in the run directory and the report title.
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Seed for every random choice (keys, values, op mix); same seed, same ops.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Named values, overridable with `--set name=value`, used elsewhere in the
    /// spec as `${name}`.
    #[serde(default)]
    pub params: IndexMap<String, serde_json::Value>,
    pub targets: IndexMap<String, TargetSpec>,
    pub workloads: IndexMap<String, WorkloadSpec>,
    pub profiles: IndexMap<String, ProfileSpec>,
    #[serde(default)]
    pub timing: TimingSpec,
    pub scenarios: Vec<ScenarioSpec>,
    /// Safety checkers run on every cell's recorded history (recording is on
    /// whenever any is named): stale-read-after-ack, lost-acknowledged-write,
    /// final-state, linearizability, hot-key (the build's checkers: `faultline
    /// schema` lists them).
    #[serde(default)]
    pub checkers: Vec<faultline_model::checks::CheckerName>,
    #[serde(default)]
    pub gates: IndexMap<String, GateSpec>,
    #[serde(default)]
    pub report: ReportSpec,
}

impl Spec {
    /// Every plugin the spec names, with the dotted path of its `plugin` field.
    pub fn plugins(&self) -> Vec<(String, &PluginRef)> {
        let shapes =
            self.workloads.iter().filter_map(|(n, w)| Some((format!("workloads.{n}.shape.plugin"), w.shape.as_ref()?)));
        let gates = self.gates.iter().filter_map(|(n, g)| match &g.rule {
            GateRule::Plugin(p) => Some((format!("gates.{n}.plugin"), p)),
            GateRule::Expr(_) => None,
        });
        shapes.chain(gates).collect()
    }
}

fn default_seed() -> u64 {
    1
}

use faultline_model::ops::OpKind;

/// What the clients send: an op mix over a key space.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// Relative weights of the op kinds, e.g. `{get: 80, set: 20}`.
    pub ops: IndexMap<OpKind, f64>,
    #[serde(default)]
    pub keys: KeySpaceSpec,
    /// A fixed size (`64B`) or a range (`{min: 16B, max: 1KiB}`), uniform.
    #[serde(default = "default_value_size")]
    pub value_size: ValueSizeSpec,
    /// A WebAssembly workload plugin that decides the ops instead of the
    /// built-in mix and key distribution; `ops` then declares the op kinds
    /// it may send (with weights it can use).
    #[serde(default)]
    pub shape: Option<PluginRef>,
    /// Publish/subscribe fan-out: the channels `publish` ops go to and the
    /// subscribers that count what arrives (Redis targets only).
    #[serde(default)]
    pub fanout: Option<FanoutSpec>,
}

/// Publish/subscribe fan-out: `subscribers` connections, subscriber `i` on
/// channel `i mod channels`, opened before the clock starts; the profile's
/// lanes publish numbered messages to the channels in turn.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FanoutSpec {
    /// How many channels the messages are spread over (default 1).
    #[serde(default = "default_channels")]
    pub channels: u32,
    /// How many subscriber connections; subscriber `i` takes channel `i mod channels`.
    pub subscribers: u32,
    /// Each message's size, its header (publisher, sequence number, send
    /// time: 29 bytes) included (default 64B).
    #[serde(default = "default_message_size")]
    pub message_size: Size,
    /// Stop some subscribers reading their socket for a while, to see what
    /// the server does with a slow subscriber (and count the drops).
    #[serde(default)]
    pub pause: Option<PauseSpec>,
}

/// Subscribers `0..subscribers` stop reading at `at` into the measured
/// window, for `for`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PauseSpec {
    /// How many subscribers pause (the first ones; default 1).
    #[serde(default = "default_paused")]
    pub subscribers: u32,
    /// When, after the measured window starts.
    pub at: Dur,
    /// How long they read nothing.
    #[serde(rename = "for")]
    pub pause_for: Dur,
}

fn default_channels() -> u32 {
    1
}

fn default_message_size() -> Size {
    Size(64)
}

fn default_paused() -> u32 {
    1
}

/// A WebAssembly plugin and what it is given.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PluginRef {
    /// Path to the component (`.wasm`), relative to the spec file.
    pub plugin: String,
    /// Handed to the plugin as JSON text.
    #[serde(default)]
    pub config: serde_json::Value,
    /// How long one call may run before the plugin is stopped (default: 50ms
    /// per workload batch, 1s per gate evaluation; `init` gets 1s).
    #[serde(default)]
    pub deadline: Option<Dur>,
    /// The most linear memory the plugin may use (default 64MiB).
    #[serde(default)]
    pub memory: Option<Size>,
}

fn default_value_size() -> ValueSizeSpec {
    ValueSizeSpec::Fixed(Size(64))
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KeySpaceSpec {
    /// Number of distinct keys.
    #[serde(default = "default_key_count")]
    pub count: u64,
    #[serde(default)]
    pub distribution: KeyDistribution,
    /// zipfian: the exponent (0.99 is the YCSB default).
    #[serde(default)]
    pub exponent: Option<f64>,
    /// hotset: the fraction of keys that are hot (e.g. 0.01).
    #[serde(default)]
    pub hot_fraction: Option<f64>,
    /// hotset: the fraction of ops that go to the hot keys (e.g. 0.9).
    #[serde(default)]
    pub hot_op_fraction: Option<f64>,
    /// Prepended to the key number.
    #[serde(default = "default_key_prefix")]
    pub prefix: String,
}

impl Default for KeySpaceSpec {
    fn default() -> Self {
        KeySpaceSpec {
            count: default_key_count(),
            distribution: KeyDistribution::Uniform,
            exponent: None,
            hot_fraction: None,
            hot_op_fraction: None,
            prefix: default_key_prefix(),
        }
    }
}

fn default_key_count() -> u64 {
    10_000
}

fn default_key_prefix() -> String {
    "fl:".into()
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum KeyDistribution {
    #[default]
    Uniform,
    Zipfian,
    Hotset,
    Sequential,
    /// Contention rounds: every writer of a cell sends its n-th op to the
    /// n-th key of the cell, a fresh one, for `count` rounds; the cell ends
    /// when the last round is answered (or at the end of its window).
    Rounds,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum ValueSizeSpec {
    Fixed(Size),
    Range { min: Size, max: Size },
}

/// By hand rather than `untagged`, so a bad size keeps its own message
/// ("size `512` has no unit") instead of "did not match any variant".
impl<'de> Deserialize<'de> for ValueSizeSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Range {
            min: Size,
            max: Size,
        }
        struct SizeVisitor;
        impl<'de> serde::de::Visitor<'de> for SizeVisitor {
            type Value = ValueSizeSpec;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a size such as 64B, or {min: 16B, max: 1KiB}")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ValueSizeSpec, E> {
                faultline_model::units::parse_size(v).map(|n| ValueSizeSpec::Fixed(Size(n))).map_err(E::custom)
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<ValueSizeSpec, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<ValueSizeSpec, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<ValueSizeSpec, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<ValueSizeSpec, A::Error> {
                let r = Range::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(ValueSizeSpec::Range { min: r.min, max: r.max })
            }
        }
        d.deserialize_any(SizeVisitor)
    }
}

/// How much load: a closed loop (`closed: 3x32`, clients × in-flight per
/// client, or clients in steps) or an open loop at an arrival rate
/// (`open: {rate: 20000}`, or a rate in stages). Exactly one of the two.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProfileSpec {
    #[serde(default)]
    pub closed: Option<ClosedSpec>,
    #[serde(default)]
    pub open: Option<OpenSpec>,
}

/// A closed loop: a fixed shape (`3x32`), or clients added (or taken
/// away) in steps, `{stages: [{clients: 4, hold: 30s}, …], in_flight: 32}`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum ClosedSpec {
    Shape(ClosedShape),
    Stages(ClosedStages),
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClosedStages {
    /// The steps, one after another: together the measured window.
    pub stages: Vec<ClosedStage>,
    /// Ops each client keeps in flight.
    #[serde(default = "default_closed_in_flight")]
    pub in_flight: u32,
}

fn default_closed_in_flight() -> u32 {
    1
}

/// One step of a closed loop: how many clients run, for how long.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClosedStage {
    /// What results and gates call it; default `stage1`, `stage2`, ….
    #[serde(default)]
    pub name: Option<String>,
    pub clients: u32,
    pub hold: Dur,
}

/// By hand rather than `untagged`, so a bad shape keeps its own message
/// ("invalid closed-loop shape `3*32`") instead of "did not match any variant".
impl<'de> Deserialize<'de> for ClosedSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ClosedVisitor;
        impl<'de> serde::de::Visitor<'de> for ClosedVisitor {
            type Value = ClosedSpec;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("clients x in-flight such as 3x32, or {stages: [{clients: 4, hold: 30s}, …]}")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ClosedSpec, E> {
                ClosedShape::parse(v).map(ClosedSpec::Shape).map_err(E::custom)
            }
            // A shape never reads as a number, unless it is `0xN`: hex.
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<ClosedSpec, E> {
                Err(read_as_number(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<ClosedSpec, E> {
                Err(read_as_number(v))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<ClosedSpec, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<ClosedSpec, A::Error> {
                ClosedStages::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(ClosedSpec::Stages)
            }
        }
        d.deserialize_any(ClosedVisitor)
    }
}

/// A closed-loop shape YAML took for a number: its words, since the text
/// (`0x1`) is gone by then.
fn read_as_number<E: serde::de::Error>(v: impl std::fmt::Display) -> E {
    E::custom(format!(
        "YAML reads this closed-loop shape as the number {v} (`0x…` is hex): write clients x in-flight, at least 1x1, e.g. 1x1 or 3x32"
    ))
}

/// A validated profile.
#[derive(Debug, Clone, Copy)]
pub enum Load<'a> {
    Closed(ClosedShape),
    Open(&'a OpenSpec),
}

impl ProfileSpec {
    /// Validation guarantees exactly one of `closed` and `open`. A closed
    /// loop in steps is its largest: every client it ever runs is opened.
    pub fn load(&self) -> Load<'_> {
        match (&self.closed, &self.open) {
            (Some(ClosedSpec::Shape(c)), _) => Load::Closed(*c),
            (Some(ClosedSpec::Stages(c)), _) => Load::Closed(ClosedShape {
                clients: c.stages.iter().map(|s| s.clients).max().unwrap_or(1),
                in_flight: c.in_flight,
            }),
            (None, Some(o)) => Load::Open(o),
            (None, None) => unreachable!("validated: a profile is closed or open"),
        }
    }

    /// How results and `--dry-run` name its shape: the load's, and a
    /// closed loop in steps as `closed 3 stages up to 16x32`.
    pub fn shape(&self) -> String {
        match (&self.closed, self.load()) {
            (Some(ClosedSpec::Stages(c)), Load::Closed(largest)) => {
                format!("closed {} stages up to {largest}", c.stages.len())
            }
            (_, load) => load.to_string(),
        }
    }

    /// Its stages' names (given, or `stage` and their 1-based place) and
    /// lengths, open or closed; empty without stages.
    fn stage_list(&self) -> Vec<(String, std::time::Duration, Option<u32>)> {
        let name = |i: usize, n: &Option<String>| n.clone().unwrap_or_else(|| format!("stage{}", i + 1));
        match (&self.closed, &self.open) {
            (Some(ClosedSpec::Stages(c)), _) => {
                c.stages.iter().enumerate().map(|(i, s)| (name(i, &s.name), s.hold.0, Some(s.clients))).collect()
            }
            (_, Some(o)) => o
                .stages
                .iter()
                .flatten()
                .enumerate()
                .map(|(i, s)| (name(i, &s.name), s.hold.or(s.over).map_or(std::time::Duration::ZERO, |d| d.0), None))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Each stage's name: its own, or `stage` and its 1-based place.
    pub fn stage_names(&self) -> Vec<String> {
        self.stage_list().into_iter().map(|(name, _, _)| name).collect()
    }

    /// The stages' total length: the measured window of a staged profile.
    pub fn stages_length(&self) -> Option<std::time::Duration> {
        let stages = self.stage_list();
        (!stages.is_empty()).then(|| stages.iter().map(|(_, len, _)| *len).sum())
    }

    /// Where each stage lies in the measured window, its lengths times
    /// `scale` (see `CellTiming`); empty without stages.
    pub fn stage_spans(&self, scale: f64) -> Vec<StageSpan> {
        let mut at = 0.0;
        self.stage_list()
            .into_iter()
            .map(|(name, len, clients)| {
                at += len.as_secs_f64() * scale;
                StageSpan { name, from_s: at - len.as_secs_f64() * scale, to_s: at, clients }
            })
            .collect()
    }
}

impl std::fmt::Display for Load<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Load::Closed(s) => write!(f, "closed {s}"),
            Load::Open(o) => match (o.rate, &o.stages) {
                (Some(rate), _) => write!(f, "open {rate}/s over {}x{}", o.connections, o.in_flight),
                (None, None) => write!(f, "open at the searched rate over {}x{}", o.connections, o.in_flight),
                (None, stages) => write!(
                    f,
                    "open {} stages up to {}/s over {}x{}",
                    stages.iter().flatten().count(),
                    o.peak_rate(),
                    o.connections,
                    o.in_flight
                ),
            },
        }
    }
}

/// `CxI`: C client connections, each with I ops in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClosedShape {
    pub clients: u32,
    pub in_flight: u32,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OpenSpec {
    /// Target arrival rate in ops per second, constant; or `stages`.
    #[serde(default)]
    pub rate: Option<f64>,
    /// With `stages`: the rate the warm-up runs at and the first stage
    /// starts from, ops per second (default 0).
    #[serde(default)]
    pub from: Option<f64>,
    /// The rate in stages, one after another, instead of `rate`: each ramps
    /// it linearly (`{to: 5000, over: 30s}`) or holds it (`{hold: 1m}`).
    /// Together they are the measured window.
    #[serde(default)]
    pub stages: Option<Vec<OpenStage>>,
    /// Client connections the arrivals are spread over.
    #[serde(default = "default_open_connections")]
    pub connections: u32,
    /// Most ops in flight per connection; when all are busy the schedule falls
    /// behind, which the results report (latency still counts from the
    /// intended start).
    #[serde(default = "default_open_in_flight")]
    pub in_flight: u32,
    /// The share of the schedule (0 to 1) that must be sent for the cell to
    /// count as measured; below it no gate passes on the cell, as its load
    /// was not what the spec asked for.
    #[serde(default = "default_min_sent")]
    pub min_sent: f64,
}

/// One stage of an open loop's rate: a ramp or a hold.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OpenStage {
    /// What results and gates call it (`stage: peak`); default `stage1`,
    /// `stage2`, … by its place in the list.
    #[serde(default)]
    pub name: Option<String>,
    /// A ramp: the rate at the stage's end, ops per second, reached
    /// linearly from the rate the stage starts at.
    #[serde(default)]
    pub to: Option<f64>,
    /// A ramp: how long it takes.
    #[serde(default)]
    pub over: Option<Dur>,
    /// A hold: how long the rate stays where the stage before left it.
    #[serde(default)]
    pub hold: Option<Dur>,
}

/// A stage's place in the measured window.
#[derive(Debug, Clone, PartialEq)]
pub struct StageSpan {
    pub name: String,
    /// Seconds into the measured window.
    pub from_s: f64,
    pub to_s: f64,
    /// A closed loop's step: how many clients run in it.
    pub clients: Option<u32>,
}

impl OpenSpec {
    /// Each stage's length in seconds (times `scale`, see `CellTiming`) and
    /// the rate it ends at.
    fn stage_rates(&self, scale: f64) -> Vec<(f64, f64)> {
        let mut rate = self.from.unwrap_or(0.0);
        let stages = self.stages.iter().flatten();
        stages
            .map(|s| {
                rate = s.to.unwrap_or(rate);
                (s.hold.or(s.over).map_or(0.0, |d| d.0.as_secs_f64()) * scale, rate)
            })
            .collect()
    }

    /// The schedule from the start of the warm-up: `rate` throughout, or
    /// the warm-up at `from` and then the stages, their lengths times
    /// `scale`.
    pub fn arrivals(&self, warmup: std::time::Duration, scale: f64) -> crate::arrivals::Arrivals {
        match self.rate {
            Some(rate) => crate::arrivals::Arrivals::constant(rate),
            None => crate::arrivals::Arrivals::staged(
                warmup.as_secs_f64(),
                self.from.unwrap_or(0.0),
                &self.stage_rates(scale),
            ),
        }
    }

    /// The highest rate it asks for.
    pub fn peak_rate(&self) -> f64 {
        let stages = self.stage_rates(1.0).into_iter().map(|(_, r)| r);
        self.rate.into_iter().chain(self.from).chain(stages).fold(0.0, f64::max)
    }
}

fn default_min_sent() -> f64 {
    0.99
}

fn default_open_connections() -> u32 {
    4
}

fn default_open_in_flight() -> u32 {
    64
}

/// When to measure and for how long.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TimingSpec {
    /// Load before measuring; excluded from the statistics.
    #[serde(default = "default_warmup")]
    pub warmup: Dur,
    /// The measured window.
    #[serde(default = "default_duration")]
    pub duration: Dur,
    /// How many times each scenario × profile runs.
    #[serde(default = "default_repeats")]
    pub repeats: u32,
    /// Per-op deadline.
    #[serde(default = "default_deadline")]
    pub deadline: Dur,
    /// An op still running this long after its deadline is a hang.
    #[serde(default = "default_hang_after")]
    pub hang_after: Dur,
    /// An op finishing more than this after its deadline is over-deadline.
    #[serde(default = "default_over_deadline_after")]
    pub over_deadline_after: Dur,
    /// What `--quick` runs instead (warm-up, duration, repeats).
    #[serde(default)]
    pub quick: QuickTiming,
}

impl Default for TimingSpec {
    fn default() -> Self {
        TimingSpec {
            warmup: default_warmup(),
            duration: default_duration(),
            repeats: default_repeats(),
            deadline: default_deadline(),
            hang_after: default_hang_after(),
            over_deadline_after: default_over_deadline_after(),
            quick: QuickTiming::default(),
        }
    }
}

fn default_warmup() -> Dur {
    Dur(std::time::Duration::from_secs(1))
}
fn default_duration() -> Dur {
    Dur(std::time::Duration::from_secs(10))
}
fn default_repeats() -> u32 {
    1
}
fn default_deadline() -> Dur {
    Dur(std::time::Duration::from_secs(5))
}
fn default_hang_after() -> Dur {
    Dur(std::time::Duration::from_secs(1))
}
fn default_over_deadline_after() -> Dur {
    Dur(std::time::Duration::from_millis(100))
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QuickTiming {
    #[serde(default = "default_quick_warmup")]
    pub warmup: Dur,
    #[serde(default = "default_quick_duration")]
    pub duration: Dur,
    #[serde(default = "default_repeats")]
    pub repeats: u32,
}

impl Default for QuickTiming {
    fn default() -> Self {
        QuickTiming { warmup: default_quick_warmup(), duration: default_quick_duration(), repeats: 1 }
    }
}

fn default_quick_warmup() -> Dur {
    Dur(std::time::Duration::from_millis(200))
}
fn default_quick_duration() -> Dur {
    Dur(std::time::Duration::from_secs(2))
}

/// One experiment: a workload against a target under some profiles. With
/// several targets (or several workloads on one target), each is a variant
/// and their repeats alternate (A B, B A, …) so drift on the host does not
/// favour one side.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScenarioSpec {
    pub name: String,
    /// One target name, or a list of targets to compare (the first is the baseline).
    pub target: OneOrMany,
    /// One workload, or a list to compare on one target (the first is the
    /// baseline), e.g. a shape plugin against the built-in shape.
    pub workload: OneOrMany,
    pub profiles: Vec<String>,
    /// Overrides of the campaign's `timing` for this scenario.
    #[serde(default)]
    pub timing: Option<TimingOverride>,
    /// Faults applied during each of this scenario's cells.
    #[serde(default)]
    pub faults: Vec<FaultSpec>,
    /// Target options for this scenario's cells, over the target's own (e.g.
    /// another read concern on the same servers).
    #[serde(default)]
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub options: Option<serde_json::Value>,
    /// Named dimensions, each with its values, e.g. `{fsync: [always,
    /// everysec], depth: [1, 16]}`: the scenario runs once per combination,
    /// with `{fsync}` and `{depth}` in its targets, workloads, profiles and
    /// its own fields replaced by that combination's values.
    #[serde(default)]
    pub matrix: super::matrix::MatrixSpec,
    /// What the other targets do while one variant's cell runs.
    #[serde(default)]
    pub isolation: super::matrix::Isolation,
    /// Commands run against the cell's target before, after or over each
    /// cell (or once when the target starts), their output kept in the run
    /// directory and summarised in the report.
    #[serde(default)]
    pub probes: Vec<super::probe::ProbeSpec>,
    /// The safety checkers for this scenario's cells instead of the
    /// campaign's `checkers` (`[]`: none). Recording a history costs
    /// throughput, so a benchmark scenario beside a crash scenario can leave
    /// it off.
    #[serde(default)]
    pub checkers: Option<Vec<faultline_model::checks::CheckerName>>,
    /// Search for the highest open-loop rate at which an SLO holds, instead
    /// of running the profile's rate (see `crate::capacity`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<crate::capacity::CapacitySpec>,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl ScenarioSpec {
    /// The (target, workload) pairs it compares, baseline first: its
    /// targets, or its workloads when it lists several.
    pub fn variants(&self) -> Vec<(String, String)> {
        let (targets, workloads) = (self.target.names(), self.workload.names());
        if workloads.len() > 1 {
            workloads.into_iter().map(|w| (targets[0].clone(), w)).collect()
        } else {
            targets.into_iter().map(|t| (t, workloads[0].clone())).collect()
        }
    }

    /// What names a variant in labels and comparisons: the workload when it
    /// compares workloads, else the target.
    pub fn variant_name(&self, target: &str, workload: &str) -> String {
        match self.workload.names().len() > 1 {
            true => workload.to_string(),
            false => target.to_string(),
        }
    }
}

impl OneOrMany {
    pub fn names(&self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s.clone()],
            OneOrMany::Many(v) => v.clone(),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TimingOverride {
    pub warmup: Option<Dur>,
    pub duration: Option<Dur>,
    pub repeats: Option<u32>,
    pub deadline: Option<Dur>,
}

/// A gate: a built-in expression (`p99(get) < 30ms`) or a WebAssembly gate
/// plugin, optionally limited to one scenario or profile.
#[derive(Debug, Clone, Serialize)]
pub struct GateSpec {
    pub rule: GateRule,
    pub scenario: Option<String>,
    pub profile: Option<String>,
    /// Reported, but not part of the verdict (a comparison kept for
    /// information, like the seed's majority reads).
    pub informational: bool,
}

#[derive(Debug, Clone, Serialize)]
pub enum GateRule {
    Expr(String),
    Plugin(PluginRef),
}

impl GateSpec {
    pub fn expr(expr: &str) -> GateSpec {
        GateSpec { rule: GateRule::Expr(expr.into()), scenario: None, profile: None, informational: false }
    }

    /// What the report shows in the gate's "rule" column.
    pub fn describe(&self) -> String {
        match &self.rule {
            GateRule::Expr(e) => e.clone(),
            GateRule::Plugin(p) => format!("plugin {}", p.plugin),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReportSpec {
    /// A minijinja template to render instead of the default one; relative to
    /// the spec file.
    #[serde(default)]
    pub template: Option<String>,
    #[serde(default)]
    pub title: Option<String>,
    /// Throughput ratios within 1 ± this share (e.g. 0.05) count as no
    /// difference: a comparison is called WIN or LOSS only when its
    /// confidence interval lies wholly outside the band, parity only when
    /// wholly inside. Default 0.05.
    #[serde(default)]
    pub parity: Option<f64>,
}

impl<'de> Deserialize<'de> for ClosedShape {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        ClosedShape::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl ClosedShape {
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = || format!("invalid closed-loop shape `{text}`: write clients x in-flight, e.g. 1x1 or 3x32");
        let (c, i) = text.trim().split_once(['x', 'X']).ok_or_else(bad)?;
        let clients: u32 = c.trim().parse().map_err(|_| bad())?;
        let in_flight: u32 = i.trim().parse().map_err(|_| bad())?;
        if clients == 0 || in_flight == 0 {
            return Err(format!("closed-loop shape `{text}` needs at least 1x1"));
        }
        use crate::limits::{MAX_CONNECTIONS, MAX_IN_FLIGHT};
        if clients > MAX_CONNECTIONS || in_flight > MAX_IN_FLIGHT {
            return Err(format!(
                "closed-loop shape `{text}` is too large: at most {MAX_CONNECTIONS} clients x {MAX_IN_FLIGHT} in flight"
            ));
        }
        Ok(ClosedShape { clients, in_flight })
    }
}

impl std::fmt::Display for ClosedShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x{}", self.clients, self.in_flight)
    }
}

impl Serialize for ClosedShape {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl JsonSchema for ClosedShape {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ClosedShape".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^[0-9]+[xX][0-9]+$",
            "description": "clients x in-flight per client, e.g. 3x32",
        })
    }
}

impl JsonSchema for GateSpec {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Gate".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A gate expression such as `p99(get) < 30ms`, or a map with the expression (or a WebAssembly gate plugin) and filters",
            "anyOf": [
                {"type": "string"},
                {
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["expr"],
                    "properties": {
                        "expr": {"type": "string"},
                        "scenario": {"type": "string"},
                        "profile": {"type": "string"},
                        "informational": {"type": "boolean", "description": "reported, not part of the verdict"}
                    }
                },
                {
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["plugin"],
                    "properties": {
                        "plugin": {"type": "string", "description": "path to the gate component (.wasm), relative to the spec file"},
                        "config": {"description": "handed to the plugin as JSON text"},
                        "deadline": {"type": "string", "description": "how long one evaluation may run (default 1s)"},
                        "memory": {"type": "string", "description": "the most linear memory the plugin may use (default 64MiB)"},
                        "scenario": {"type": "string"},
                        "profile": {"type": "string"},
                        "informational": {"type": "boolean", "description": "reported, not part of the verdict"}
                    }
                }
            ]
        })
    }
}

/// A gate is written either as the bare expression or as a map with filters.
impl<'de> Deserialize<'de> for GateSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Full {
            #[serde(default)]
            expr: Option<String>,
            #[serde(default)]
            plugin: Option<String>,
            #[serde(default)]
            config: Option<serde_json::Value>,
            #[serde(default)]
            deadline: Option<Dur>,
            #[serde(default)]
            memory: Option<Size>,
            #[serde(default)]
            scenario: Option<String>,
            #[serde(default)]
            profile: Option<String>,
            #[serde(default)]
            informational: bool,
        }
        struct GateVisitor;
        impl<'de> serde::de::Visitor<'de> for GateVisitor {
            type Value = GateSpec;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(
                    "an expression such as `p99(get) < 30ms`, or a map with `expr` or `plugin`, and `scenario`, `profile`, `informational`",
                )
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<GateSpec, E> {
                Ok(GateSpec::expr(v))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<GateSpec, A::Error> {
                use serde::de::Error;
                let full = Full::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                let plugin_fields = full.config.is_some() || full.deadline.is_some() || full.memory.is_some();
                let rule = match (full.expr, full.plugin) {
                    (Some(_), Some(_)) => return Err(A::Error::custom("a gate has `expr` or `plugin`, not both")),
                    (None, None) => {
                        return Err(A::Error::custom(
                            "a gate needs `expr` (e.g. `p99(get) < 30ms`) or `plugin: FILE.wasm`",
                        ))
                    }
                    (Some(_), None) if plugin_fields => {
                        return Err(A::Error::custom("`config`, `deadline` and `memory` apply only to a gate `plugin`"))
                    }
                    (Some(expr), None) => GateRule::Expr(expr),
                    (None, Some(plugin)) => GateRule::Plugin(PluginRef {
                        plugin,
                        config: full.config.unwrap_or(serde_json::Value::Null),
                        deadline: full.deadline,
                        memory: full.memory,
                    }),
                };
                Ok(GateSpec { rule, scenario: full.scenario, profile: full.profile, informational: full.informational })
            }
        }
        d.deserialize_any(GateVisitor)
    }
}
