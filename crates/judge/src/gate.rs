//! Gates decide the verdict from the measurements. A built-in gate is an
//! expression evaluated in every cell it covers: it passes only if it holds in
//! all of them, and it is incomplete (never passed) when a cell lacks what it
//! needs.
//!
//! No gate passes on load that was never sent: a cell in which no op
//! completed, or whose open loop sent less of its schedule than the profile's
//! `min_sent`, cannot make a gate pass (a failure measured there still
//! fails it). A gate that names faults covers only the cells whose scenario
//! schedules them.

use faultline_spec::gate as expr;
use indexmap::IndexMap;

use expr::{CmpOp, Expr, Operand, RatioBound, RatioRef};
use faultline_model::compare::{Group, Measure};
use faultline_model::format::{format_decimal, thousands};
use faultline_model::results::{CellResult, Comparison, GateCell, GateOutcome, GateResult, Ratio};
use faultline_plugin::{self as plugin, Limits, SpecPlugins};
use faultline_spec::metric::{Reads, Unit};
use faultline_spec::{GateRule, GateSpec, PluginRef, ScenarioSpec};

/// What gates see besides the cells.
pub struct RunContext<'a> {
    pub run_name: &'a str,
    /// The variants' ratios, for ratio gates.
    pub comparisons: &'a [Comparison],
    /// The whole plan ran (no `--quick`, `--only` or interruption).
    pub complete: bool,
    pub plugins: &'a SpecPlugins,
    /// The spec's scenarios: which faults each schedules.
    pub scenarios: &'a [ScenarioSpec],
}

pub fn evaluate(gates: &IndexMap<String, GateSpec>, cells: &[CellResult], run: &RunContext) -> Vec<GateResult> {
    gates.iter().map(|(name, gate)| evaluate_one(name, gate, cells, run)).collect()
}

fn evaluate_one(name: &str, gate: &GateSpec, cells: &[CellResult], run: &RunContext) -> GateResult {
    let mut result = GateResult {
        name: name.to_string(),
        expr: gate.describe(),
        result: GateOutcome::Incomplete,
        evidence: String::new(),
        criteria: Vec::new(),
        informational: gate.informational,
        cells: Vec::new(),
    };
    let in_scope = |c: &&CellResult| {
        gate.scenario.as_ref().is_none_or(|s| &c.scenario == s) && gate.profile.as_ref().is_none_or(|p| &c.profile == p)
    };
    const NOTHING_MEASURED: &str = "no measured cell to evaluate it on";
    let text = match &gate.rule {
        GateRule::Expr(text) => text,
        GateRule::Plugin(p) => {
            // The plugin sees failed cells too (it may judge the plan), but
            // with nothing measured it is not asked: no gate passes on nothing.
            let scoped: Vec<&CellResult> = cells.iter().filter(in_scope).collect();
            if !scoped.iter().any(|c| c.stats.is_some()) {
                result.evidence = NOTHING_MEASURED.into();
                return result;
            }
            let mut result = plugin_gate(result, name, p, &scoped, run);
            // The plugin's word holds for a failure; a pass needs the load asked for.
            let unsent: Vec<String> = scoped
                .iter()
                .filter_map(|c| load_not_sent(c, false).map(|why| format!("{}: {why}", c.label())))
                .collect();
            if result.result == GateOutcome::Pass && !unsent.is_empty() {
                result.result = GateOutcome::Incomplete;
                result.evidence = format!("{}; but not measured as asked in {}", result.evidence, abbreviate(&unsent));
            }
            return result;
        }
    };
    let expr = match expr::parse(text, faultline_check::checker::declared()) {
        Ok(e) => e,
        Err(e) => {
            result.evidence = format!("cannot parse: {e}");
            return result;
        }
    };
    if expr.uses_ratios() {
        let scoped: Vec<&CellResult> = cells.iter().filter(in_scope).collect();
        return ratio_gate(result, &expr, &scoped, run);
    }
    // A gate about faults is about the cells that have them.
    let faults = expr.faults();
    let has_faults = |c: &&CellResult| {
        faults.is_empty()
            || run
                .scenarios
                .iter()
                .find(|s| s.name == c.scenario)
                .is_none_or(|s| faults.iter().all(|f| s.faults.iter().any(|x| &x.name == f)))
    };
    // A gate about capacity is about the cells that searched for it.
    let searched = |c: &&CellResult| !expr.reads(Reads::Capacity) || c.capacity.is_some();
    let covered: Vec<&CellResult> =
        cells.iter().filter(in_scope).filter(has_faults).filter(searched).filter(|c| c.stats.is_some()).collect();
    if covered.is_empty() {
        result.evidence = match faults.is_empty() {
            true => NOTHING_MEASURED.into(),
            false => format!("no measured cell of a scenario with the fault {}", faults.join(", ")),
        };
        return result;
    }
    let reads_schedule = expr.reads_schedule();
    let mut failures = Vec::new();
    let mut missing = Vec::new();
    let mut worst: Option<(f64, String)> = None;
    for cell in &covered {
        let verdict = holds_over_capacity(&expr, cell);
        // What was measured may fail a gate, but it passes only on the load asked for.
        let unmeasured = load_not_sent(cell, reads_schedule);
        result.cells.push(match (&verdict, &unmeasured) {
            (Ok((false, ev)), _) => GateCell { cell: cell.label(), result: GateOutcome::Fail, evidence: ev.join(", ") },
            (Ok((true, _)), Some(why)) | (Err(why), _) => {
                GateCell { cell: cell.label(), result: GateOutcome::Incomplete, evidence: why.clone() }
            }
            (Ok((true, ev)), None) => {
                GateCell { cell: cell.label(), result: GateOutcome::Pass, evidence: ev.join(", ") }
            }
        });
        match verdict {
            Ok((true, _)) if unmeasured.is_some() => {
                missing.push(format!("{}: {}", cell.label(), unmeasured.unwrap_or_default()))
            }
            Ok((true, _)) => {
                if let Expr::Compare(Operand::Metric(m), op, _) = &expr {
                    if let Some(v) = m.value(cell).ok().flatten() {
                        let worse = |old: f64| match op {
                            CmpOp::Lt | CmpOp::Le => v > old,
                            CmpOp::Gt | CmpOp::Ge => v < old,
                            _ => false,
                        };
                        if worst.as_ref().is_none_or(|(old, _)| worse(*old)) {
                            worst = Some((v, format!("{} in {}", m.reading(v), cell.label())));
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

/// A ratio gate, judged in each group of cells (scenario, matrix point,
/// profile) of a scenario that has both variants it names: it passes only
/// if it holds in all of them, and a group without the ratio (a side that
/// never completed, one repeat and an interval asked for) leaves it
/// incomplete.
fn ratio_gate(mut result: GateResult, expr: &Expr, cells: &[&CellResult], run: &RunContext) -> GateResult {
    let pairs = expr.ratio_pairs();
    let mut groups: Vec<Group> = Vec::new();
    for cell in cells {
        let Some(scenario) = run.scenarios.iter().find(|s| s.name == cell.scenario) else { continue };
        let variants: Vec<String> = scenario.variants().iter().map(|(t, w)| scenario.variant_name(t, w)).collect();
        let has_pairs = pairs.iter().all(|(a, b)| variants.contains(a) && variants.contains(b));
        let group = Group::of(cell);
        if has_pairs && !groups.contains(&group) {
            groups.push(group);
        }
    }
    if groups.is_empty() {
        result.evidence = "no cell of a scenario with both variants ran".into();
        return result;
    }
    let (mut failures, mut missing) = (Vec::new(), Vec::new());
    for group in &groups {
        let compared: Vec<&Comparison> = run
            .comparisons
            .iter()
            .filter(|c| c.scenario == group.scenario && c.matrix == group.matrix && c.profile == group.profile)
            .collect();
        let verdict = eval(expr, &|o| match o {
            Operand::Ratio(r) => ratio_value(r, &compared),
            other => operand_value_without_cell(other),
        });
        let label = group.label();
        let (outcome, evidence) = match verdict {
            Ok((true, ev)) => (GateOutcome::Pass, ev.join(", ")),
            Ok((false, ev)) => {
                failures.push(format!("{} in {label}", ev.join(", ")));
                (GateOutcome::Fail, ev.join(", "))
            }
            Err(why) => {
                missing.push(format!("{label}: {why}"));
                (GateOutcome::Incomplete, why)
            }
        };
        result.cells.push(GateCell { cell: label, result: outcome, evidence });
    }
    let n = groups.len();
    if !failures.is_empty() {
        result.result = GateOutcome::Fail;
        result.evidence = format!("fails in {} of {n} groups: {}", failures.len(), abbreviate(&failures));
    } else if !missing.is_empty() {
        result.evidence = format!("cannot be evaluated in {} of {n} groups: {}", missing.len(), abbreviate(&missing));
    } else {
        result.result = GateOutcome::Pass;
        let evidence: Vec<String> = result.cells.iter().map(|c| format!("{} in {}", c.evidence, c.cell)).collect();
        result.evidence = format!("holds in all {n} groups: {}", abbreviate(&evidence));
    }
    result
}

/// A ratio from a group's comparisons: as computed when `baseline` is the
/// scenario's baseline, inverted (and its interval flipped) when it is the
/// other way round.
fn ratio_value(r: &RatioRef, compared: &[&Comparison]) -> OperandValue {
    let pick = |c: &Comparison| -> Ratio {
        match r.measure {
            Measure::Throughput => c.throughput,
            Measure::P50 => c.p50,
            Measure::P99 => c.p99,
            Measure::Capacity => c.capacity,
            Measure::DeliveredRate => c.delivered_rate.unwrap_or_default(),
        }
    };
    let (ratio, inverted) = if let Some(c) = compared.iter().find(|c| c.target == r.target && c.baseline == r.baseline)
    {
        (pick(c), false)
    } else if let Some(c) = compared.iter().find(|c| c.target == r.baseline && c.baseline == r.target) {
        (pick(c), true)
    } else {
        return Err(format!("no completed repeats of both `{}` and `{}` to compare", r.target, r.baseline));
    };
    let flip = |v: f64| if inverted { 1.0 / v } else { v };
    let value = match r.bound {
        RatioBound::Value => ratio.value.map(flip),
        RatioBound::Low => ratio.interval.map(|i| flip(if inverted { i.high } else { i.low })),
        RatioBound::High => ratio.interval.map(|i| flip(if inverted { i.low } else { i.high })),
    };
    let value = value.ok_or_else(|| match (r.bound, r.measure) {
        (_, Measure::Capacity) if ratio.value.is_none() => format!(
            "{r}: not every repeat of both sides found the target's own capacity (a search ended client-bound, at its range's top or bottom, or stopped)"
        ),
        (RatioBound::Value, _) => format!("{r}: the baseline measured nothing to divide by"),
        _ => format!("{r}: no interval (fewer than two repeats of a side)"),
    })?;
    Ok((value, format!("{r} = {value:.3}")))
}

fn operand_value_without_cell(o: &Operand) -> OperandValue {
    match o {
        Operand::Number { value, .. } => Ok((*value, format_decimal(*value))),
        _ => Err("a ratio gate compares ratios only".into()),
    }
}

/// Why a cell's measurements cannot earn a pass: nothing completed, or an
/// open loop sent less of its schedule than its profile's `min_sent`.
/// A gate that reads the schedule itself (`unsent`, `achieved_rate`) judges
/// an under-sent cell, but not one where nothing completed.
pub fn load_not_sent(cell: &CellResult, reads_schedule: bool) -> Option<String> {
    let stats = cell.stats.as_ref()?;
    let under_sent = stats.open_loop.filter(|o| !reads_schedule && o.sent_fraction() < o.min_sent).map(|open| {
        format!(
            "the open loop sent {} of the {} ops its schedule had due ({:.1}%, below min_sent {}%): {} unsent, {:.0}/s of {}/s asked",
            thousands(open.sent),
            thousands(open.due),
            open.sent_fraction() * 100.0,
            format_decimal(open.min_sent * 100.0),
            thousands(open.unsent),
            open.achieved_rate,
            format_decimal(open.rate)
        )
    });
    let nothing = (stats.ok + stats.failed == 0).then_some("no op completed in the measured window");
    match (nothing, under_sent) {
        (Some(n), Some(u)) => Some(format!("{n}; {u}")),
        (Some(n), None) => Some(n.to_string()),
        (None, u) => u,
    }
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
/// An operand's value and how it reads in evidence, or why it has none.
type OperandValue = Result<(f64, String), String>;

fn eval(expr: &Expr, value: &dyn Fn(&Operand) -> OperandValue) -> Result<(bool, Vec<String>), String> {
    match expr {
        // One side settles `and` (false) or `or` (true) even when the other
        // side was not measured; otherwise an unmeasured side leaves it open.
        Expr::And(a, b) | Expr::Or(a, b) => {
            let settles = matches!(expr, Expr::Or(..));
            match (eval(a, value), eval(b, value)) {
                (Ok((x, ex)), _) if x == settles => Ok((x, ex)),
                (_, Ok((y, ey))) if y == settles => Ok((y, ey)),
                (Ok((x, mut ex)), Ok((y, ey))) => {
                    ex.extend(ey);
                    Ok((if settles { x || y } else { x && y }, ex))
                }
                (Err(e), _) | (_, Err(e)) => Err(e),
            }
        }
        Expr::Compare(l, op, r) => {
            let (lv, le) = value(l)?;
            let (rv, re) = value(r)?;
            Ok((op.holds(lv, rv), vec![reading(l, le, *op, re)]))
        }
    }
}

/// How a comparison reads in evidence: what was measured, then the limit
/// it is held to (`p99(set) = 10.62ms, limit < 10ms`), never `10.62ms <
/// 10ms`, which reads as a true statement where the gate failed.
fn reading(left: &Operand, measured: String, op: CmpOp, limit: String) -> String {
    match left {
        Operand::Number { .. } => format!("{limit}, limit {} {measured}", op.mirrored()),
        _ => format!("{measured}, limit {op} {limit}"),
    }
}

/// Whether `expr` holds in one cell, with the values it compared (a
/// capacity search's SLO, judged on each step).
pub fn holds_in(expr: &Expr, cell: &CellResult) -> Result<(bool, Vec<String>), String> {
    eval(expr, &|o| operand_value(o, cell))
}

/// Whether `expr` holds in a cell whose capacity the search only bounds
/// (see `CapacitySearch::interval`): judged at both ends of the interval,
/// decided only where both agree.
fn holds_over_capacity(expr: &Expr, cell: &CellResult) -> Result<(bool, Vec<String>), String> {
    let Some(search) = cell.capacity.as_ref().filter(|_| expr.reads(Reads::Capacity)) else {
        return holds_in(expr, cell);
    };
    // Noise is neither a pass nor a failure.
    if let Some(why) = search.not_repeatable() {
        return Err(format!("the capacity is not repeatable: {why}"));
    }
    let (low, high) = search.interval();
    if low == high {
        return holds_in(expr, cell);
    }
    let at = |capacity: f64| {
        let mut cell = cell.clone();
        if let Some(s) = cell.capacity.as_mut() {
            s.capacity = Some(capacity);
        }
        holds_in(expr, &cell)
    };
    match (at(low)?, at(high)?) {
        ((true, ev), (true, _)) => Ok((true, ev)),
        ((false, ev), (false, _)) => Ok((false, ev)),
        _ => Err(format!("the capacity is {}: the gate holds at one end of that and not the other", search.reading())),
    }
}

fn operand_value(o: &Operand, cell: &CellResult) -> OperandValue {
    match o {
        Operand::Number { value, is_duration } => {
            Ok((*value, if *is_duration { Unit::Ms.format(*value) } else { format_decimal(*value) }))
        }
        Operand::Metric(m) => {
            let v = m.value(cell)?.ok_or_else(|| format!("{m} was not measured"))?;
            Ok((v, m.reading(v)))
        }
        Operand::Ratio(r) => Err(format!("{r} is judged per group of cells, not in one cell")),
    }
}

/// A gate plugin's verdict. A plugin that fails in any way leaves the gate
/// incomplete, with the plugin's error as the evidence: never a pass.
fn plugin_gate(
    mut result: GateResult,
    name: &str,
    p: &PluginRef,
    cells: &[&CellResult],
    run: &RunContext,
) -> GateResult {
    let (Some(host), Some(loaded)) = (&run.plugins.host, run.plugins.gates.get(name)) else {
        result.evidence = format!("plugin {} was not loaded", p.plugin);
        return result;
    };
    let limits = Limits::of(p, plugin::gate::DEFAULT_DEADLINE);
    match plugin::gate::evaluate(host, loaded, limits, &p.config, run.run_name, run.complete, cells) {
        Ok(decision) => {
            let count = |o: GateOutcome| decision.criteria.iter().filter(|c| c.result == o).count();
            result.evidence = format!(
                "{} criteria: {} pass, {} fail, {} incomplete",
                decision.criteria.len(),
                count(GateOutcome::Pass),
                count(GateOutcome::Fail),
                count(GateOutcome::Incomplete)
            );
            result.result = decision.outcome;
            result.criteria = decision.criteria;
        }
        Err(e) => result.evidence = e.to_string(),
    }
    result
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use faultline_check::checker;
    use faultline_model::checks::{CheckResult, CheckStatus};
    use faultline_model::results::CellStatus;
    use faultline_model::stats::{CellStats, ErrorCounts, LatencyStats, OpStats};

    /// Built-in gates need no plugins and no run context.
    fn evaluate(gates: &IndexMap<String, GateSpec>, cells: &[CellResult]) -> Vec<GateResult> {
        let plugins = SpecPlugins::none();
        super::evaluate(
            gates,
            cells,
            &RunContext { run_name: "test", comparisons: &[], complete: true, plugins: &plugins, scenarios: &[] },
        )
    }

    /// A completed cell of 1000 gets (verdict.rs's tests take it too).
    pub(crate) fn cell(profile: &str, get_p99: Option<f64>, errors: u64) -> CellResult {
        let get = OpStats {
            ok: 1000,
            failed: errors,
            errors: ErrorCounts { server: errors, ..Default::default() },
            over_deadline: 0,
            throughput: 500.0,
            latency_ms: get_p99.map(|p99| LatencyStats {
                p50: p99 / 4.0,
                p95: p99 / 2.0,
                p99,
                p999: p99 * 2.0,
                max: p99 * 3.0,
                mean: p99 / 3.0,
            }),
            max_any_ms: 10.0,
        };
        CellResult {
            scenario: "s".into(),
            profile: profile.into(),
            shape: "closed 1x1".into(),
            target: "t".into(),
            workload: "w".into(),
            variant: "t".into(),
            matrix: Default::default(),
            repeat: 1,
            status: CellStatus::Completed,
            error: None,
            measured_s: 2.0,
            stats: Some(CellStats {
                ok: 1000,
                failed: errors,
                throughput: 500.0,
                errors: get.errors,
                over_deadline: 0,
                status_classes: Default::default(),
                per_op: [("get".to_string(), get)].into_iter().collect(),
                timeline: vec![],
                timeline_step_s: 1.0,
                schedule_lag_ms: None,
                open_loop: None,
                error_labels: vec![],
                fault_impact: vec![],
                window_latency: vec![],
                stages: vec![],
                client_cpu: None,
                fanout: None,
                agents: Vec::new(),
                served: None,
                host: None,
            }),
            checks: vec![],
            faults: vec![],
            roles: vec![],
            non_primary_reads: None,
            probes: vec![],
            frozen: vec![],
            capacity: None,
        }
    }

    fn gate(expr: &str) -> IndexMap<String, GateSpec> {
        [("g".to_string(), GateSpec::expr(expr))].into_iter().collect()
    }

    #[test]
    fn a_capacity_that_is_only_a_lower_bound_cannot_fail_a_gate() {
        use faultline_model::capacity::{Bound, CapacitySearch};
        let searched = |bound: Bound| {
            let capacity = CapacitySearch {
                slo: "errors == 0".into(),
                rate_from: 1000.0,
                rate_to: 100_000.0,
                slo_limits: vec![],
                capacity: Some(20_000.0),
                failed_at: Some(40_000.0),
                bound,
                steps: vec![],
                tolerance: 0.15,
                non_monotone: None,
                repeats: None,
            };
            CellResult { capacity: Some(capacity), ..cell("p", Some(1.0), 0) }
        };
        let judge = |bound: Bound, expr: &str| evaluate(&gate(expr), &[searched(bound)]).remove(0);
        assert_eq!(judge(Bound::Target, "capacity >= 10000").result, GateOutcome::Pass);
        assert_eq!(judge(Bound::Target, "capacity >= 30000").result, GateOutcome::Fail);
        // Client-bound: at least 20,000/s, which says nothing against 30,000.
        let r = judge(Bound::Client, "capacity >= 30000");
        assert_eq!(r.result, GateOutcome::Incomplete, "{}", r.evidence);
        assert!(r.evidence.contains("at least 20,000/s (client-bound)"), "{}", r.evidence);
        assert_eq!(judge(Bound::Client, "capacity >= 10000").result, GateOutcome::Pass);
        // Nor can a lower bound pass an upper limit, while a real failure
        // beside it still fails.
        assert_eq!(judge(Bound::Client, "capacity <= 30000").result, GateOutcome::Incomplete);
        assert_eq!(judge(Bound::Client, "capacity >= 10000 and errors > 5").result, GateOutcome::Fail);
        // Out of steps: between 20,000 and 40,000.
        assert_eq!(judge(Bound::Steps, "capacity >= 30000").result, GateOutcome::Incomplete);
        assert_eq!(judge(Bound::Steps, "capacity >= 50000").result, GateOutcome::Fail);
        // A gate on capacity covers the cells that searched; none searched: unmeasured.
        let cells = [searched(Bound::Target), cell("p", Some(1.0), 0)];
        assert_eq!(evaluate(&gate("capacity >= 10000"), &cells)[0].result, GateOutcome::Pass);
        let r = evaluate(&gate("capacity >= 1"), &[cell("p", Some(1.0), 0)]).remove(0);
        assert_eq!(r.result, GateOutcome::Incomplete, "{}", r.evidence);
        // Noise decides nothing: a capacity whose steps contradict each
        // other is neither a pass nor a failure.
        let mut noisy = searched(Bound::Target);
        noisy.capacity.as_mut().unwrap().non_monotone = Some("the steps contradict each other".into());
        for expr in ["capacity >= 10000", "capacity >= 30000"] {
            let r = evaluate(&gate(expr), std::slice::from_ref(&noisy)).remove(0);
            assert_eq!(r.result, GateOutcome::Incomplete, "{}", r.evidence);
            assert!(r.evidence.contains("not repeatable: the steps contradict"), "{}", r.evidence);
        }
    }

    #[test]
    fn holds_only_if_it_holds_in_every_cell() {
        let cells = [cell("a", Some(2.0), 0), cell("b", Some(40.0), 0)];
        let r = &evaluate(&gate("p99(get) < 30ms"), &cells)[0];
        assert_eq!(r.result, GateOutcome::Fail);
        assert!(r.evidence.contains("fails in 1 of 2"), "{}", r.evidence);
        // What was measured, then the limit: never "40ms < 30ms", which reads true.
        assert!(r.evidence.contains("p99(get) = 40ms, limit < 30ms in s/b/t#1"), "{}", r.evidence);
        let r = &evaluate(&gate("30ms > p99(get)"), &cells)[0];
        assert!(r.evidence.contains("p99(get) = 40ms, limit < 30ms in s/b/t#1"), "{}", r.evidence);

        let r = &evaluate(&gate("p99(get) < 50ms"), &cells)[0];
        assert_eq!(r.result, GateOutcome::Pass);
        assert!(r.evidence.contains("worst: p99(get) = 40ms in s/b/t#1"), "{}", r.evidence);
    }

    #[test]
    fn unmeasured_values_are_incomplete_never_pass() {
        // No successful get: the latency was not measured.
        let r = &evaluate(&gate("p99(get) < 30ms"), &[cell("a", None, 1000)])[0];
        assert_eq!(r.result, GateOutcome::Incomplete, "{}", r.evidence);
        // An op kind the workload does not have.
        let r = &evaluate(&gate("p99(set) < 30ms"), &[cell("a", Some(1.0), 0)])[0];
        assert_eq!(r.result, GateOutcome::Incomplete);
        assert!(r.evidence.contains("has no set ops"), "{}", r.evidence);
        // Closed-loop cells have no schedule lag.
        let r = &evaluate(&gate("schedule_lag < 5ms"), &[cell("a", Some(1.0), 0)])[0];
        assert_eq!(r.result, GateOutcome::Incomplete);
        // Nothing measured at all.
        let mut skipped = cell("a", Some(1.0), 0);
        skipped.stats = None;
        let r = &evaluate(&gate("errors == 0"), &[skipped])[0];
        assert_eq!(r.result, GateOutcome::Incomplete);
    }

    #[test]
    fn counts_rates_and_compound_expressions() {
        let cells = [cell("a", Some(1.0), 10)];
        assert_eq!(evaluate(&gate("errors == 0"), &cells)[0].result, GateOutcome::Fail);
        assert_eq!(evaluate(&gate("server_errors == 10 and hangs == 0"), &cells)[0].result, GateOutcome::Pass);
        assert_eq!(evaluate(&gate("error_rate < 0.5%"), &cells)[0].result, GateOutcome::Fail);
        assert_eq!(evaluate(&gate("error_rate < 1.5%"), &cells)[0].result, GateOutcome::Pass);
        assert_eq!(evaluate(&gate("throughput >= 600 or errors > 5"), &cells)[0].result, GateOutcome::Pass);
        assert_eq!(evaluate(&gate("throughput >= 600"), &cells)[0].result, GateOutcome::Fail);
        // An unmeasured side does not matter when the other settles it.
        assert_eq!(evaluate(&gate("errors > 5 or schedule_lag < 1ms"), &cells)[0].result, GateOutcome::Pass);
        assert_eq!(evaluate(&gate("errors == 0 and schedule_lag < 1ms"), &cells)[0].result, GateOutcome::Fail);
        assert_eq!(evaluate(&gate("errors > 5 and schedule_lag < 1ms"), &cells)[0].result, GateOutcome::Incomplete);
    }

    #[test]
    fn a_checker_that_judged_nothing_passes_no_gate_on_it() {
        use faultline_model::checks::IndexLag;
        let judged = |name: &str, checked: u64, violations: u64| CheckResult {
            status: if violations == 0 { CheckStatus::Ok } else { CheckStatus::Violated },
            checked,
            violations,
            ..checker::named(name).unwrap().unknown(String::new())
        };
        let with = |checks: Vec<CheckResult>| CellResult { checks, ..cell("a", Some(1.0), 0) };
        let nothing = with(vec![judged("stale-read-after-ack", 0, 0), judged("linearizability", 0, 0)]);
        let cells = std::slice::from_ref(&nothing);
        let r = &evaluate(&gate("stale_reads == 0"), cells)[0];
        assert_eq!(r.result, GateOutcome::Incomplete, "{}", r.evidence);
        assert!(
            r.evidence.contains("the stale-read-after-ack checker judged 0 reads after an acknowledged write"),
            "{}",
            r.evidence
        );
        let r = &evaluate(&gate("linearizability_violations == 0"), cells)[0];
        assert_eq!(r.result, GateOutcome::Incomplete, "{}", r.evidence);
        assert!(r.evidence.contains("linearizability checker judged 0 reads of written keys"), "{}", r.evidence);
        // How much was judged is a metric of its own, measured even at 0.
        assert_eq!(evaluate(&gate("stale_reads_judged >= 1"), cells)[0].result, GateOutcome::Fail);
        assert_eq!(evaluate(&gate("linearizability_judged == 0"), cells)[0].result, GateOutcome::Pass);
        // Something judged: the count decides; a violation fails whatever was judged.
        let some = with(vec![judged("stale-read-after-ack", 40, 0)]);
        assert_eq!(evaluate(&gate("stale_reads == 0"), &[some])[0].result, GateOutcome::Pass);
        let bad = with(vec![judged("stale-read-after-ack", 40, 2)]);
        assert_eq!(evaluate(&gate("stale_reads == 0"), &[bad])[0].result, GateOutcome::Fail);

        // Index lag: its own metrics, unmeasured on a table without an index.
        let lagged =
            IndexLag { entries: 3, settled_late: 1, longest_settle_ms: 5800.0, still_wrong: 0, window_ms: 30e3 };
        let hot = |index: Option<IndexLag>| with(vec![CheckResult { index, ..judged("hot-key", 3, 0) }]);
        let cells = [hot(Some(lagged))];
        assert_eq!(evaluate(&gate("index_lag < 10s"), &cells)[0].result, GateOutcome::Pass);
        let r = &evaluate(&gate("index_lag < 5s"), &cells)[0];
        assert_eq!(r.result, GateOutcome::Fail, "{}", r.evidence);
        assert!(r.evidence.contains("index_lag = 5.8s"), "{}", r.evidence);
        assert_eq!(evaluate(&gate("index_lagged == 0"), &cells)[0].result, GateOutcome::Fail);
        assert_eq!(evaluate(&gate("hot_key_violations == 0"), &cells)[0].result, GateOutcome::Pass);
        let r = &evaluate(&gate("index_lag < 10s"), &[hot(None)])[0];
        assert_eq!(r.result, GateOutcome::Incomplete, "{}", r.evidence);
        assert!(r.evidence.contains("no index entry"), "{}", r.evidence);
    }

    #[test]
    fn filters_pick_the_cells() {
        let cells = [cell("a", Some(2.0), 0), cell("b", Some(40.0), 0)];
        let mut gates = gate("p99(get) < 30ms");
        gates[0].profile = Some("a".into());
        assert_eq!(evaluate(&gates, &cells)[0].result, GateOutcome::Pass);
    }

    #[test]
    fn nothing_completed_or_an_under_sent_schedule_is_never_a_pass() {
        let mut empty = cell("a", None, 0);
        let stats = empty.stats.as_mut().unwrap();
        (stats.ok, stats.per_op["get"].ok) = (0, 0);
        let r = &evaluate(&gate("errors == 0"), &[empty])[0];
        assert_eq!(r.result, GateOutcome::Incomplete);
        assert!(r.evidence.contains("no op completed"), "{}", r.evidence);

        let mut under_sent = cell("a", Some(1.0), 0);
        under_sent.stats.as_mut().unwrap().open_loop = Some(faultline_model::stats::OpenLoopStats {
            rate: 600_000.0,
            min_sent: 0.99,
            due: 1_200_000,
            sent: 54_311,
            unsent: 1_145_689,
            unsent_late: 0,
            achieved_rate: 27_155.5,
        });
        let r = &evaluate(&gate("errors == 0"), std::slice::from_ref(&under_sent))[0];
        assert_eq!(r.result, GateOutcome::Incomplete);
        assert!(
            r.evidence.contains("sent 54,311 of the 1,200,000") && r.evidence.contains("1,145,689 unsent"),
            "{}",
            r.evidence
        );
        // What was measured can still fail; a gate on the schedule itself judges it.
        assert_eq!(evaluate(&gate("p99(get) < 0.5ms"), std::slice::from_ref(&under_sent))[0].result, GateOutcome::Fail);
        assert_eq!(evaluate(&gate("unsent == 0"), std::slice::from_ref(&under_sent))[0].result, GateOutcome::Fail);
        assert_eq!(evaluate(&gate("achieved_rate >= 20000"), &[under_sent])[0].result, GateOutcome::Pass);
        // A gate on the schedule passes nothing where nothing completed.
        let mut stuck = cell("a", None, 0);
        let stats = stuck.stats.as_mut().unwrap();
        (stats.ok, stats.per_op["get"].ok) = (0, 0);
        assert_eq!(evaluate(&gate("errors == 0 and unsent == 0"), &[stuck])[0].result, GateOutcome::Incomplete);
        // A closed loop owes nothing.
        assert_eq!(evaluate(&gate("unsent == 0"), &[cell("a", Some(1.0), 0)])[0].result, GateOutcome::Pass);
    }

    #[test]
    fn a_fault_gate_covers_the_cells_whose_scenario_has_the_fault() {
        use faultline_model::stats::FaultImpact;
        let scenarios: Vec<ScenarioSpec> = serde_json::from_str(
            r#"[{"name": "calm", "target": "t", "workload": "w", "profiles": ["p"]},
                {"name": "s", "target": "t", "workload": "w", "profiles": ["p"],
                 "faults": [{"name": "crash", "at": "1s", "action": "kill", "target": "t"}]}]"#,
        )
        .unwrap();
        let impact = |not_recovered: bool| FaultImpact {
            fault: "crash".into(),
            ops: 10,
            failed: 5,
            max_latency_ms: 5.0,
            denied_window_s: (!not_recovered).then_some(0.5),
            denied_at_least_s: not_recovered.then_some(2.0),
            not_recovered,
            first_success_s: (!not_recovered).then_some(0.6),
            throughput_before: 500.0,
            recovered_s: None,
            per_op: Default::default(),
        };
        let mut calm = cell("p", Some(1.0), 0);
        calm.scenario = "calm".into();
        let mut faulted = cell("p", Some(1.0), 0);
        faulted.stats.as_mut().unwrap().fault_impact = vec![impact(false)];
        let plugins = SpecPlugins::none();
        let run =
            RunContext { run_name: "t", comparisons: &[], complete: true, plugins: &plugins, scenarios: &scenarios };
        let eval = |cells: &[CellResult]| super::evaluate(&gate("denied_window(crash) <= 3500ms"), cells, &run);
        // The calm scenario has no such fault: not in scope, not INCOMPLETE.
        let r = &eval(&[calm.clone(), faulted.clone()])[0];
        assert_eq!(r.result, GateOutcome::Pass, "{}", r.evidence);
        assert!(r.evidence.contains("holds in all 1 cells"), "{}", r.evidence);
        // A target that never came back: unbounded, and the bound fails.
        faulted.stats.as_mut().unwrap().fault_impact = vec![impact(true)];
        let r = &eval(&[calm.clone(), faulted])[0];
        assert_eq!(r.result, GateOutcome::Fail, "{}", r.evidence);
        assert!(r.evidence.contains("not recovered"), "{}", r.evidence);
        // No cell of a scenario with the fault measured: incomplete.
        let r = &eval(&[calm.clone()])[0];
        assert_eq!(r.result, GateOutcome::Incomplete, "{}", r.evidence);
        // Per op kind: writes never came back while reads went on; the form
        // without a kind is all ops together, which a read after the last
        // failed write calls recovered.
        let mut by_kind = cell("p", Some(1.0), 0);
        let mut whole = impact(false);
        whole.per_op.insert("get".into(), FaultImpact { failed: 0, denied_window_s: None, ..impact(false) });
        whole.per_op.insert("set".into(), impact(true));
        by_kind.stats.as_mut().unwrap().fault_impact = vec![whole];
        let judge = |expr: &str| super::evaluate(&gate(expr), &[calm.clone(), by_kind.clone()], &run).remove(0);
        let reads = judge("denied_window(crash, get) <= 1ms");
        assert_eq!(reads.result, GateOutcome::Pass, "{}", reads.evidence);
        assert!(reads.evidence.contains("denied_window(crash, get) = 0"), "{}", reads.evidence);
        let writes = judge("denied_window(crash, set) <= 3500ms");
        assert_eq!(writes.result, GateOutcome::Fail, "{}", writes.evidence);
        assert_eq!(judge("denied_window(crash) <= 3500ms").result, GateOutcome::Pass);
        let absent = judge("denied_window(crash, incr) <= 1s");
        assert_eq!(absent.result, GateOutcome::Incomplete, "{}", absent.evidence);
        assert!(absent.evidence.contains("no incr ops"), "{}", absent.evidence);
    }
    #[test]
    fn a_ratio_gate_is_judged_per_group_on_the_ratio_or_its_interval() {
        use faultline_model::results::Interval;
        use faultline_model::results::Word;
        let scenarios: Vec<ScenarioSpec> =
            serde_json::from_str(r#"[{"name": "s", "target": ["redis", "cand"], "workload": "w", "profiles": ["p"]}]"#)
                .unwrap();
        let cells: Vec<CellResult> = ["redis", "cand"]
            .into_iter()
            .map(|v| CellResult { variant: v.into(), target: v.into(), ..cell("p", Some(1.0), 0) })
            .collect();
        let comparison = Comparison {
            scenario: "s".into(),
            matrix: Default::default(),
            profile: "p".into(),
            baseline: "redis".into(),
            target: "cand".into(),
            repeats: 3,
            baseline_stats: Default::default(),
            target_stats: Default::default(),
            throughput: Ratio {
                value: Some(0.91),
                paired_median: Some(0.9),
                interval: Some(Interval { low: 0.88, high: 0.94 }),
            },
            p50: Ratio::default(),
            p99: Ratio { value: Some(1.5), paired_median: Some(1.5), interval: None },
            capacity: Ratio::default(),
            delivered_rate: None,
            word: Some(Word::Loss),
            parity_band: 0.05,
        };
        let plugins = SpecPlugins::none();
        let judge = |expr: &str, comparisons: &[Comparison]| {
            let run =
                RunContext { run_name: "t", comparisons, complete: true, plugins: &plugins, scenarios: &scenarios };
            super::evaluate(&gate(expr), &cells, &run).remove(0)
        };
        let with = std::slice::from_ref(&comparison);
        let r = judge("ratio(throughput, cand/redis) >= 0.9", with);
        assert_eq!(r.result, GateOutcome::Pass, "{}", r.evidence);
        assert_eq!((r.cells.len(), r.cells[0].cell.as_str()), (1, "s/p"));
        let r = judge("ratio_low(throughput, cand/redis) >= 0.9", with);
        assert_eq!(r.result, GateOutcome::Fail, "{}", r.evidence);
        assert!(
            r.evidence.contains("ratio_low(throughput, cand/redis) = 0.880, limit >= 0.9 in s/p"),
            "{}",
            r.evidence
        );
        // The other way round: inverted, and the interval's ends swap.
        assert_eq!(judge("ratio(throughput, redis/cand) <= 1.1", with).result, GateOutcome::Pass);
        assert_eq!(judge("ratio_high(throughput, redis/cand) < 1.13", with).result, GateOutcome::Fail);
        assert_eq!(
            judge("ratio(p99, cand/redis) < 2 and ratio(throughput, cand/redis) > 0.5", with).result,
            GateOutcome::Pass
        );
        // No interval (one repeat) or no comparison (a side never completed): never a pass.
        let r = judge("ratio_low(p99, cand/redis) < 2", with);
        assert_eq!(r.result, GateOutcome::Incomplete, "{}", r.evidence);
        assert!(r.evidence.contains("no interval"), "{}", r.evidence);
        let r = judge("ratio(throughput, cand/redis) >= 0.9", &[]);
        assert_eq!(r.result, GateOutcome::Incomplete, "{}", r.evidence);
        assert!(r.evidence.contains("no completed repeats of both"), "{}", r.evidence);
    }
}
