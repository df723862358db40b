//! Ramping stages against a real redis-server: the schedule faultline
//! recorded follows the stages' rates (each stage's due ops are the
//! integral of its rate, every one sent or counted unsent), the timeline
//! shows the asked rate beside the achieved one, and a gate naming a stage
//! is judged on that stage. What the machine managed to send is its own
//! business: only what faultline recorded and decided is asserted.

use crate::support::*;

const SPEC: &str = "name: stages
targets:
  cache: {kind: redis, provider: process}
workloads:
  w: {ops: {get: 1, set: 1}}
profiles:
  ramp:
    open:
      connections: 2
      in_flight: 16
      min_sent: 0
      stages: [{name: up, to: 400, over: 2s}, {name: peak, hold: 2s}]
timing: {warmup: 300ms}
scenarios:
  - {name: s, target: cache, workload: w, profiles: [ramp]}
gates:
  peak-latency: {expr: \"p99(get, stage: peak) < 10s\", profile: ramp}
  peak-sent: \"unsent(stage: peak) <= 1000000\"
";

#[test]
fn a_ramp_and_a_hold_are_scheduled_and_judged_stage_by_stage() {
    let _load = shared();
    let (_d, spec) = spec_file(SPEC);
    let run = run(&spec, &[]);
    let r = run.results();
    let context = || format!("{}\n{}", run.stdout(), run.stderr());
    assert!([0, 1].contains(&run.code()), "exit {}: {}", run.code(), context());
    let cell = &r["cells"][0];
    assert_eq!(cell["status"], "completed", "{}", context());
    // The window is the stages' 4 s, whatever `timing.duration` says.
    assert_eq!(cell["measured_s"].as_f64().unwrap(), 4.0);
    let stats = &cell["stats"];
    let stages = stats["stages"].as_array().unwrap();
    let names: Vec<&str> = stages.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["up", "peak"]);
    // 0 to 400/s over 2 s is 400 ops; 400/s held 2 s is 800: the integral,
    // within the one op a float may put either side of the edge.
    for (stage, integral, span) in [(&stages[0], 400u64, [0.0, 2.0]), (&stages[1], 800, [2.0, 4.0])] {
        let n = |k: &str| stage[k].as_u64().unwrap();
        assert!(n("due").abs_diff(integral) <= 1, "{stage}");
        assert_eq!([stage["from_s"].as_f64().unwrap(), stage["to_s"].as_f64().unwrap()], span);
        assert!((stage["target_rate"].as_f64().unwrap() - integral as f64 / 2.0).abs() < 1e-6, "{stage}");
        assert!(stage["per_op"]["get"].is_object() || n("sent") == 0, "{stage}");
    }
    // The stages account for the whole window, and nothing was due in the
    // warm-up, which runs at the rate the stages start from (0).
    let open = &stats["open_loop"];
    let total: u64 = stages.iter().map(|s| s["due"].as_u64().unwrap()).sum();
    assert_eq!(open["due"].as_u64().unwrap(), total, "{open}");
    assert!((open["rate"].as_f64().unwrap() - 300.0).abs() < 1e-6, "{open}");
    // The timeline's asked rate follows the stages: 100 ms points, the
    // ramp's mean over each, then the hold.
    let timeline = stats["timeline"].as_array().unwrap();
    assert_eq!(timeline.len(), 40);
    for (i, p) in timeline.iter().enumerate() {
        let t = i as f64 * 0.1;
        let asked = if t < 2.0 { 200.0 * (t + 0.05) } else { 400.0 };
        let target = p["target_rate"].as_f64().unwrap();
        assert!((target - asked).abs() < 1e-3 * asked, "point {i}: {target} vs {asked}");
    }
    // The gates naming a stage were judged on it.
    for gate in r["gates"].as_array().unwrap() {
        assert!(["pass", "fail"].contains(&gate["result"].as_str().unwrap()), "{gate}\n{}", context());
        assert!(gate["evidence"].as_str().unwrap().contains("stage: peak"), "{gate}");
    }
    let report = run.report();
    let row = report.lines().find(|l| l.starts_with("| peak | 2")).unwrap_or_else(|| panic!("{report}"));
    assert!(row.contains("/s |"), "{row}");
    assert!(report.contains(", asked `"), "{report}");
}

/// A closed loop that adds clients in steps: each step is measured on its
/// own, with its clients, and a gate naming a step is judged on it.
#[test]
fn a_closed_loop_in_steps_is_measured_step_by_step() {
    let _load = shared();
    let (_d, spec) = spec_file(
        "name: steps
targets:
  cache: {kind: redis, provider: process}
workloads:
  w: {ops: {get: 1}}
profiles:
  steps: {closed: {stages: [{clients: 1, hold: 1s}, {name: more, clients: 3, hold: 1s}], in_flight: 2}}
timing: {warmup: 200ms, duration: 30s}
scenarios:
  - {name: s, target: cache, workload: w, profiles: [steps]}
gates:
  more-latency: \"p99(stage: more) < 10s\"
",
    );
    let run = run(&spec, &[]);
    let r = run.results();
    let context = || format!("{}\n{}", run.stdout(), run.stderr());
    assert!([0, 1].contains(&run.code()), "exit {}: {}", run.code(), context());
    let cell = &r["cells"][0];
    assert_eq!(cell["shape"], "closed 2 stages up to 3x2", "{cell}");
    // The steps' 2 s are the window, not `timing.duration`.
    assert_eq!(cell["measured_s"].as_f64().unwrap(), 2.0);
    let stats = &cell["stats"];
    let stages = stats["stages"].as_array().unwrap();
    let steps: Vec<(&str, u64)> =
        stages.iter().map(|s| (s["name"].as_str().unwrap(), s["clients"].as_u64().unwrap())).collect();
    assert_eq!(steps, [("stage1", 1), ("more", 3)]);
    for s in stages {
        let n = |k: &str| s[k].as_u64().unwrap();
        // No schedule: what was issued is what was due, and nothing is owed.
        assert_eq!((n("unsent"), n("due")), (0, n("sent")), "{s}");
        assert_eq!(n("sent"), n("ok") + n("failed"), "{s}");
        assert!(s.get("target_rate").is_none(), "{s}");
    }
    let sent: u64 = stages.iter().map(|s| s["sent"].as_u64().unwrap()).sum();
    assert_eq!(sent, stats["ok"].as_u64().unwrap() + stats["failed"].as_u64().unwrap());
    assert!(stats["timeline"].as_array().unwrap().iter().all(|p| p.get("target_rate").is_none()));
    let gate = &r["gates"][0];
    assert!(["pass", "fail"].contains(&gate["result"].as_str().unwrap()), "{gate}\n{}", context());
    let report = run.report();
    let row = report.lines().find(|l| l.starts_with("| more | 1")).unwrap_or_else(|| panic!("{report}"));
    assert!(row.contains("| 3 clients |"), "{row}");
}
