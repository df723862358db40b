//! The gate metrics, one row each: its name, what it means, its unit, the
//! arguments it takes, what it reads and how its value comes out of a cell.
//! The parser and its hints, the spec's validation, the evidence's wording
//! and numbers, the evaluator and docs/spec.md's table of metrics (a test
//! holds it equal) all read this table, so a new metric is one row here plus
//! the code of its value.

use faultline_model::results::CellResult;
use faultline_model::stats::{status_class, CellStats, FanoutStats, FaultImpact, LatencyStats, OpStats, StageStats};

use crate::checkers::CheckerInfo;
use crate::metric::{Args, GateMetric, MetricRef, Reads, Unit, Value};

/// Every gate metric, in the order the docs and the parser's hints list them.
pub static METRICS: &[GateMetric] = &[
    GateMetric {
        name: "p50",
        aliases: &[],
        description: PERCENTILE,
        unit: Unit::Ms,
        args: Args::OpOrWindow,
        reads: Reads::Measurements,
        value: |m, cell, stats| latency(m, cell, stats, |l| l.p50),
    },
    GateMetric {
        name: "p95",
        aliases: &[],
        description: PERCENTILE,
        unit: Unit::Ms,
        args: Args::OpOrWindow,
        reads: Reads::Measurements,
        value: |m, cell, stats| latency(m, cell, stats, |l| l.p95),
    },
    GateMetric {
        name: "p99",
        aliases: &[],
        description: PERCENTILE,
        unit: Unit::Ms,
        args: Args::OpOrWindow,
        reads: Reads::Measurements,
        value: |m, cell, stats| latency(m, cell, stats, |l| l.p99),
    },
    GateMetric {
        name: "p999",
        aliases: &["p99.9"],
        description: PERCENTILE,
        unit: Unit::Ms,
        args: Args::OpOrWindow,
        reads: Reads::Measurements,
        value: |m, cell, stats| latency(m, cell, stats, |l| l.p999),
    },
    GateMetric {
        name: "max",
        aliases: &[],
        description: "Slowest successful op.",
        unit: Unit::Ms,
        args: Args::OpOrWindow,
        reads: Reads::Measurements,
        value: |m, cell, stats| latency(m, cell, stats, |l| l.max),
    },
    GateMetric {
        name: "mean",
        aliases: &[],
        description: "Mean latency of successful ops.",
        unit: Unit::Ms,
        args: Args::OpOrWindow,
        reads: Reads::Measurements,
        value: |m, cell, stats| latency(m, cell, stats, |l| l.mean),
    },
    GateMetric {
        name: "throughput",
        aliases: &[],
        description: "Successful ops per second over the measured window.",
        unit: Unit::PerSecond,
        args: Args::Op,
        reads: Reads::Measurements,
        value: |m, cell, stats| Ok(Some(ops(m, cell, stats)?.iter().map(|o| o.throughput).sum())),
    },
    GateMetric {
        name: "ops",
        aliases: &[],
        description: "Ops counted in the window, successful and failed.",
        unit: Unit::Count,
        args: Args::Op,
        reads: Reads::Measurements,
        value: |m, cell, stats| sum(m, cell, stats, |o| o.ok + o.failed),
    },
    GateMetric {
        name: "errors",
        aliases: &[],
        description: "Failed ops, all classes.",
        unit: Unit::Count,
        args: Args::Op,
        reads: Reads::Measurements,
        value: |m, cell, stats| sum(m, cell, stats, |o| o.failed),
    },
    GateMetric {
        name: "error_rate",
        aliases: &[],
        description: "`errors / ops`.",
        unit: Unit::Share,
        args: Args::Op,
        reads: Reads::Measurements,
        value: |m, cell, stats| {
            let ops = ops(m, cell, stats)?;
            let (failed, total) = ops.iter().fold((0, 0), |(f, t), o| (f + o.failed, t + o.ok + o.failed));
            Ok((total > 0).then(|| failed as f64 / total as f64))
        },
    },
    GateMetric {
        name: "deadline_errors",
        aliases: &[],
        description: "Deadline errors.",
        unit: Unit::Count,
        args: Args::Op,
        reads: Reads::Measurements,
        value: |m, cell, stats| sum(m, cell, stats, |o| o.errors.deadline),
    },
    GateMetric {
        name: "connection_errors",
        aliases: &[],
        description: "Connection errors.",
        unit: Unit::Count,
        args: Args::Op,
        reads: Reads::Measurements,
        value: |m, cell, stats| sum(m, cell, stats, |o| o.errors.connection),
    },
    GateMetric {
        name: "server_errors",
        aliases: &[],
        description: "Server errors.",
        unit: Unit::Count,
        args: Args::Op,
        reads: Reads::Measurements,
        value: |m, cell, stats| sum(m, cell, stats, |o| o.errors.server),
    },
    GateMetric {
        name: "hangs",
        aliases: &[],
        description: "Ops abandoned by the hang watchdog.",
        unit: Unit::Count,
        args: Args::Op,
        reads: Reads::Measurements,
        value: |m, cell, stats| sum(m, cell, stats, |o| o.errors.hang),
    },
    GateMetric {
        name: "over_deadline",
        aliases: &[],
        description: "Ops that ended more than `over_deadline_after` after their deadline (hangs not included).",
        unit: Unit::Count,
        args: Args::Op,
        reads: Reads::Measurements,
        value: |m, cell, stats| sum(m, cell, stats, |o| o.over_deadline),
    },
    GateMetric {
        name: "schedule_lag",
        aliases: &[],
        description: "Open loop only: 99th percentile of how late ops started against their due time.",
        unit: Unit::Ms,
        args: Args::None,
        reads: Reads::Measurements,
        value: |_, _, stats| {
            Ok(Some(stats.schedule_lag_ms.as_ref().ok_or("schedule_lag applies only to open-loop profiles")?.p99))
        },
    },
    GateMetric {
        name: "unsent",
        aliases: &[],
        description: "Open loop: ops due in the window that were never sent (0 in a closed loop, which has no schedule). `unsent(stage: NAME)`: those due in one stage.",
        unit: Unit::Count,
        args: Args::Stage,
        reads: Reads::Schedule,
        // A closed loop has no schedule, so it owes nothing.
        value: |m, _, stats| match &m.stage {
            Some(_) => Ok(Some(stage(m, stats)?.unsent as f64)),
            None => Ok(Some(stats.open_loop.map_or(0.0, |o| o.unsent as f64))),
        },
    },
    GateMetric {
        name: "achieved_rate",
        aliases: &[],
        description: "Ops sent per second of the window of an open loop, next to the asked `rate`. `achieved_rate(stage: NAME)`: per second of one stage, of an open loop or a closed loop in steps.",
        unit: Unit::PerSecond,
        args: Args::Stage,
        reads: Reads::Schedule,
        value: |m, _, stats| match &m.stage {
            Some(_) => Ok(Some(stage(m, stats)?.achieved_rate)),
            None => {
                Ok(Some(stats.open_loop.ok_or("achieved_rate applies only to open-loop profiles")?.achieved_rate))
            }
        },
    },
    GateMetric {
        name: "capacity",
        aliases: &[],
        description: "A scenario with `capacity:`: the highest open-loop rate, ops per second, at which its SLO held in its step and in every confirmation (0 when it held at no rate tried). Where the search only bounds it (out of steps, client-bound, the range's top or bottom), a gate on it is judged at both ends of that interval and INCOMPLETE where they disagree.",
        unit: Unit::PerSecond,
        args: Args::None,
        reads: Reads::Capacity,
        value: |_, cell, _| {
            let search = cell.capacity.as_ref().ok_or("capacity applies only to scenarios with `capacity:`")?;
            Ok(Some(search.capacity.unwrap_or(0.0)))
        },
    },
    GateMetric {
        name: "count",
        aliases: &[],
        description: "Calls whose status class is one of those named: an HTTP status (`200` counts the successes, `503` the sheds), `timeout` (deadline errors, hangs, the SDK's timeouts), `network`, `error` (a server error with no status: another kind's, DynamoDB's `UnprocessedItems` and `UnreadableResponse`), or an error type as the server names it (`ConditionalCheckFailedException`, `TransactionConflictException`). `count(503)`. Unmeasured in a cell with no call.",
        unit: Unit::Count,
        args: Args::Statuses,
        reads: Reads::Measurements,
        value: |m, _, stats| Ok(calls(m, stats, true)),
    },
    GateMetric {
        name: "only",
        aliases: &[],
        description: "Holds when no call had any other status class or type: a condition of its own, `only(200, 503) and hangs == 0`, `only(200, ConditionalCheckFailedException, 503)`.",
        unit: Unit::Condition,
        args: Args::Statuses,
        reads: Reads::Measurements,
        value: |m, _, stats| Ok(calls(m, stats, false)),
    },
    GateMetric {
        name: "denied_window",
        aliases: &[],
        description: "Until the last failed op after the fault ended; 0 when nothing failed; **unbounded** when the target had not recovered (failures, and no success after the last of them, up to the end of the cell): every upper bound on it fails. Over all ops together; `denied_window(FAULT, OP)` is one op kind's own (e.g. `set`), on that kind's ops alone.",
        unit: Unit::Ms,
        args: Args::Fault,
        reads: Reads::Measurements,
        // Nothing failed: no window at all.
        value: |m, cell, stats| impact(m, cell, stats).map(|i| bounded(i, Some(i.denied_window_s.unwrap_or(0.0)))),
    },
    GateMetric {
        name: "first_success",
        aliases: &[],
        description: "The first success after the last failure (after the fault, if none failed); unbounded when not recovered. `first_success(FAULT, OP)`: of that kind, after that kind's last failure.",
        unit: Unit::Ms,
        args: Args::Fault,
        reads: Reads::Measurements,
        value: |m, cell, stats| impact(m, cell, stats).map(|i| bounded(i, i.first_success_s)),
    },
    GateMetric {
        name: "recovered",
        aliases: &[],
        description: "When a 1 s stretch first reached 90% of the throughput before the fault; unmeasured if never within the cell; unbounded when not recovered. `recovered(FAULT, OP)`: that kind's throughput.",
        unit: Unit::Ms,
        args: Args::Fault,
        reads: Reads::Measurements,
        value: |m, cell, stats| impact(m, cell, stats).map(|i| bounded(i, i.recovered_s)),
    },
    GateMetric {
        name: "failed_after",
        aliases: &[],
        description: "Failed ops between the fault and the next one; for the last fault, every failure to the end of the cell, also of ops that ended after the window while the cell waited for them. `failed_after(FAULT, OP)`: that kind's.",
        unit: Unit::Count,
        args: Args::Fault,
        reads: Reads::Measurements,
        value: |m, cell, stats| impact(m, cell, stats).map(|i| Some(i.failed as f64)),
    },
    GateMetric {
        name: "non_primary_reads",
        aliases: &[],
        description: "Reads answered by a member the role timeline shows not primary (the member that answered, where the read names it; else while no member was primary), under a read concern that requires the primary (MongoDB `linearizable`); see [faults](#faults). Unmeasured in a cell whose roles were not sampled (a kind whose role faultline cannot ask) or that had no successful read; a gate on it over reads whose read concern does not require the primary is unmeasured, with the read concern named.",
        unit: Unit::Count,
        args: Args::None,
        reads: Reads::Measurements,
        value: |_, cell, _| non_primary_reads(cell),
    },
    GateMetric {
        name: "published",
        aliases: &[],
        description: "Fan-out: messages published in the window (their PUBLISH acknowledged).",
        unit: Unit::Count,
        args: Args::None,
        reads: Reads::Fanout,
        value: |_, _, stats| fanout(stats).map(|f| Some(f.published as f64)),
    },
    GateMetric {
        name: "delivered",
        aliases: &[],
        description: "Fan-out: deliveries made, the distinct messages of the window each subscriber received, summed over the subscribers.",
        unit: Unit::Count,
        args: Args::None,
        reads: Reads::Fanout,
        value: |_, _, stats| fanout(stats).map(|f| Some(f.delivered as f64)),
    },
    GateMetric {
        name: "delivered_rate",
        aliases: &[],
        description: "Fan-out: `delivered` per second of the measured window.",
        unit: Unit::PerSecond,
        args: Args::None,
        reads: Reads::Fanout,
        value: |_, _, stats| fanout(stats).map(|f| Some(f.delivered_per_s)),
    },
    GateMetric {
        name: "drops",
        aliases: &[],
        description: "Fan-out: deliveries owed and not received by the end of the drain: per subscriber, the messages published on its channels in the window minus the distinct ones it received, summed.",
        unit: Unit::Count,
        args: Args::None,
        reads: Reads::Fanout,
        value: |_, _, stats| fanout(stats).map(|f| Some(f.drops as f64)),
    },
    GateMetric {
        name: "duplicates",
        aliases: &[],
        description: "Fan-out: messages a subscriber received again.",
        unit: Unit::Count,
        args: Args::None,
        reads: Reads::Fanout,
        value: |_, _, stats| fanout(stats).map(|f| Some(f.duplicates as f64)),
    },
    GateMetric {
        name: "reordered",
        aliases: &[],
        description: "Fan-out: messages a subscriber received after a later one from the same publisher on the same channel.",
        unit: Unit::Count,
        args: Args::None,
        reads: Reads::Fanout,
        value: |_, _, stats| fanout(stats).map(|f| Some(f.reordered as f64)),
    },
    GateMetric {
        name: "delivery_p50",
        aliases: &[],
        description: "Fan-out: 50th percentile of delivery latency, from PUBLISH to receipt.",
        unit: Unit::Ms,
        args: Args::None,
        reads: Reads::Fanout,
        value: |_, _, stats| delivery(stats, |l| l.p50),
    },
    GateMetric {
        name: "delivery_p99",
        aliases: &[],
        description: "Fan-out: 99th percentile of delivery latency, from PUBLISH to receipt.",
        unit: Unit::Ms,
        args: Args::None,
        reads: Reads::Fanout,
        value: |_, _, stats| delivery(stats, |l| l.p99),
    },
    GateMetric {
        name: "delivery_p999",
        aliases: &[],
        description: "Fan-out: 99.9th percentile of delivery latency, from PUBLISH to receipt.",
        unit: Unit::Ms,
        args: Args::None,
        reads: Reads::Fanout,
        value: |_, _, stats| delivery(stats, |l| l.p999),
    },
    GateMetric {
        name: "delivery_max",
        aliases: &[],
        description: "Fan-out: the slowest delivery.",
        unit: Unit::Ms,
        args: Args::None,
        reads: Reads::Fanout,
        value: |_, _, stats| delivery(stats, |l| l.max),
    },
];

const PERCENTILE: &str = "Latency percentile of successful ops.";

impl GateMetric {
    /// The metric a gate names, by its name or an alias: a row of
    /// [`METRICS`] or one a checker of the build provides.
    pub fn named(name: &str, checkers: &[&'static dyn CheckerInfo]) -> Option<&'static GateMetric> {
        all(checkers).find(|m| m.name == name || m.aliases.contains(&name))
    }

    /// How the parser's hint lists it: `errors`, `denied_window(FAULT[, OP])`.
    fn form(&self) -> String {
        match (self.args, self.unit) {
            (Args::Fault, _) => format!("{}(FAULT[, OP])", self.name),
            (Args::Statuses, Unit::Condition) => format!("{}(STATUS, …)", self.name),
            (Args::Statuses, _) => format!("{}(STATUS)", self.name),
            _ => self.name.to_string(),
        }
    }
}

/// Every metric: the table's, then each checker's.
pub fn all<'a>(checkers: &'a [&'static dyn CheckerInfo]) -> impl Iterator<Item = &'static GateMetric> + 'a {
    METRICS.iter().chain(checkers.iter().flat_map(|c| c.metrics()))
}

/// Every form a gate may name, for the hint after an unknown metric.
pub fn known(checkers: &[&'static dyn CheckerInfo]) -> String {
    let forms: Vec<String> = all(checkers).map(GateMetric::form).collect();
    format!(
        "ratio(throughput|p50|p99|delivered_rate, TARGET/BASELINE), ratio_low(…), ratio_high(…), {}; \
         latency over a window around a fault: p99(get, after: FAULT), max(before: FAULT), mean(during: FAULT); \
         over a stage: p99(get, stage: NAME), unsent(stage: NAME)",
        forms.join(", ")
    )
}

/// The metrics that take a window around a fault: `p50, p95, … and mean`.
pub fn windowed() -> String {
    listed(METRICS.iter().filter(|m| m.args == Args::OpOrWindow).map(|m| m.name).collect())
}

/// The metrics that take a stage: the windowed ones and the schedule's.
pub fn staged() -> String {
    listed(METRICS.iter().filter(|m| matches!(m.args, Args::OpOrWindow | Args::Stage)).map(|m| m.name).collect())
}

/// `a, b and c`.
fn listed(names: Vec<&str>) -> String {
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => names.join(""),
    }
}

/// The op kinds a metric covers: the one it names, or all.
fn ops<'a>(m: &MetricRef, cell: &CellResult, stats: &'a CellStats) -> Result<Vec<&'a OpStats>, String> {
    Ok(match m.op {
        Some(kind) => vec![stats
            .per_op
            .get(kind.as_str())
            .ok_or_else(|| format!("the workload `{}` has no {} ops", cell.workload, kind.as_str()))?],
        None => stats.per_op.values().collect(),
    })
}

/// A count summed over the op kinds covered.
fn sum(m: &MetricRef, cell: &CellResult, stats: &CellStats, count: fn(&OpStats) -> u64) -> Value {
    Ok(Some(ops(m, cell, stats)?.iter().map(|o| count(o)).sum::<u64>() as f64))
}

/// A latency over the op kinds covered, or over a window around a fault:
/// the worst kind counts, and a kind with no successful op (in the window)
/// leaves the value unmeasured.
fn latency(m: &MetricRef, cell: &CellResult, stats: &CellStats, pick: fn(&LatencyStats) -> f64) -> Value {
    let latencies: Vec<Option<&LatencyStats>> = match (m.window, &m.fault) {
        _ if m.stage.is_some() => {
            let stage = stage(m, stats)?;
            match m.op {
                Some(kind) => vec![stage
                    .per_op
                    .get(kind.as_str())
                    .ok_or_else(|| format!("the workload has no {} ops", kind.as_str()))?
                    .as_ref()],
                None => stage.per_op.values().map(Option::as_ref).collect(),
            }
        }
        (Some(side), Some(fault)) => {
            let window =
                stats.window_latency.iter().find(|w| &w.fault == fault && w.window == side).ok_or_else(|| {
                    format!("no fault named `{fault}` was applied, confirmed and (where it heals) healed in this cell")
                })?;
            match m.op {
                Some(kind) => vec![window
                    .per_op
                    .get(kind.as_str())
                    .ok_or_else(|| format!("the workload has no {} ops", kind.as_str()))?
                    .as_ref()],
                None => window.per_op.values().map(Option::as_ref).collect(),
            }
        }
        _ => ops(m, cell, stats)?.into_iter().map(|o| o.latency_ms.as_ref()).collect(),
    };
    Ok(latencies.into_iter().try_fold(f64::MIN, |worst, l| l.map(|l| worst.max(pick(l)))))
}

/// The stage the metric names, in a cell whose profile has it.
fn stage<'a>(m: &MetricRef, stats: &'a CellStats) -> Result<&'a StageStats, String> {
    let name = m.stage.as_deref().unwrap_or_default();
    stats.stages.iter().find(|s| s.name == name).ok_or_else(|| match stats.stages.is_empty() {
        true => format!("no stage named `{name}`: the cell's profile has no stages"),
        false => {
            let names: Vec<&str> = stats.stages.iter().map(|s| s.name.as_str()).collect();
            format!("no stage named `{name}` in this cell (its stages: {})", names.join(", "))
        }
    })
}

/// The impact of the fault the metric names: that op kind's own when it
/// names one, all ops together otherwise.
fn impact<'a>(m: &MetricRef, cell: &CellResult, stats: &'a CellStats) -> Result<&'a FaultImpact, String> {
    let name = m.fault.as_deref().unwrap_or_default();
    let whole = stats
        .fault_impact
        .iter()
        .find(|f| f.fault == name)
        .ok_or_else(|| format!("no fault named `{name}` was applied and confirmed in this cell"))?;
    match m.op {
        None => Ok(whole),
        Some(kind) => whole
            .per_op
            .get(kind.as_str())
            .ok_or_else(|| format!("the workload `{}` has no {} ops", cell.workload, kind.as_str())),
    }
}

/// Seconds after the fault, in ms; not recovered by the end of the cell,
/// every bound on it fails.
fn bounded(impact: &FaultImpact, seconds: Option<f64>) -> Option<f64> {
    match impact.not_recovered {
        true => Some(f64::INFINITY),
        false => seconds.map(|s| s * 1e3),
    }
}

/// Calls whose status class is one the metric names (`inside`), or none of
/// them. Successes are class 200; a failure matches a name that is its class
/// (`503`, `timeout`) or its error type (`ConditionalCheckFailedException`).
/// No call at all: nothing says which classes the calls had.
fn calls(m: &MetricRef, stats: &CellStats, inside: bool) -> Option<f64> {
    let named = |n: &str| m.statuses.iter().any(|s| s == n);
    let ok = (stats.ok, named("200"));
    let failures = stats.error_labels.iter().map(|l| {
        let error_type = l.label.rsplit(' ').next().unwrap_or_default();
        (l.count, named(status_class(&l.label)) || named(error_type))
    });
    let calls: Vec<(u64, bool)> = std::iter::once(ok).chain(failures).collect();
    let total: u64 = calls.iter().map(|(n, _)| n).sum();
    (total > 0).then(|| calls.iter().filter(|(_, hit)| *hit == inside).map(|(n, _)| *n).sum::<u64>() as f64)
}

/// A fan-out cell's subscribers' books.
fn fanout(stats: &CellStats) -> Result<&FanoutStats, String> {
    stats
        .fanout
        .as_ref()
        .ok_or_else(|| "the cell's workload has no fan-out (a `fanout` section with `publish` ops)".into())
}

/// A delivery latency; unmeasured when nothing of the window was received.
fn delivery(stats: &CellStats, pick: fn(&LatencyStats) -> f64) -> Value {
    Ok(fanout(stats)?.latency_ms.as_ref().map(pick))
}

/// Reads answered by a member that was not primary, where the read concern
/// needs the primary. No read to judge: unmeasured, not a pass.
fn non_primary_reads(cell: &CellResult) -> Value {
    let reads = cell.non_primary_reads.as_ref().ok_or(
        "no role timeline judged this cell's reads (roles are sampled in cells with faults, or whose read concern requires the primary, on targets whose roles faultline can ask)",
    )?;
    if !reads.requires_primary {
        return Err(format!(
            "the reads were under read concern `{}`, which does not require the primary",
            reads.read_concern
        ));
    }
    Ok((reads.judged > 0).then_some(reads.count as f64))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn every_row_has_a_description_a_unit_and_a_name_of_its_own() {
        let mut names = BTreeSet::new();
        let checkers = &crate::checkers::testing::CHECKERS;
        for m in all(checkers) {
            assert!(!m.description.trim().is_empty(), "{} has no description", m.name);
            assert!(!m.unit.name().is_empty(), "{} has no unit", m.name);
            for name in std::iter::once(&m.name).chain(m.aliases) {
                assert!(names.insert(*name), "`{name}` names two metrics");
                assert_eq!(GateMetric::named(name, checkers), Some(m));
            }
        }
        assert_eq!(windowed(), "p50, p95, p99, p999, max and mean");
        assert_eq!(staged(), "p50, p95, p99, p999, max, mean, unsent and achieved_rate");
    }
}
