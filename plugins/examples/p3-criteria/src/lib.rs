//! The MongoDB seed's "P3 criteria and verdict" table as a gate: reads work
//! without error, a bounded deadline with no hangs, failures fail closed, no
//! stale read, faults confirmed and recovered from, a bounded denied window,
//! and the cost (p99) of reads. See README.md for each row.
//!
//! A missing measurement (no checker result, a fault never confirmed, a cell
//! that did not complete, no successful read) gives `incomplete`, never pass.

use faultline_plugin::gate::*;

const KNOWN: &[&str] = &[
    "read_op",
    "max_p99_ms",
    "max_read_ms",
    "max_denied_window_s",
    "max_recovery_s",
    "require_checkers",
    "require_faults",
];

struct Settings {
    read_op: String,
    max_p99_ms: Option<f64>,
    max_read_ms: Option<f64>,
    max_denied_window_s: Option<f64>,
    max_recovery_s: Option<f64>,
    require_checkers: Vec<String>,
    require_faults: bool,
}

impl Settings {
    fn from(config: &Config) -> Result<Settings, String> {
        config.deny_unknown(KNOWN)?;
        let require_checkers = if config.has("require_checkers") {
            config.str_list("require_checkers")?
        } else {
            vec!["stale-read-after-ack".to_string()]
        };
        Ok(Settings {
            read_op: config.str("read_op", "get")?.to_string(),
            max_p99_ms: config.opt_f64("max_p99_ms")?,
            max_read_ms: config.opt_f64("max_read_ms")?,
            max_denied_window_s: config.opt_f64("max_denied_window_s")?,
            max_recovery_s: config.opt_f64("max_recovery_s")?,
            require_checkers,
            require_faults: config.bool("require_faults", true)?,
        })
    }
}

/// At most this many offending cells are named in one row's evidence.
const NAMED: usize = 4;

fn names(list: &[String]) -> String {
    let mut s = list.iter().take(NAMED).cloned().collect::<Vec<_>>().join("; ");
    if list.len() > NAMED {
        s.push_str(&format!("; and {} more", list.len() - NAMED));
    }
    s
}

fn secs(x: f64) -> String {
    format!("{x:.2} s")
}

fn ms(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0} ms")
    } else {
        format!("{x:.2} ms")
    }
}

fn count(n: u64) -> String {
    // 1234567 -> 1,234,567
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub struct P3;

impl Gate for P3 {
    fn evaluate(config: &Config, summary: &RunSummary) -> Result<Verdict, String> {
        let s = Settings::from(config)?;
        let completed: Vec<&CellSummary> = summary.cells.iter().filter(|c| c.is_completed()).collect();
        let quiet: Vec<&CellSummary> = completed.iter().copied().filter(|c| c.faults.is_empty()).collect();
        let faulted: Vec<&CellSummary> = completed.iter().copied().filter(|c| !c.faults.is_empty()).collect();
        Ok(Verdict::from_criteria(
            vec![plan_ran(summary), reads_work(&s, &quiet), bounded_deadline(&s, &completed), fail_closed(&completed)]
                .into_iter()
                .chain(s.require_checkers.iter().map(|checker| no_violation(checker, &completed, &faulted)))
                .chain([
                    faults_confirmed(&s, &faulted),
                    recovered(&s, &faulted),
                    denied_window(&s, &faulted),
                    cost(&s, &quiet),
                ])
                .collect(),
        ))
    }
}

/// Every planned cell ran to the end.
fn plan_ran(summary: &RunSummary) -> Criterion {
    const NAME: &str = "Plan ran in full";
    let unfinished: Vec<String> = summary
        .cells
        .iter()
        .filter(|c| !c.is_completed())
        .map(|c| format!("{} {}", c.label(), c.status.as_str()))
        .collect();
    let n = summary.cells.len();
    if n == 0 {
        Criterion::incomplete(NAME, "no cell ran")
    } else if !unfinished.is_empty() {
        Criterion::incomplete(
            NAME,
            format!("{} of {n} cells did not complete: {}", unfinished.len(), names(&unfinished)),
        )
    } else if !summary.complete {
        Criterion::incomplete(NAME, format!("only part of the plan ran (--quick, --only or interrupted); {n} cells"))
    } else {
        Criterion::pass(NAME, format!("all {n} cells completed"))
    }
}

/// Reads work without error when nothing is broken.
fn reads_work(s: &Settings, quiet: &[&CellSummary]) -> Criterion {
    let name = format!("`{}` works without error (fault-free cells)", s.read_op);
    let (mut ok, mut failed, mut errors, mut bad) = (0u64, 0u64, Vec::new(), Vec::new());
    let mut ran = 0;
    for c in quiet {
        if let Some(op) = c.op(&s.read_op) {
            ran += 1;
            ok += op.ok;
            failed += op.failed;
            if op.failed > 0 {
                bad.push(format!("{}: {} failed ({})", c.label(), count(op.failed), op.errors.describe()));
                errors.push(op.errors.describe());
            }
        }
    }
    if ran == 0 {
        return Criterion::incomplete(name, format!("no completed fault-free cell ran `{}`", s.read_op));
    }
    let evidence = format!("{} ok, {} failed in {ran} fault-free cells", count(ok), count(failed));
    if failed > 0 {
        Criterion::fail(name, format!("{evidence}: {}", names(&bad)))
    } else if ok == 0 {
        Criterion::incomplete(name, format!("{evidence}: no read succeeded"))
    } else {
        Criterion::pass(name, evidence)
    }
}

/// Every op finished or failed within its deadline: no hang, none over the
/// deadline, and (with `max_read_ms`) no read longer than the bound.
fn bounded_deadline(s: &Settings, completed: &[&CellSummary]) -> Criterion {
    const NAME: &str = "Bounded deadline, no hang";
    if completed.is_empty() {
        return Criterion::incomplete(NAME, "no completed cell");
    }
    let hangs: u64 = completed.iter().map(|c| c.errors.hang).sum();
    let over: u64 = completed.iter().map(|c| c.over_deadline).sum();
    let longest = completed
        .iter()
        .filter_map(|c| c.op(&s.read_op).and_then(|o| o.latency.as_ref()).map(|l| (l.max_ms, c)))
        .fold(None::<(f64, &CellSummary)>, |m, (x, c)| match m {
            Some((y, _)) if y >= x => m,
            _ => Some((x, c)),
        });
    let mut evidence = format!("{hangs} hangs, {over} over-deadline in {} completed cells", completed.len());
    if let Some((max, c)) = longest {
        evidence.push_str(&format!("; longest successful `{}` {} ({})", s.read_op, ms(max), c.label()));
    }
    if hangs > 0 || over > 0 {
        let bad: Vec<String> = completed
            .iter()
            .filter(|c| c.errors.hang > 0 || c.over_deadline > 0)
            .map(|c| format!("{}: {} hangs, {} over-deadline", c.label(), c.errors.hang, c.over_deadline))
            .collect();
        return Criterion::fail(NAME, format!("{evidence}: {}", names(&bad)));
    }
    match (s.max_read_ms, longest) {
        (Some(bound), Some((max, _))) if max > bound => {
            Criterion::fail(NAME, format!("{evidence}, above the {} bound", ms(bound)))
        }
        (Some(bound), None) => {
            Criterion::incomplete(NAME, format!("{evidence}; no successful `{}` to hold to {}", s.read_op, ms(bound)))
        }
        (Some(bound), Some(_)) => Criterion::pass(NAME, format!("{evidence}, within {}", ms(bound))),
        (None, _) => Criterion::pass(NAME, evidence),
    }
}

/// Every failure is a classified error (deadline, connection, server, hang),
/// never data.
fn fail_closed(completed: &[&CellSummary]) -> Criterion {
    const NAME: &str = "Failures fail closed (classified errors)";
    if completed.is_empty() {
        return Criterion::incomplete(NAME, "no completed cell");
    }
    let failed: u64 = completed.iter().map(|c| c.failed).sum();
    let mut all = ErrorCounts { deadline: 0, connection: 0, server: 0, hang: 0 };
    for c in completed {
        all.deadline += c.errors.deadline;
        all.connection += c.errors.connection;
        all.server += c.errors.server;
        all.hang += c.errors.hang;
    }
    let evidence = format!("{} failed ops; errors: {}", count(failed), all.describe());
    Criterion::check(NAME, evidence, all.total() >= failed)
}

/// A required checker ran on every cell with faults (on every completed cell
/// when none had faults) and found nothing.
fn no_violation(checker: &str, completed: &[&CellSummary], faulted: &[&CellSummary]) -> Criterion {
    let name = format!("No `{checker}` violation");
    let scope = if faulted.is_empty() { completed } else { faulted };
    if scope.is_empty() {
        return Criterion::incomplete(name, "no completed cell to check");
    }
    let (mut checked, mut violations) = (0u64, 0u64);
    let (mut missing, mut failing, mut unknown) = (Vec::new(), Vec::new(), Vec::new());
    for c in scope {
        match c.check(checker) {
            None => missing.push(c.label()),
            Some(r) => {
                checked += r.checked;
                violations += r.violations;
                if r.status == CheckStatus::Fail || r.violations > 0 {
                    failing.push(format!("{}: {} violations{}", c.label(), r.violations, note(&r.note)));
                } else if r.status == CheckStatus::Unknown || r.checked == 0 {
                    unknown.push(format!(
                        "{}: {} ({} checked){}",
                        c.label(),
                        r.status.as_str(),
                        r.checked,
                        note(&r.note)
                    ));
                }
            }
        }
    }
    let what = if faulted.is_empty() { "completed" } else { "fault" };
    let evidence =
        format!("{violations} violations in {} checked ops over {} {what} cells", count(checked), scope.len());
    if !failing.is_empty() {
        Criterion::fail(name, format!("{evidence}: {}", names(&failing)))
    } else if !missing.is_empty() {
        Criterion::incomplete(name, format!("{evidence}; no result in {}", names(&missing)))
    } else if !unknown.is_empty() {
        Criterion::incomplete(name, format!("{evidence}; undecided: {}", names(&unknown)))
    } else {
        Criterion::pass(name, evidence)
    }
}

fn note(n: &str) -> String {
    if n.is_empty() {
        String::new()
    } else {
        format!(" ({n})")
    }
}

fn no_fault_cells(s: &Settings, name: &str) -> Criterion {
    if s.require_faults {
        Criterion::incomplete(name, "no completed cell ran a fault")
    } else {
        Criterion::pass(name, "no fault cells (require_faults: false)")
    }
}

fn fault_label(c: &CellSummary, f: &FaultWindow) -> String {
    format!("{} {} ({} {})", c.label(), f.name, f.action, f.target)
}

/// Every fault took effect and was healed without error.
fn faults_confirmed(s: &Settings, faulted: &[&CellSummary]) -> Criterion {
    const NAME: &str = "Every fault applied and confirmed";
    if faulted.is_empty() {
        return no_fault_cells(s, NAME);
    }
    let mut n = 0;
    let mut problems = Vec::new();
    for c in faulted {
        for f in &c.faults {
            n += 1;
            if let Some(e) = &f.error {
                problems.push(format!("{}: {e}", fault_label(c, f)));
            } else if f.confirmed_s.is_none() {
                problems.push(format!("{}: never confirmed", fault_label(c, f)));
            }
        }
    }
    if problems.is_empty() {
        Criterion::pass(NAME, format!("{n} faults confirmed in {} cells", faulted.len()))
    } else {
        Criterion::incomplete(NAME, format!("{} of {n} faults not confirmed: {}", problems.len(), names(&problems)))
    }
}

/// Seconds from the fault's request to `t` (both from the window's start).
fn since(f: &FaultWindow, t: f64) -> f64 {
    (t - f.requested_s).max(0.0)
}

/// Throughput came back on its own after every fault.
fn recovered(s: &Settings, faulted: &[&CellSummary]) -> Criterion {
    const NAME: &str = "Automatic recovery after every fault";
    if faulted.is_empty() {
        return no_fault_cells(s, NAME);
    }
    let (mut n, mut worst) = (0, None::<(f64, String)>);
    let (mut never, mut slow, mut unconfirmed) = (Vec::new(), Vec::new(), Vec::new());
    for c in faulted {
        for f in &c.faults {
            if f.error.is_some() || f.confirmed_s.is_none() {
                unconfirmed.push(fault_label(c, f));
                continue;
            }
            n += 1;
            match f.recovered_s {
                None => never.push(fault_label(c, f)),
                Some(t) => {
                    let r = since(f, t);
                    if worst.as_ref().is_none_or(|(w, _)| r > *w) {
                        worst = Some((r, fault_label(c, f)));
                    }
                    if s.max_recovery_s.is_some_and(|b| r > b) {
                        slow.push(format!("{}: {}", fault_label(c, f), secs(r)));
                    }
                }
            }
        }
    }
    let mut evidence = format!("{} of {n} confirmed faults recovered", n - never.len());
    if let Some((w, label)) = &worst {
        evidence.push_str(&format!("; slowest {} after the request ({label})", secs(*w)));
    }
    if let Some(b) = s.max_recovery_s {
        evidence.push_str(&format!("; bound {}", secs(b)));
    }
    if !never.is_empty() {
        Criterion::fail(NAME, format!("{evidence}; never recovered: {}", names(&never)))
    } else if !slow.is_empty() {
        Criterion::fail(NAME, format!("{evidence}; too slow: {}", names(&slow)))
    } else if n == 0 || !unconfirmed.is_empty() {
        Criterion::incomplete(NAME, format!("{evidence}; unconfirmed: {}", names(&unconfirmed)))
    } else {
        Criterion::pass(NAME, evidence)
    }
}

/// How long each fault denied service: from the request to the end of the
/// last failed op.
fn denied_window(s: &Settings, faulted: &[&CellSummary]) -> Criterion {
    const NAME: &str = "Denied window after a fault";
    if faulted.is_empty() {
        return no_fault_cells(s, NAME);
    }
    let (mut n, mut worst) = (0, None::<(f64, String)>);
    let (mut over, mut unconfirmed) = (Vec::new(), Vec::new());
    for c in faulted {
        for f in &c.faults {
            if f.error.is_some() || f.confirmed_s.is_none() {
                unconfirmed.push(fault_label(c, f));
                continue;
            }
            n += 1;
            let d = f.denied_window_s.map(|t| since(f, t)).unwrap_or(0.0);
            if worst.as_ref().is_none_or(|(w, _)| d > *w) {
                worst = Some((d, fault_label(c, f)));
            }
            if s.max_denied_window_s.is_some_and(|b| d > b) {
                over.push(format!("{}: {}", fault_label(c, f), secs(d)));
            }
        }
    }
    let mut evidence = match &worst {
        Some((w, label)) if *w > 0.0 => format!("longest {} over {n} confirmed faults ({label})", secs(*w)),
        _ => format!("no denial in {n} confirmed faults"),
    };
    match s.max_denied_window_s {
        Some(b) => evidence.push_str(&format!("; bound {}", secs(b))),
        None => evidence.push_str("; no bound set (max_denied_window_s), reported only"),
    }
    if !over.is_empty() {
        Criterion::fail(NAME, format!("{evidence}; over: {}", names(&over)))
    } else if n == 0 || !unconfirmed.is_empty() {
        Criterion::incomplete(NAME, format!("{evidence}; unconfirmed: {}", names(&unconfirmed)))
    } else {
        Criterion::pass(NAME, evidence)
    }
}

/// Not too costly: p99 of reads in the fault-free cells.
fn cost(s: &Settings, quiet: &[&CellSummary]) -> Criterion {
    let name = format!("`{}` p99 (fault-free cells)", s.read_op);
    let mut seen = Vec::new();
    let mut missing = Vec::new();
    for c in quiet {
        if let Some(op) = c.op(&s.read_op) {
            match &op.latency {
                Some(l) => seen.push((l.p50_ms, l.p99_ms, op.throughput, c.label())),
                None => missing.push(c.label()),
            }
        }
    }
    if seen.is_empty() {
        return Criterion::incomplete(name, format!("no successful `{}` in a completed fault-free cell", s.read_op));
    }
    let worst = seen.iter().fold(&seen[0], |w, x| if x.1 > w.1 { x } else { w });
    let p50_lo = seen.iter().map(|x| x.0).fold(f64::INFINITY, f64::min);
    let p50_hi = seen.iter().map(|x| x.0).fold(0.0, f64::max);
    let p50 = if p50_lo == p50_hi { ms(p50_lo) } else { format!("{}–{}", ms(p50_lo), ms(p50_hi)) };
    let cells = if seen.len() == 1 { "1 cell".to_string() } else { format!("{} cells", seen.len()) };
    let mut evidence = format!("p50 {p50}, p99 up to {} ({}) over {cells}", ms(worst.1), worst.3);
    if !missing.is_empty() {
        return Criterion::incomplete(
            name,
            format!("{evidence}; no latency (nothing succeeded) in {}", names(&missing)),
        );
    }
    match s.max_p99_ms {
        Some(b) => {
            evidence.push_str(&format!("; bound {}", ms(b)));
            let over: Vec<String> = seen.iter().filter(|x| x.1 > b).map(|x| format!("{}: {}", x.3, ms(x.1))).collect();
            if over.is_empty() {
                Criterion::pass(name, evidence)
            } else {
                Criterion::fail(name, format!("{evidence}; over: {}", names(&over)))
            }
        }
        None => Criterion::pass(name, format!("{evidence}; no bound set (max_p99_ms): these are the baseline")),
    }
}

faultline_plugin::export_gate!(P3);

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(faults: Vec<FaultWindow>, checks: Vec<CheckSummary>) -> CellSummary {
        let errors = ErrorCounts { deadline: 0, connection: 0, server: 0, hang: 0 };
        CellSummary {
            scenario: if faults.is_empty() { "latency".into() } else { "kill".into() },
            profile: "3x32".into(),
            shape: "3x32".into(),
            target: "mongo".into(),
            repeat: 1,
            status: CellStatus::Completed,
            measured_s: 30.0,
            ok: 1000,
            failed: 0,
            throughput: 100.0,
            errors,
            over_deadline: 0,
            ops: vec![OpSummary {
                kind: "get".into(),
                ok: 1000,
                failed: 0,
                throughput: 100.0,
                latency: Some(Latency { p50_ms: 5.8, p95_ms: 21.0, p99_ms: 26.0, p999_ms: 30.0, max_ms: 41.9 }),
                errors,
            }],
            faults,
            checks,
        }
    }

    fn fault(confirmed: Option<f64>, denied: Option<f64>, recovered: Option<f64>) -> FaultWindow {
        FaultWindow {
            name: "kill-primary".into(),
            action: "kill".into(),
            target: "mongo-1".into(),
            requested_s: 10.0,
            confirmed_s: confirmed,
            healed_s: None,
            error: None,
            denied_window_s: denied,
            first_success_s: denied.map(|d| d + 0.8),
            recovered_s: recovered,
        }
    }

    fn check(violations: u64) -> CheckSummary {
        CheckSummary {
            checker: "stale-read-after-ack".into(),
            status: if violations == 0 { CheckStatus::Pass } else { CheckStatus::Fail },
            checked: 126_643,
            violations,
            note: String::new(),
        }
    }

    fn run(cells: Vec<CellSummary>) -> RunSummary {
        RunSummary { name: "p3".into(), complete: true, cells }
    }

    fn eval(config: &str, summary: &RunSummary) -> Verdict {
        P3::evaluate(&Config::parse(config).unwrap(), summary).unwrap()
    }

    #[test]
    fn the_seed_run_passes() {
        let summary =
            run(vec![cell(vec![], vec![]), cell(vec![fault(Some(10.1), Some(20.19), Some(21.5))], vec![check(0)])]);
        let v = eval(r#"{"max_denied_window_s": 15, "max_p99_ms": 30}"#, &summary);
        assert_eq!(v.outcome, Outcome::Pass, "{v:#?}");
        let denied = v.criteria.iter().find(|c| c.name.starts_with("Denied")).unwrap();
        assert!(denied.evidence.contains("10.19 s"), "{}", denied.evidence);
    }

    #[test]
    fn a_stale_read_or_a_long_denial_fails() {
        let summary =
            run(vec![cell(vec![], vec![]), cell(vec![fault(Some(10.1), Some(20.19), Some(21.5))], vec![check(1)])]);
        assert_eq!(eval("{}", &summary).outcome, Outcome::Fail);
        let summary =
            run(vec![cell(vec![], vec![]), cell(vec![fault(Some(10.1), Some(20.19), Some(21.5))], vec![check(0)])]);
        assert_eq!(eval(r#"{"max_denied_window_s": 5}"#, &summary).outcome, Outcome::Fail);
    }

    #[test]
    fn missing_measurements_are_incomplete() {
        // No checker result.
        let summary = run(vec![cell(vec![], vec![]), cell(vec![fault(Some(10.1), None, Some(10.5))], vec![])]);
        assert_eq!(eval("{}", &summary).outcome, Outcome::Incomplete);
        // A fault never confirmed.
        let summary = run(vec![cell(vec![], vec![]), cell(vec![fault(None, None, None)], vec![check(0)])]);
        assert_eq!(eval("{}", &summary).outcome, Outcome::Incomplete);
        // A cell that did not complete.
        let mut broken = cell(vec![], vec![]);
        broken.status = CellStatus::Interrupted;
        let summary =
            run(vec![cell(vec![], vec![]), cell(vec![fault(Some(10.1), None, Some(10.5))], vec![check(0)]), broken]);
        assert_eq!(eval("{}", &summary).outcome, Outcome::Incomplete);
        // No faults at all.
        assert_eq!(eval("{}", &run(vec![cell(vec![], vec![check(0)])])).outcome, Outcome::Incomplete);
        assert_eq!(eval("{}", &run(vec![])).outcome, Outcome::Incomplete);
    }

    #[test]
    fn bad_config_is_an_error() {
        assert!(P3::evaluate(&Config::parse(r#"{"max_p99": 5}"#).unwrap(), &run(vec![])).is_err());
    }
}
