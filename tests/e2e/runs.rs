//! Whole campaigns against real redis-server processes.

use crate::support::*;

fn cells(results: &serde_json::Value) -> &Vec<serde_json::Value> {
    results["cells"].as_array().expect("cells")
}

#[test]
fn quickstart_passes_and_reports_every_profile() {
    let _load = shared();
    let run = run(&repo().join("specs/quickstart.yaml"), &["--set", "duration=2s"]);
    let r = run.results();
    let verdict = quickstart_verdict(&r);
    assert_eq!(r["verdict"], verdict, "{}\n{}", run.stdout(), run.stderr());
    assert_eq!(run.code(), [("PASS", 0), ("FAIL", 1), ("INCOMPLETE", 2)].iter().find(|v| v.0 == verdict).unwrap().1);
    assert!(run.stdout().contains(&format!("verdict: {verdict}")), "{}", run.stdout());
    let passed = verdict == "PASS";

    assert_eq!(r["schema_version"], 1);
    assert_eq!(r["run"]["params"]["duration"], "2s");
    assert!(r["targets"][0]["server"].as_str().unwrap().starts_with("redis "), "{}", r["targets"]);
    let cells = cells(&r);
    assert_eq!(cells.len(), 4);
    for cell in cells {
        assert_eq!(cell["status"], "completed", "{cell}");
        let stats = &cell["stats"];
        let ok = stats["ok"].as_u64().unwrap();
        assert!(ok > 0, "{} measured no op", cell["profile"]);
        // The per-op counts add up to the cell's, and the timeline to both.
        let per_op_ok: u64 = stats["per_op"].as_object().unwrap().values().map(|o| o["ok"].as_u64().unwrap()).sum();
        assert_eq!(per_op_ok, ok);
        let timeline = stats["timeline"].as_array().unwrap();
        // A 2 s window is drawn in 100 ms buckets (one per second in longer ones).
        let step = stats["timeline_step_s"].as_f64().unwrap();
        assert_eq!(timeline.len(), (2.0 / step).round() as usize, "one point per bucket of {step} s");
        let timeline_ok: u64 = timeline.iter().map(|p| p["ok"].as_u64().unwrap()).sum();
        assert_eq!(timeline_ok, ok);
        let throughput = stats["throughput"].as_f64().unwrap();
        assert!((throughput - ok as f64 / 2.0).abs() < 1.0, "throughput is ok ops over the 2s window");
        let get = &stats["per_op"]["get"]["latency_ms"];
        let (p50, p99, max) =
            (get["p50"].as_f64().unwrap(), get["p99"].as_f64().unwrap(), get["max"].as_f64().unwrap());
        assert!(0.0 < p50 && p50 <= p99 && p99 <= max, "{get}");
    }
    // The open-loop cell accounts for every op its 20,000/s schedule had
    // due in the 2 s window (give or take one per connection), sent or
    // not; a pass means it sent them as asked. It reports its lag.
    let paced = cells.iter().find(|c| c["profile"] == "paced").unwrap();
    let open = &paced["stats"]["open_loop"];
    let (due, sent, unsent) =
        (open["due"].as_u64().unwrap(), open["sent"].as_u64().unwrap(), open["unsent"].as_u64().unwrap());
    assert!(due.abs_diff(40_000) <= 4 && due == sent + unsent, "{open}");
    if passed {
        assert!(sent as f64 >= 0.99 * due as f64, "{open}");
    }
    assert!(paced["stats"]["schedule_lag_ms"]["p99"].as_f64().is_some());

    let report = run.report();
    let verdict = format!("**Verdict: {verdict}**");
    for needle in [
        "# faultline: quickstart",
        verdict.as_str(),
        "## latency — serial (closed 1x1)",
        "## latency — realistic (closed 3x32)",
        "## latency — stress (closed 10x32)",
        "| Variant | Repeat | Op | Throughput/s | p50 | p95 | p99 | p99.9 | max |",
        "| fast-gets | `p99(get) < 30ms` |",
        "schedule lag p99",
        "redis 7",
    ] {
        assert!(report.contains(needle), "report lacks {needle:?}:\n{report}");
    }
    let dir = run.dir.as_ref().unwrap();
    assert!(dir.join("spec.yaml").is_file() && dir.join("run.log").is_file() && dir.join("logs/cache.log").is_file());
    assert!(
        std::fs::read_to_string(dir.join("spec.yaml")).unwrap().contains("duration: 2s"),
        "spec as run has params resolved"
    );
}

/// The quickstart's verdict as its gates must decide it from what faultline
/// recorded. Two gates judge this machine's speed (a get's p99 under 30 ms,
/// the open loop's schedule lag under 10 ms): on a busy machine either may
/// fail, and that is faultline measuring right, so the test asks only that
/// each decision follows from the value recorded. The other two (no errors,
/// no hangs) must hold. A cell whose open loop sent less than its
/// `min_sent` passes no gate, except the lag gate, which judges the
/// schedule itself.
fn quickstart_verdict(r: &serde_json::Value) -> &'static str {
    let cells = cells(r);
    let paced = &cells.iter().find(|c| c["profile"] == "paced").unwrap()["stats"];
    let open = &paced["open_loop"];
    let under_sent = (open["sent"].as_f64().unwrap()) < 0.99 * open["due"].as_f64().unwrap();
    let get_p99 = |c: &serde_json::Value| c["stats"]["per_op"]["get"]["latency_ms"]["p99"].as_f64().unwrap();
    let slow_gets = cells.iter().any(|c| get_p99(c) >= 30.0);
    let lagged = paced["schedule_lag_ms"]["p99"].as_f64().unwrap() >= 10.0;
    let unsent_or = |fails: bool| match (fails, under_sent) {
        (true, _) => "fail",
        (false, true) => "incomplete",
        (false, false) => "pass",
    };
    let expected = [
        ("no-errors", unsent_or(false)),
        ("no-hangs", unsent_or(false)),
        ("fast-gets", unsent_or(slow_gets)),
        ("keeps-up", if lagged { "fail" } else { "pass" }),
    ];
    for (name, result) in expected {
        let gate = r["gates"].as_array().unwrap().iter().find(|g| g["name"] == name).unwrap();
        assert_eq!(gate["result"], result, "{gate}");
    }
    match (expected.iter().any(|g| g.1 == "fail"), expected.iter().any(|g| g.1 == "incomplete")) {
        (true, _) => "FAIL",
        (false, true) => "INCOMPLETE",
        (false, false) => "PASS",
    }
}

const TWO_REDIS: &str = r#"
name: ab
targets:
  base: {kind: redis, provider: process}
  candidate: {kind: redis, provider: process, args: ["--io-threads", "1"]}
workloads:
  w: {ops: {get: 90, set: 10}, keys: {count: 1000}}
profiles:
  p: {closed: 2x8}
timing: {warmup: 200ms, duration: 1s, repeats: 2}
scenarios:
  - {name: s, target: [base, candidate], workload: w, profiles: [p]}
gates:
  impossible: p50(get) < 1us
  also-fine: errors == 0
"#;

#[test]
fn variants_alternate_and_a_failing_gate_fails_the_run() {
    let _load = shared();
    let (_d, spec) = spec_file(TWO_REDIS);
    let run = run(&spec, &[]);
    assert_eq!(run.code(), 1, "{}\n{}", run.stdout(), run.stderr());
    let r = run.results();
    assert_eq!(r["verdict"], "FAIL");
    let order: Vec<String> =
        cells(&r).iter().map(|c| format!("{}#{}", c["target"].as_str().unwrap(), c["repeat"])).collect();
    assert_eq!(order, ["base#1", "candidate#1", "candidate#2", "base#2"]);
    let gate = r["gates"].as_array().unwrap().iter().find(|g| g["name"] == "impossible").unwrap();
    assert_eq!(gate["result"], "fail");
    let evidence = gate["evidence"].as_str().unwrap();
    assert!(evidence.contains("fails in 4 of 4 cells") && evidence.contains("p50(get) = "), "{evidence}");
    let cmp = &r["comparisons"][0];
    assert_eq!(
        (cmp["baseline"].as_str(), cmp["target"].as_str(), cmp["repeats"].as_u64()),
        (Some("base"), Some("candidate"), Some(2))
    );
    assert!(cmp["throughput"].is_object(), "{cmp}");
    if let Some(ratio) = cmp["throughput"]["value"].as_f64() {
        assert!(ratio > 0.2 && ratio < 5.0, "two identical servers differ by {ratio}x");
    }
    assert!(run.report().contains("## Comparisons"));
}

#[test]
fn quick_and_only_runs_are_incomplete() {
    let _load = shared();
    let run = run(&repo().join("specs/quickstart.yaml"), &["--quick", "--only", "latency"]);
    let r = run.results();
    // Never PASS: INCOMPLETE, or FAIL where a gate failed (a timing gate on
    // a busy machine: the verdict is right either way), and it says why.
    let failed = r["gates"].as_array().unwrap().iter().any(|g| g["result"] == "fail");
    let (code, verdict) = if failed { (1, "FAIL") } else { (2, "INCOMPLETE") };
    assert_eq!(run.code(), code, "{}\n{}", run.stdout(), run.stderr());
    assert_eq!(r["verdict"], verdict);
    assert!(r["verdict_reasons"].to_string().contains("--quick"), "{}", r["verdict_reasons"]);
    assert_eq!(cells(&r)[0]["measured_s"], 2.0);
}

#[test]
fn report_rerenders_with_a_user_template() {
    let _load = shared();
    let run = run(&repo().join("specs/quickstart.yaml"), &["--quick"]);
    let dir = run.dir.clone().unwrap();
    let template = dir.join("mine.j2");
    std::fs::write(
        &template,
        "{{ run.name }} {{ verdict }} {% for c in cells %}{{ c.profile }}={{ c.stats.ok > 0 }} {% endfor %}",
    )
    .unwrap();
    let out = faultline().arg("report").arg(&dir).arg("--template").arg(&template).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert_eq!(report, "quickstart INCOMPLETE serial=True realistic=True stress=True paced=True ");

    let broken = dir.join("broken.j2");
    std::fs::write(&broken, "{% for %}").unwrap();
    let out = faultline().arg("report").arg(&dir).arg("--template").arg(&broken).output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("broken.j2"));
}

#[test]
fn dry_run_prints_the_plan_and_starts_nothing() {
    let out = faultline().args(["run", "specs/quickstart.yaml", "--dry-run", "--set", "duration=3s"]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("4 cells, about 16s of load"), "{text}");
    assert!(
        text.contains("latency/stress/cache#1")
            && text.contains("closed 10x32")
            && text.contains("open 20000/s over 4x64"),
        "{text}"
    );
}

#[test]
fn schema_describes_the_spec() {
    let out = faultline().arg("schema").output().unwrap();
    assert!(out.status.success());
    let schema: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let props = schema["properties"].as_object().unwrap();
    for key in ["name", "targets", "workloads", "profiles", "timing", "scenarios", "gates", "report"] {
        assert!(props.contains_key(key), "schema lacks {key}");
    }
    assert_eq!(schema["required"].as_array().unwrap().len(), 5, "{}", schema["required"]);
}

#[test]
fn the_readme_example_is_a_valid_fifteen_line_spec() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let example = readme.split("```yaml\n").nth(1).and_then(|rest| rest.split("```").next()).expect("a yaml block");
    assert_eq!(example.lines().count(), 15, "{example}");
    let (_dir, path) = spec_file(example);
    let out = faultline().arg("validate").arg(&path).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("ok (1 scenario, 4 cells)"));
}

/// A cell of contention rounds ends when its rounds are answered; its
/// duration is a cap. Its progress line (plain, every 5 s, as in CI) says
/// how many rounds are done of how many, not the cap as time left. A 6 s
/// freeze at the start keeps the cell running past the first line.
#[test]
fn progress_of_contention_rounds_counts_rounds_not_the_duration_cap() {
    let _load = shared();
    let (_d, spec) = spec_file(
        "name: rounds-progress\ntargets:\n  cache: {kind: redis, provider: process}\n\
         workloads:\n  w: {ops: {set: 1}, keys: {count: 300, distribution: rounds}}\n\
         profiles:\n  p: {closed: 2x2}\ntiming: {warmup: 0s, duration: 120s, deadline: 30s}\nscenarios:\n\
         \x20 - {name: s, target: cache, workload: w, profiles: [p],\n\
         \x20    faults: [{name: frozen, at: 0s, action: pause, target: cache, heal_after: 6s}]}\n",
    );
    let run = run(&spec, &[]);
    assert!(run.code() != 3, "{}\n{}", run.stdout(), run.stderr());
    let stderr = run.stderr();
    let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with("[cell 1/1]")).collect();
    assert!(!lines.is_empty(), "a progress line while frozen: {stderr}");
    for line in &lines {
        assert!(line.contains("/300 after "), "rounds done of rounds asked: {line}");
        assert!(!line.contains("left in run") && !line.contains("/2m"), "no duration cap as ETA: {line}");
    }
    assert_eq!(run.results()["cells"][0]["status"], "completed", "{stderr}");
}
