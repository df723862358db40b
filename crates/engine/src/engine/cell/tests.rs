//! Each phase of a cell alone, against the in-memory kind of the engine's
//! tests (engine/tests.rs): what it takes, what it gives, and how it stops
//! a cell that cannot go on. The phases are called one after another as
//! `Engine::run_cell` does, with what one gave changed where a test needs
//! it (a fault record, a history that could not be written), so each
//! phase's own rule is what is asserted.

use std::time::Duration;

use super::{bring_up, finish, judge, merge, run_window, summarize};
use crate::engine::tests::{executed, Bench};
use faultline_model::checks::CheckStatus;
use faultline_model::faults::FaultRecord;
use faultline_model::probes::{ProbeStatus, ProbeWhen};
use faultline_model::results::CellStatus;

const CLOSED: &str = "{closed: 3x2}";
const SHORT: &str = "{warmup: 100ms, duration: 300ms}";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bring_up_connects_each_lane_and_runs_the_before_probes_before_any_load() {
    let probes = "[{name: hello, when: before, run: 'echo at {uri}'}]";
    let bench = Bench::new("memory://armed", CLOSED, SHORT, probes);
    let (engine, running) = (bench.engine(), bench.running());
    let run = bench.cell(&engine, &running);
    let armed = bring_up(&run).await.unwrap_or_else(|s| panic!("{}", s.why()));
    let lanes: Vec<usize> = armed.clients.iter().map(|(lane, _)| *lane).collect();
    assert_eq!(lanes, [0, 1, 2], "one connected client per lane of 3x2");
    assert!(armed.shape.is_none(), "the workload has no shape plugin");
    let [probe] = armed.kept.probes.as_slice() else { panic!("{:?}", armed.kept.probes) };
    assert_eq!((probe.when, probe.status), (ProbeWhen::Before, ProbeStatus::Ok), "{probe:?}");
    assert_eq!(probe.command, "echo at memory://armed");
    let output = std::fs::read_to_string(engine.run_dir.join(&probe.file)).unwrap();
    assert!(output.contains("at memory://armed"), "{output}");
    assert!(armed.kept.faults.is_empty());
    assert_eq!(executed("memory://armed"), 0, "nothing is sent before the clock starts");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_that_takes_no_connection_fails_the_cell_before_any_load() {
    let bench = Bench::new("memory://refuse-all", CLOSED, SHORT, "[]");
    let (engine, running) = (bench.engine(), bench.running());
    let run = bench.cell(&engine, &running);
    let Err(stopped) = bring_up(&run).await else { panic!("a refused connection arms no cell") };
    let result = stopped.into_result(engine.skipped(run.cell));
    assert_eq!(result.status, CellStatus::Failed);
    let error = result.error.unwrap_or_default();
    assert!(error.contains("cannot open 3 connections") && error.contains("takes no connection"), "{error}");
    assert!(result.stats.is_none() && result.checks.is_empty());
    assert_eq!(executed("memory://refuse-all"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lane_that_crashes_fails_the_cell_when_the_books_are_merged() {
    let bench = Bench::new("memory://panicky-lane", CLOSED, SHORT, "[]");
    let (engine, running) = (bench.engine(), bench.running());
    let run = bench.cell(&engine, &running);
    let armed = bring_up(&run).await.unwrap_or_else(|s| panic!("{}", s.why()));
    let ran = run_window(&run, armed).await.unwrap_or_else(|s| panic!("{}", s.why()));
    assert_eq!(ran.ends.iter().filter(|end| end.is_err()).count(), 3, "every lane's task crashed");
    let Err(stopped) = merge(&run, ran) else { panic!("books of crashed lanes are not measured") };
    let result = stopped.into_result(engine.skipped(run.cell));
    assert_eq!(result.status, CellStatus::Failed);
    assert!(result.error.as_deref().is_some_and(|e| e.starts_with("a load client crashed")), "{:?}", result.error);
}

/// Interrupted 200 ms into a 30 s window: the window is what ran, the stats
/// are per that, and the checkers do not pass what they did not judge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_window_is_measured_to_where_it_stopped_and_left_unjudged() {
    let bench = Bench::new("memory://interrupted", CLOSED, "{warmup: 100ms, duration: 30s}", "[]");
    let (engine, running) = (bench.engine(), bench.running());
    let run = bench.cell(&engine, &running);
    let mut armed = bring_up(&run).await.unwrap_or_else(|s| panic!("{}", s.why()));
    // The clock starts when the test says, and the interruption is set
    // from it: it lands in the measured window, not in the set-up before.
    let start = tokio::time::Instant::now() + Duration::from_millis(5);
    armed.start_at = Some(start);
    let cancel = engine.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep_until(start + Duration::from_millis(100 + 200)).await;
        cancel.cancel();
    });
    let ran = run_window(&run, armed).await.unwrap_or_else(|s| panic!("{}", s.why()));
    let measure_from = ran.clock.measure_from;
    let merged = merge(&run, ran).unwrap_or_else(|s| panic!("{}", s.why()));
    assert_eq!(merged.status, CellStatus::Interrupted);
    let window = merged.window;
    assert!(window > Duration::ZERO && window <= measure_from.elapsed(), "{window:?}: up to the interruption");
    let measured = summarize(&run, merged);
    assert_eq!(measured.measured_s, window.as_secs_f64(), "the stats are per the window that ran");
    assert!(measured.stats.ok > 0 && measured.stats.failed == 0, "{:?}", measured.stats);
    let judged = judge(&run, measured).await;
    assert_eq!(judged.checks.len(), 2);
    for check in &judged.checks {
        assert_eq!(check.status, CheckStatus::Unknown, "{check:?}");
        assert!(check.note.contains("interrupted"), "{check:?}");
    }
}

/// A fault that failed changes what the cell measured: summarize says so
/// on the console, in the fault's own words, and keeps its record beside
/// the others. (Impacts are measured only around confirmed faults of a
/// cell that planned faults: the fault tests' kind, fault/tests.rs.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_fault_is_said_and_every_record_is_kept() {
    let bench = Bench::new("memory://faulted", CLOSED, SHORT, "[]");
    let (engine, running) = (bench.engine(), bench.running());
    let run = bench.cell(&engine, &running);
    let armed = bring_up(&run).await.unwrap_or_else(|s| panic!("{}", s.why()));
    let mut ran = run_window(&run, armed).await.unwrap_or_else(|s| panic!("{}", s.why()));
    let fault = |name: &str| FaultRecord::requested(name, "pause", "kv", 0.1);
    let confirmed = FaultRecord { confirmed_s: Some(0.1), healed_s: Some(0.2), ..fault("cut") };
    let failed = FaultRecord { error: Some("no member answers".into()), ..fault("broken") };
    ran.kept.faults = vec![confirmed, failed];
    let merged = merge(&run, ran).unwrap_or_else(|s| panic!("{}", s.why()));
    let measured = summarize(&run, merged);
    let said = bench.said();
    assert!(said.iter().any(|l| l == "fault `broken` (pause on kv) failed: no member answers"), "{said:?}");
    assert!(!said.iter().any(|l| l.contains("`cut`")), "{said:?}");
    let kept: Vec<&str> = measured.kept.faults.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(kept, ["cut", "broken"]);
}

/// A history that could not be written in full leaves every checker
/// `unknown`, never passed; finish still runs the after-probes and keeps
/// the before-probes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incomplete_history_is_never_passed_and_finish_keeps_every_probe() {
    let probes = "[{name: first, when: before, run: 'echo before'}, {name: last, when: after, run: 'echo after'}]";
    let bench = Bench::new("memory://incomplete", CLOSED, SHORT, probes);
    let (engine, running) = (bench.engine(), bench.running());
    let run = bench.cell(&engine, &running);
    let armed = bring_up(&run).await.unwrap_or_else(|s| panic!("{}", s.why()));
    let ran = run_window(&run, armed).await.unwrap_or_else(|s| panic!("{}", s.why()));
    let merged = merge(&run, ran).unwrap_or_else(|s| panic!("{}", s.why()));
    assert!(merged.incomplete.is_none(), "{:?}", merged.incomplete);
    let mut measured = summarize(&run, merged);
    measured.incomplete = Some(anyhow::anyhow!("no space left on device"));
    let judged = judge(&run, measured).await;
    assert_eq!(judged.checks.len(), 2);
    for check in &judged.checks {
        assert_eq!(check.status, CheckStatus::Unknown, "{check:?}");
        assert!(check.note.contains("the history is incomplete: no space left on device"), "{check:?}");
    }
    let ok = judged.stats.ok;
    let result = finish(&run, judged).await;
    assert_eq!(result.status, CellStatus::Completed);
    assert_eq!(result.stats.as_ref().map(|s| s.ok), Some(ok));
    let probes: Vec<(&str, ProbeWhen)> = result.probes.iter().map(|p| (p.name.as_str(), p.when)).collect();
    assert_eq!(probes, [("first", ProbeWhen::Before), ("last", ProbeWhen::After)]);
}
