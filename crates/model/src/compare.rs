//! The vocabulary of comparisons: which cells compare (a [`Group`]), the
//! values a repeat is compared on ([`RepeatValues`], [`Measure`]) and a
//! ratio's confidence [`Interval`]. The bootstrap and the verdicts are the
//! runner's.

use indexmap::IndexMap;

use crate::labels::matrix_suffix;
use crate::results::{CellResult, CellStatus};

/// Cells that may be compared with each other: one scenario, matrix point
/// and profile; the variants and repeats inside differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub scenario: String,
    pub matrix: IndexMap<String, String>,
    pub profile: String,
}

impl Group {
    pub fn of(cell: &CellResult) -> Group {
        Group { scenario: cell.scenario.clone(), matrix: cell.matrix.clone(), profile: cell.profile.clone() }
    }

    /// `scenario[fsync=always,depth=1]/profile`.
    pub fn label(&self) -> String {
        format!("{}{}/{}", self.scenario, matrix_suffix(&self.matrix), self.profile)
    }
}

/// The measured values of one completed repeat that ratios are taken of.
#[derive(Debug, Clone, Copy)]
pub struct RepeatValues {
    pub repeat: u32,
    pub throughput: f64,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    /// A capacity search's capacity, where it is the target's own number.
    pub capacity: Option<f64>,
    /// Fan-out cells: deliveries per second.
    pub delivered_rate: Option<f64>,
    /// Failed ops over all ops ended (none when none ended).
    pub error_share: Option<f64>,
}

impl RepeatValues {
    /// None for a cell that did not complete: its numbers cover part of a window.
    pub fn of(cell: &CellResult) -> Option<RepeatValues> {
        let stats = cell.stats.as_ref().filter(|_| cell.status == CellStatus::Completed)?;
        // The worst op kind, as the latency gates take it.
        let worst = |pick: fn(&crate::stats::LatencyStats) -> f64| {
            stats.per_op.values().filter_map(|o| o.latency_ms.as_ref().map(pick)).reduce(f64::max)
        };
        Some(RepeatValues {
            repeat: cell.repeat,
            throughput: stats.throughput,
            p50_ms: worst(|l| l.p50),
            p99_ms: worst(|l| l.p99),
            capacity: cell.capacity.as_ref().and_then(|c| c.target_capacity()),
            delivered_rate: stats.fanout.as_ref().map(|f| f.delivered_per_s),
            error_share: (stats.ok + stats.failed > 0).then(|| stats.failed as f64 / (stats.ok + stats.failed) as f64),
        })
    }
}

/// Which of a repeat's values a ratio is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    Throughput,
    P50,
    P99,
    /// A capacity search's capacity.
    Capacity,
    /// Fan-out deliveries per second.
    DeliveredRate,
}

impl Measure {
    pub fn of(self, r: &RepeatValues) -> Option<f64> {
        match self {
            Measure::Throughput => Some(r.throughput),
            Measure::P50 => r.p50_ms,
            Measure::P99 => r.p99_ms,
            Measure::Capacity => r.capacity,
            Measure::DeliveredRate => r.delivered_rate,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Measure::Throughput => "throughput",
            Measure::P50 => "p50",
            Measure::P99 => "p99",
            Measure::Capacity => "capacity",
            Measure::DeliveredRate => "delivered_rate",
        }
    }

    pub fn from_name(name: &str) -> Option<Measure> {
        [Measure::Throughput, Measure::P50, Measure::P99, Measure::Capacity, Measure::DeliveredRate]
            .into_iter()
            .find(|m| m.name() == name)
    }
}
