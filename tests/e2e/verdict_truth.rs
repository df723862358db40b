//! No PASS on load that was never sent, or on a target that never came back:
//! an open loop accounts for every op due in its window, and a fault's cost
//! is measured to its real end.

use crate::support::*;

fn open_loop_spec(rate: &str, gate: &str) -> String {
    open_loop_spec_sending(rate, "0.99", gate)
}

/// The spec with the profile's `min_sent`: the share of its schedule the
/// open loop must send for the cell to count as measured.
fn open_loop_spec_sending(rate: &str, min_sent: &str, gate: &str) -> String {
    format!(
        "name: open-loop\ntargets:\n  cache: {{kind: redis, provider: process}}\nworkloads:\n  w: {{ops: {{get: 1}}}}\n\
         profiles:\n  paced: {{open: {{rate: {rate}, connections: 2, in_flight: 8, min_sent: {min_sent}}}}}\n\
         timing: {{warmup: 500ms, duration: 2s}}\n\
         scenarios:\n  - {{name: s, target: cache, workload: w, profiles: [paced]}}\ngates:\n  g: {gate}\n"
    )
}

fn cell_stats(r: &serde_json::Value) -> &serde_json::Value {
    &r["cells"][0]["stats"]
}

/// An open loop asked for far more than two connections can send: the ops
/// it never sent are counted, and `errors == 0` on what little was sent is
/// no pass.
#[test]
fn an_open_loop_that_cannot_keep_up_is_never_a_pass() {
    let _load = shared();
    for rate in ["1000000000", "5000000"] {
        let (_d, spec) = spec_file(&open_loop_spec(rate, "errors == 0"));
        let run = run(&spec, &[]);
        assert_eq!(run.code(), 2, "rate {rate}: {}\n{}", run.stdout(), run.stderr());
        let r = run.results();
        assert_eq!(r["verdict"], "INCOMPLETE");
        let open = &cell_stats(&r)["open_loop"];
        let (due, sent, unsent) =
            (open["due"].as_u64().unwrap(), open["sent"].as_u64().unwrap(), open["unsent"].as_u64().unwrap());
        assert_eq!(due, sent + unsent, "{open}");
        // Two seconds of the asked rate were due (give or take an op per connection).
        let asked: f64 = rate.parse().unwrap();
        assert!((due as f64 - 2.0 * asked).abs() <= 4.0, "rate {rate}: {open}");
        assert!(sent < due / 2, "rate {rate}: {open}");
        let achieved = open["achieved_rate"].as_f64().unwrap();
        assert!((achieved - sent as f64 / 2.0).abs() < 1.0, "{open}");
        let gate = &r["gates"][0];
        assert_eq!(gate["result"], "incomplete", "{gate}");
        assert!(gate["evidence"].as_str().unwrap().contains("unsent"), "{gate}");
        assert!(run.report().contains("unsent**"), "{}", run.report());
    }
    // A gate on the schedule itself judges the cell: it was not kept.
    let (_d, spec) = spec_file(&open_loop_spec("5000000", "unsent == 0"));
    let run = run(&spec, &[]);
    assert_eq!(run.code(), 1, "{}\n{}", run.stdout(), run.stderr());
}

/// The control: a rate the lane keeps sends every op due, and passes. The
/// machine may be too slow for even that at some moment: then, asked to
/// send all of its schedule (`min_sent: 1`), the run is INCOMPLETE and
/// says what it could not send, and every op it did send was answered.
#[test]
fn an_open_loop_that_keeps_its_schedule_sends_every_op_due() {
    let _load = shared();
    let (_d, spec) = spec_file(&open_loop_spec_sending("2000", "1", "errors == 0"));
    let run = run(&spec, &[]);
    let passed = measured_as_asked(&run, &[]);
    let r = run.results();
    let open = &cell_stats(&r)["open_loop"];
    let (due, sent) = (open["due"].as_u64().unwrap(), open["sent"].as_u64().unwrap());
    assert_eq!(due, 4000, "{open}");
    assert_eq!(due, sent + open["unsent"].as_u64().unwrap(), "{open}");
    assert_eq!(passed, sent == due, "{open}");
    assert_eq!(cell_stats(&r)["ok"].as_u64().unwrap(), sent, "every op sent was answered");
}

/// A process target killed and never restarted: its denied window has no
/// end, so a gate bounding it fails, and every failure after the kill is
/// counted, also those that ended after the window.
#[test]
fn a_target_that_never_recovers_has_an_unbounded_denied_window() {
    let _load = shared();
    let (_d, spec) = spec_file(
        "name: crash\ntargets:\n  cache: {kind: redis, provider: process}\nworkloads:\n  w: {ops: {get: 1}}\n\
         profiles:\n  p: {closed: 2x8}\ntiming: {warmup: 0s, duration: 3s, deadline: 500ms}\nscenarios:\n\
         \x20 - {name: s, target: cache, workload: w, profiles: [p],\n\
         \x20    faults: [{name: crash, at: 1s, action: kill, target: cache}]}\n\
         gates:\n  denial: denied_window(crash) <= 3500ms\n  back: first_success(crash) < 10s\n",
    );
    let run = run(&spec, &[]);
    assert_eq!(run.code(), 1, "{}\n{}", run.stdout(), run.stderr());
    let r = run.results();
    let stats = cell_stats(&r);
    let impact = &stats["fault_impact"][0];
    assert_eq!(impact["not_recovered"], true, "{impact}");
    assert!(impact["denied_window_s"].is_null(), "{impact}");
    // Every failure after the kill is the fault's. (A busy machine may have
    // held an op past its 500 ms deadline before the kill too: such a
    // failure is in the timeline before the fault was requested, not the
    // fault's. The deadline stays short: the kill is healed at the end of
    // the cell, and ops waiting longer would be answered by the restart.)
    let requested = r["cells"][0]["faults"][0]["requested_s"].as_f64().unwrap();
    let step = stats["timeline_step_s"].as_f64().unwrap();
    let timeline = stats["timeline"].as_array().unwrap();
    let failed_in = |before: bool| -> u64 {
        let t = |p: &serde_json::Value| p["t"].as_f64().unwrap();
        timeline
            .iter()
            .filter(|p| if before { t(p) + step <= requested } else { t(p) < requested && t(p) + step > requested })
            .map(|p| p["failed"].as_u64().unwrap())
            .sum()
    };
    let (all, fault) = (stats["failed"].as_u64().unwrap(), impact["failed"].as_u64().unwrap());
    let (before, straddling) = (failed_in(true), failed_in(false));
    assert!(fault > 0 && fault <= all - before && fault + straddling >= all - before, "{impact} vs {stats}");
    for gate in r["gates"].as_array().unwrap() {
        assert_eq!(gate["result"], "fail", "{gate}");
        assert!(gate["evidence"].as_str().unwrap().contains("not recovered"), "{gate}");
    }
    assert!(run.report().contains("unbounded: not recovered by the end of the cell"), "{}", run.report());
}

/// Error replies are kept with examples: counted under the server's own
/// error code, per cell, in results.json and the report (here a server
/// whose memory is full refuses writes).
#[test]
fn server_errors_are_counted_by_code_with_examples() {
    let _load = shared();
    let (_d, spec) = spec_file(
        "name: errors\ntargets:\n  cache: {kind: redis, provider: process, args: [--maxmemory, 2mb]}\n\
         workloads:\n  w: {ops: {set: 1}, keys: {count: 100000}, value_size: 1KiB}\n\
         profiles:\n  p: {closed: 1x4}\ntiming: {warmup: 0s, duration: 1s}\n\
         scenarios:\n  - {name: s, target: cache, workload: w, profiles: [p]}\ngates:\n  g: errors == 0\n",
    );
    let run = run(&spec, &[]);
    assert_eq!(run.code(), 1, "{}\n{}", run.stdout(), run.stderr());
    let r = run.results();
    let stats = cell_stats(&r);
    let labels = stats["error_labels"].as_array().unwrap();
    assert_eq!(labels.len(), 1, "{labels:?}");
    assert_eq!(labels[0]["label"], "server OOM");
    assert_eq!(labels[0]["count"], stats["errors"]["server"]);
    assert!(stats["errors"]["server"].as_u64().unwrap() > 10, "{stats}");
    let example = labels[0]["examples"][0].as_str().unwrap();
    assert_eq!(example, "OOM command not allowed when used memory > 'maxmemory'.");
    assert!(run.report().contains(&format!("× server OOM (e.g. “{example}”)")), "{}", run.report());
}
