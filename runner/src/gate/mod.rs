//! Gates decide the verdict from the measurements. A built-in gate is an
//! expression evaluated in every cell it covers: it passes only if it holds in
//! all of them, and it is incomplete (never passed) when a cell lacks what it
//! needs.

pub mod expr;

use indexmap::IndexMap;

use crate::results::{CellResult, GateOutcome, GateResult};
use crate::spec::GateSpec;
use expr::{CmpOp, Expr, Metric, MetricRef, Operand};

pub fn evaluate(gates: &IndexMap<String, GateSpec>, cells: &[CellResult]) -> Vec<GateResult> {
    gates.iter().map(|(name, gate)| evaluate_one(name, gate, cells)).collect()
}

fn evaluate_one(name: &str, gate: &GateSpec, cells: &[CellResult]) -> GateResult {
    let mut result = GateResult { name: name.to_string(), expr: gate.expr.clone(), result: GateOutcome::Incomplete, evidence: String::new() };
    let expr = match expr::parse(&gate.expr) {
        Ok(e) => e,
        Err(e) => {
            result.evidence = format!("cannot parse: {e}");
            return result;
        }
    };
    let covered: Vec<&CellResult> = cells
        .iter()
        .filter(|c| gate.scenario.as_ref().is_none_or(|s| &c.scenario == s))
        .filter(|c| gate.profile.as_ref().is_none_or(|p| &c.profile == p))
        .filter(|c| c.stats.is_some())
        .collect();
    if covered.is_empty() {
        result.evidence = "no measured cell to evaluate it on".into();
        return result;
    }
    let mut failures = Vec::new();
    let mut missing = Vec::new();
    let mut worst: Option<(f64, String)> = None;
    for cell in &covered {
        match eval(&expr, cell) {
            Ok((true, _)) => {
                if let Expr::Compare(Operand::Metric(m), op, _) = &expr {
                    if let Some(v) = metric_value(m, cell).ok().flatten() {
                        let worse = |old: f64| match op {
                            CmpOp::Lt | CmpOp::Le => v > old,
                            CmpOp::Gt | CmpOp::Ge => v < old,
                            _ => false,
                        };
                        if worst.as_ref().is_none_or(|(old, _)| worse(*old)) {
                            worst = Some((v, format!("{} = {} in {}", describe(m), format_value(m.metric, v), cell.label())));
                        }
                    }
                }
            }
            Ok((false, evidence)) => failures.push(format!("{} in {}", evidence.join(", "), cell.label())),
            Err(why) => missing.push(format!("{}: {why}", cell.label())),
        }
    }
    let n = covered.len();
    if !failures.is_empty() {
        result.result = GateOutcome::Fail;
        result.evidence = format!("fails in {} of {n} cells: {}", failures.len(), abbreviate(&failures));
    } else if !missing.is_empty() {
        result.evidence = format!("cannot be evaluated in {} of {n} cells: {}", missing.len(), abbreviate(&missing));
    } else {
        result.result = GateOutcome::Pass;
        result.evidence = match worst {
            Some((_, w)) => format!("holds in all {n} cells; worst: {w}"),
            None => format!("holds in all {n} cells"),
        };
    }
    result
}

fn abbreviate(items: &[String]) -> String {
    let mut text = items.iter().take(3).cloned().collect::<Vec<_>>().join("; ");
    if items.len() > 3 {
        text.push_str(&format!("; and {} more", items.len() - 3));
    }
    text
}

/// Whether the expression holds in a cell, with the values it compared; an
/// error when a value it needs was not measured.
fn eval(expr: &Expr, cell: &CellResult) -> Result<(bool, Vec<String>), String> {
    match expr {
        Expr::And(a, b) => {
            let (x, mut ex) = eval(a, cell)?;
            let (y, ey) = eval(b, cell)?;
            ex.extend(ey);
            Ok((x && y, ex))
        }
        Expr::Or(a, b) => {
            let (x, mut ex) = eval(a, cell)?;
            let (y, ey) = eval(b, cell)?;
            ex.extend(ey);
            Ok((x || y, ex))
        }
        Expr::Compare(l, op, r) => {
            let (lv, le) = operand_value(l, cell)?;
            let (rv, re) = operand_value(r, cell)?;
            Ok((op.holds(lv, rv), vec![format!("{le} {op} {re}")]))
        }
    }
}

fn operand_value(o: &Operand, cell: &CellResult) -> Result<(f64, String), String> {
    match o {
        Operand::Number { value, is_duration } => Ok((
            *value,
            if *is_duration { format_value(Metric::MaxLatency, *value) } else { trim(*value) },
        )),
        Operand::Metric(m) => {
            let v = metric_value(m, cell)?.ok_or_else(|| format!("{} was not measured", describe(m)))?;
            Ok((v, format!("{} = {}", describe(m), format_value(m.metric, v))))
        }
    }
}

/// `Ok(None)`: the cell has no such measurement (e.g. no successful op of the kind).
fn metric_value(m: &MetricRef, cell: &CellResult) -> Result<Option<f64>, String> {
    let stats = cell.stats.as_ref().ok_or("the cell has no measurements")?;
    let ops: Vec<&crate::metrics::OpStats> = match m.op {
        Some(kind) => vec![stats
            .per_op
            .get(kind.as_str())
            .ok_or_else(|| format!("the workload `{}` has no {} ops", cell.workload, kind.as_str()))?],
        None => stats.per_op.values().collect(),
    };
    let latency = |pick: fn(&crate::metrics::LatencyStats) -> f64| -> Option<f64> {
        // Without an op kind, the worst op kind counts; any kind with no
        // successful op leaves the value unmeasured.
        ops.iter().map(|o| o.latency_ms.as_ref().map(pick)).try_fold(f64::MIN, |acc, v| v.map(|v| acc.max(v)))
    };
    let sum = |f: fn(&crate::metrics::OpStats) -> u64| ops.iter().map(|o| f(o)).sum::<u64>() as f64;
    Ok(match m.metric {
        Metric::Percentile(q) => latency(match q {
            50.0 => |l| l.p50,
            95.0 => |l| l.p95,
            99.0 => |l| l.p99,
            _ => |l| l.p999,
        }),
        Metric::MaxLatency => latency(|l| l.max),
        Metric::MeanLatency => latency(|l| l.mean),
        Metric::Throughput => Some(ops.iter().map(|o| o.throughput).sum()),
        Metric::Ops => Some(sum(|o| o.ok + o.failed)),
        Metric::Errors => Some(sum(|o| o.failed)),
        Metric::ErrorRate => {
            let total = sum(|o| o.ok + o.failed);
            (total > 0.0).then(|| sum(|o| o.failed) / total)
        }
        Metric::DeadlineErrors => Some(sum(|o| o.errors.deadline)),
        Metric::ConnectionErrors => Some(sum(|o| o.errors.connection)),
        Metric::ServerErrors => Some(sum(|o| o.errors.server)),
        Metric::Hangs => Some(sum(|o| o.errors.hang)),
        Metric::OverDeadline => Some(sum(|o| o.over_deadline)),
        Metric::ScheduleLag => Some(
            stats
                .schedule_lag_ms
                .as_ref()
                .ok_or("schedule_lag applies only to open-loop profiles")?
                .p99,
        ),
    })
}

fn describe(m: &MetricRef) -> String {
    let name = match m.metric {
        Metric::Percentile(q) if q == 99.9 => "p999".to_string(),
        Metric::Percentile(q) => format!("p{q}"),
        Metric::MaxLatency => "max".into(),
        Metric::MeanLatency => "mean".into(),
        Metric::Throughput => "throughput".into(),
        Metric::Ops => "ops".into(),
        Metric::Errors => "errors".into(),
        Metric::ErrorRate => "error_rate".into(),
        Metric::DeadlineErrors => "deadline_errors".into(),
        Metric::ConnectionErrors => "connection_errors".into(),
        Metric::ServerErrors => "server_errors".into(),
        Metric::Hangs => "hangs".into(),
        Metric::OverDeadline => "over_deadline".into(),
        Metric::ScheduleLag => "schedule_lag".into(),
    };
    match m.op {
        Some(op) => format!("{name}({})", op.as_str()),
        None => name,
    }
}

fn format_value(metric: Metric, v: f64) -> String {
    if metric.is_duration() {
        crate::spec::units::format_duration(std::time::Duration::from_secs_f64(v.max(0.0) / 1e3))
    } else if metric == Metric::Throughput {
        format!("{v:.0}/s")
    } else if metric == Metric::ErrorRate {
        format!("{}%", trim(v * 100.0))
    } else {
        trim(v)
    }
}

fn trim(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}").trim_end_matches('0').trim_end_matches('.').to_string()
    }
}
