//! A gate metric as a type: the row every metric is (its name, unit,
//! arguments, what it reads and how its value comes out of a cell), and a
//! reference to one as a gate writes it (`p99(get, after: crash)`). The
//! table of the built-in rows and the parser are gate/'s; a checker's own
//! rows are its (checkers.rs). Kept apart from both, so each can name the
//! type without the other.

use std::fmt;
use std::time::Duration;

use faultline_model::format::format_decimal;
use faultline_model::ops::OpKind;
use faultline_model::results::CellResult;
use faultline_model::stats::{CellStats, Side};
use faultline_model::units::format_duration;

/// One gate metric.
pub struct GateMetric {
    /// As gates write it: `p99`, `denied_window`.
    pub name: &'static str,
    /// Other spellings the parser takes for it: `p99.9` for `p999`.
    pub aliases: &'static [&'static str],
    /// What it means, as docs/spec.md's table of metrics says it (Markdown).
    pub description: &'static str,
    pub unit: Unit,
    pub args: Args,
    pub reads: Reads,
    /// Its value in a cell that has measurements.
    pub value: fn(&MetricRef, &CellResult, &CellStats) -> Value,
}

/// A metric's value in a cell: `Ok(None)` when the cell has no such
/// measurement (e.g. no successful op of the kind), an error saying why
/// when it cannot have one.
pub type Value = Result<Option<f64>, String>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A duration in milliseconds, compared with a duration (`30ms`).
    Ms,
    Count,
    /// Ops per second.
    PerSecond,
    /// A share from 0 to 1, which a limit may write as a percentage.
    Share,
    /// A condition of its own (`only(200, 503)`), not compared: it holds
    /// when its count of calls is 0.
    Condition,
}

/// What a metric takes in parentheses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Args {
    /// Nothing: `schedule_lag`.
    None,
    /// Optionally an op kind: `errors(set)`.
    Op,
    /// Optionally an op kind, and a window around a fault or a stage:
    /// `p99(get, after: crash)`, `p99(get, stage: peak)`.
    OpOrWindow,
    /// Optionally a stage: `unsent(stage: peak)`.
    Stage,
    /// A fault, then optionally an op kind: `denied_window(crash, set)`.
    Fault,
    /// Status classes: `count(503, timeout)`.
    Statuses,
}

/// What a metric's value comes from, where that matters beyond the cell's
/// own measurements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reads {
    /// What the cell measured.
    Measurements,
    /// How much of an open loop's schedule was sent: a gate on it judges an
    /// under-sent cell itself.
    Schedule,
    /// A checker's result: the spec must run the checker of that name.
    Checker(&'static str),
    /// A capacity search's result: the scenario must have `capacity:`.
    Capacity,
    /// What fan-out subscribers received: a scenario it covers must fan out.
    Fanout,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MetricRef {
    pub metric: &'static GateMetric,
    /// Restricts the metric to one op kind, e.g. `p99(get)`.
    pub op: Option<OpKind>,
    /// The fault a fault metric is about, e.g. `denied_window(primary-killed)`,
    /// or the fault a latency window is taken around.
    pub fault: Option<String>,
    /// A latency metric over a window around `fault`, e.g. `p99(get, after: primary-killed)`.
    pub window: Option<Side>,
    /// The status classes `count` and `only` name, e.g. `503`, `timeout`.
    pub statuses: Vec<String>,
    /// The stage (of an open loop in stages or a closed loop in steps) it is taken over, e.g. `p99(get, stage: peak)`.
    pub stage: Option<String>,
}

// Rows are told apart by name (unique, a test holds it): their value fns
// cannot be compared.
impl PartialEq for GateMetric {
    fn eq(&self, other: &GateMetric) -> bool {
        self.name == other.name
    }
}

impl fmt::Debug for GateMetric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GateMetric({})", self.name)
    }
}

impl Unit {
    /// As docs/spec.md's table of metrics names it.
    pub fn name(self) -> &'static str {
        match self {
            Unit::Ms => "duration (ms)",
            Unit::Count => "count",
            Unit::PerSecond => "ops/s",
            Unit::Share => "fraction 0–1",
            Unit::Condition => "condition",
        }
    }

    /// A value as evidence reads it: `40ms`, `500/s`, `1.5%`, `12`.
    pub fn format(self, v: f64) -> String {
        if v == f64::INFINITY {
            return "unbounded (not recovered by the end of the cell)".into();
        }
        match self {
            Unit::Ms => format_duration(Duration::from_secs_f64(v.max(0.0) / 1e3)),
            Unit::PerSecond => format!("{v:.0}/s"),
            Unit::Share => format!("{}%", format_decimal(v * 100.0)),
            Unit::Count | Unit::Condition => format_decimal(v),
        }
    }
}

impl MetricRef {
    /// Its value in a cell; see [`Value`].
    pub fn value(&self, cell: &CellResult) -> Value {
        let stats = cell.stats.as_ref().ok_or("the cell has no measurements")?;
        (self.metric.value)(self, cell, stats)
    }

    /// `p99(get) = 40ms`.
    pub fn reading(&self, v: f64) -> String {
        format!("{self} = {}", self.metric.unit.format(v))
    }
}

/// As evidence names it: `p99(get, after: crash)`, `count(503)`.
impl fmt::Display for MetricRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match (self.metric.args, self.metric.unit) {
            (Args::Statuses, Unit::Condition) => return write!(f, "calls outside {}", self.statuses.join(", ")),
            (Args::Statuses, _) => return write!(f, "{}({})", self.metric.name, self.statuses.join(", ")),
            _ => self.metric.name,
        };
        if let Some(stage) = &self.stage {
            return match self.op {
                Some(op) => write!(f, "{name}({}, stage: {stage})", op.as_str()),
                None => write!(f, "{name}(stage: {stage})"),
            };
        }
        match (self.op, &self.fault, self.window) {
            (Some(op), Some(fault), Some(side)) => write!(f, "{name}({}, {}: {fault})", op.as_str(), side.as_str()),
            (None, Some(fault), Some(side)) => write!(f, "{name}({}: {fault})", side.as_str()),
            (Some(op), Some(fault), None) => write!(f, "{name}({fault}, {})", op.as_str()),
            (Some(op), _, _) => write!(f, "{name}({})", op.as_str()),
            (None, Some(fault), None) => write!(f, "{name}({fault})"),
            (None, None, _) => f.write_str(name),
        }
    }
}
