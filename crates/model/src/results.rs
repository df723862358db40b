//! results.json: everything a run measured and decided. The schema is
//! documented in docs/results.md; bump `SCHEMA_VERSION` on any
//! incompatible change. Writing and reading the file is the runner's.

use serde::{Deserialize, Serialize};

use crate::checks::CheckResult;
use crate::stats::CellStats;

pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Verdict {
    Pass,
    Fail,
    Incomplete,
}

impl Verdict {
    pub fn exit_code(self) -> i32 {
        match self {
            Verdict::Pass => 0,
            Verdict::Fail => 1,
            Verdict::Incomplete => 2,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
            Verdict::Incomplete => "INCOMPLETE",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Results {
    pub schema_version: u32,
    pub run: RunInfo,
    pub verdict: Verdict,
    /// Why the verdict is what it is, in plain words.
    pub verdict_reasons: Vec<String>,
    pub gates: Vec<GateResult>,
    pub targets: Vec<TargetInfo>,
    pub cells: Vec<CellResult>,
    /// Throughput and latency ratios of each variant against the first target
    /// of its scenario.
    pub comparisons: Vec<Comparison>,
    /// Problems that stopped part of the run (a target that never came up, …).
    pub errors: Vec<String>,
    /// What ran, beyond `run` and `targets`: the commit, plugin hashes, how
    /// competitors were isolated.
    #[serde(default)]
    pub manifest: crate::provenance::Manifest,
    /// Per scenario, matrix point and variant: the crashes and clean
    /// restarts, and whether every acknowledged write survived them.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub crash_recovery: Vec<crate::recovery::RecoveryRow>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunInfo {
    pub id: String,
    pub name: String,
    pub description: String,
    pub spec_path: String,
    pub started: String,
    pub finished: String,
    pub seed: u64,
    pub params: indexmap::IndexMap<String, serde_json::Value>,
    pub quick: bool,
    pub only: Vec<String>,
    pub interrupted: bool,
    pub faultline_version: String,
    /// The git commit faultline was built from (`-dirty` with uncommitted changes).
    #[serde(default)]
    pub faultline_commit: String,
    pub host: HostInfo,
    /// The agents that ran the load, when the run had any (`--agents`).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub agents: Vec<AgentInfo>,
}

/// An agent of the run: who it was, and how its clock stood against the
/// coordinator's when the run started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentInfo {
    pub name: String,
    pub host: String,
    pub pid: u32,
    pub cores: usize,
    pub faultline_version: String,
    pub binary_sha256: String,
    /// How the agent was started: `local`, `swarm`, or `external` (it dialed in).
    pub launcher: String,
    /// The agent's clock minus the coordinator's, and the uncertainty of
    /// that (half the shortest round trip): op times in its histories are
    /// widened by it, so no checker orders two ops closer than it allows.
    pub clock_offset_us: f64,
    pub clock_uncertainty_us: f64,
    pub round_trip_us: f64,
    /// It runs on the coordinator's host (the same kernel boot), so it reads
    /// the very clock the coordinator does: offset and uncertainty are 0.
    #[serde(default)]
    pub same_clock: bool,
    /// Its lanes: lane `i` of a cell runs on agent `i % agents`.
    pub share: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HostInfo {
    pub hostname: String,
    pub os: String,
    pub kernel: String,
    pub cpus: usize,
    pub cpu_model: String,
    pub memory_gib: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TargetInfo {
    pub name: String,
    pub kind: String,
    pub provider: String,
    pub uri: String,
    /// What the server said it is (e.g. `redis 7.0.15`), probed at start.
    pub server: String,
    /// The target with the matrix values its fields use (`cand[fsync=always]`),
    /// when a matrix made several servers of it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub instance: Option<String>,
    /// Its arguments as the spec gave them, matrix values filled in.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub args: Vec<String>,
    /// Process targets: the working directory it ran in (`{target_dir}`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub work_dir: Option<String>,
    /// Process targets: the binary it ran, with its SHA-256.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub binary: Option<crate::provenance::Binary>,
    /// Docker targets: the image.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub image: Option<String>,
    /// Its data ran on faultline's fault filesystem (FUSE, for disk faults):
    /// every file call cost a kernel round trip more.
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub fault_filesystem: bool,
    /// How the kernel passed its writes to the fault filesystem, when it ran on one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub fault_filesystem_caching: Option<crate::faults::Caching>,
    /// The scenario's `when: start` probes: the configuration it really ran with.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub probes: Vec<crate::probes::ProbeOutput>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CellStatus {
    Completed,
    /// Stopped early by Ctrl-C or SIGTERM; its numbers cover what ran.
    Interrupted,
    /// Could not run (no connection, …); see `error`.
    Failed,
    /// Never started because the run stopped before it.
    Skipped,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellResult {
    pub scenario: String,
    pub profile: String,
    /// `closed 3x32` or `open 20000/s over 4x64`.
    pub shape: String,
    pub target: String,
    pub workload: String,
    /// The target, or the workload in a scenario that compares workloads.
    #[serde(default)]
    pub variant: String,
    /// The scenario's matrix point this cell ran, e.g. `{fsync: always, depth: 1}`.
    #[serde(skip_serializing_if = "indexmap::IndexMap::is_empty", default)]
    pub matrix: indexmap::IndexMap<String, String>,
    pub repeat: u32,
    pub status: CellStatus,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error: Option<String>,
    /// Length of the measured window in seconds (shorter if interrupted).
    pub measured_s: f64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub stats: Option<CellStats>,
    /// The spec's checkers on this cell's history.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub checks: Vec<CheckResult>,
    /// The scenario's faults as they were applied and healed in this cell.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub faults: Vec<crate::faults::FaultRecord>,
    /// Cells with faults, or whose reads only the primary may answer, on a
    /// target with members (or one MongoDB server):
    /// each member's role changes over the measured window.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub roles: Vec<crate::roles::RoleChange>,
    /// Cells whose roles were sampled, on a kind with a read concern: reads
    /// answered by a member that was not primary (by the member that
    /// answered each where the read names it), judged when the read concern
    /// requires the primary.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub non_primary_reads: Option<crate::roles::NonPrimaryReads>,
    /// The scenario's probes run before, after and over this cell.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub probes: Vec<crate::probes::ProbeOutput>,
    /// `isolation: stop`: the other targets frozen while this cell ran.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub frozen: Vec<String>,
    /// A scenario with `capacity:`: the search this cell ran; its stats
    /// are those of the last step at the capacity found.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub capacity: Option<crate::capacity::CapacitySearch>,
}

impl CellResult {
    pub fn label(&self) -> String {
        let point = crate::labels::matrix_suffix(&self.matrix);
        format!("{}{point}/{}/{}#{}", self.scenario, self.profile, self.variant(), self.repeat)
    }

    /// Results written before variants named themselves used the target.
    pub fn variant(&self) -> &str {
        if self.variant.is_empty() {
            &self.target
        } else {
            &self.variant
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GateOutcome {
    Pass,
    Fail,
    /// Could not be evaluated (nothing measured, a metric missing).
    Incomplete,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GateResult {
    pub name: String,
    /// The expression, or `plugin FILE` for a gate plugin.
    pub expr: String,
    pub result: GateOutcome,
    /// The measured values behind the result, e.g. the worst cell.
    pub evidence: String,
    /// A gate plugin's criteria table, row by row.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub criteria: Vec<Criterion>,
    /// Reported, but not part of the verdict.
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub informational: bool,
    /// A built-in gate in each cell it covers (a ratio gate: in each group
    /// of cells it compares), e.g. for one JUnit testcase each.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub cells: Vec<GateCell>,
}

/// A built-in gate's outcome in one cell (or group of cells).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GateCell {
    /// The cell's label, `scenario/profile/variant#repeat`, or a group's,
    /// `scenario/profile`.
    pub cell: String,
    pub result: GateOutcome,
    pub evidence: String,
}

/// One row of a gate plugin's criteria table.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Criterion {
    pub name: String,
    pub evidence: String,
    pub result: GateOutcome,
}

/// One variant against its scenario's baseline (the first variant) in one
/// group of cells: the same scenario, matrix point and profile.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Comparison {
    pub scenario: String,
    /// The matrix point both sides ran.
    #[serde(skip_serializing_if = "indexmap::IndexMap::is_empty", default)]
    pub matrix: indexmap::IndexMap<String, String>,
    pub profile: String,
    pub baseline: String,
    pub target: String,
    /// Repeats both sides completed, paired by their number.
    pub repeats: u32,
    pub baseline_stats: VariantStats,
    pub target_stats: VariantStats,
    /// target / baseline of the mean throughput.
    pub throughput: Ratio,
    /// target / baseline of the mean p50 and p99 (of the worst op kind).
    pub p50: Ratio,
    pub p99: Ratio,
    /// target / baseline of the mean capacity, in scenarios that search
    /// for it (and only where both sides found the target's own number).
    #[serde(skip_serializing_if = "Ratio::is_empty", default)]
    pub capacity: Ratio,
    /// Fan-out cells: target / baseline of the mean deliveries per second.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub delivered_rate: Option<Ratio>,
    /// The throughput's word, only where its interval is clear of the
    /// parity band: WIN above it, LOSS below it, parity inside it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub word: Option<Word>,
    /// Ratios within 1 ± this count as no difference (the spec's `report.parity`).
    pub parity_band: f64,
}

/// One variant's numbers over its completed repeats.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct VariantStats {
    pub repeats: u32,
    /// Successful ops per second.
    pub mean_throughput: f64,
    pub median_throughput: f64,
    /// Mean over repeats of the worst op kind's percentile, in ms.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub p50_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub p99_ms: Option<f64>,
    /// Mean over repeats of the capacity found, where every repeat found
    /// the target's own number.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub capacity: Option<f64>,
    /// Fan-out: mean over repeats of the deliveries per second.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub mean_delivered_rate: Option<f64>,
    /// Mean over repeats of the share of ops that failed (0–1).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error_share: Option<f64>,
}

/// A confidence interval of a ratio.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub low: f64,
    pub high: f64,
}

/// `0.88–0.94`, or `–` without an interval (fewer than two repeats).
pub fn format_interval(v: Option<Interval>) -> String {
    v.map_or_else(|| "–".into(), |i| format!("{:.2}–{:.2}", i.low, i.high))
}

/// A ratio with its noise.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Ratio {
    /// Of the means; none when the baseline's is 0 or missing.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub value: Option<f64>,
    /// Median of the per-repeat ratios of paired repeats.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub paired_median: Option<f64>,
    /// 95% bootstrap interval; none with fewer than two repeats.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub interval: Option<Interval>,
}

impl Ratio {
    /// No ratio at all (the measure was not taken on both sides).
    pub fn is_empty(&self) -> bool {
        self.value.is_none() && self.paired_median.is_none() && self.interval.is_none()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Word {
    #[serde(rename = "WIN")]
    Win,
    #[serde(rename = "parity")]
    Parity,
    #[serde(rename = "LOSS")]
    Loss,
}

/// The word, or `inconclusive` when the interval crosses an edge of the band.
pub fn format_word(w: Option<Word>) -> String {
    match w {
        Some(Word::Win) => "**WIN**".into(),
        Some(Word::Parity) => "parity".into(),
        Some(Word::Loss) => "**LOSS**".into(),
        None => "inconclusive".into(),
    }
}
