//! Comparison campaigns against real redis-servers: a matrix of server
//! configurations and load shapes, each target in a directory of its own,
//! restarts (crash and clean) with every acknowledged write looked for
//! afterwards, isolation of competitors, probes and the provenance manifest,
//! and the shipped kv-durability campaign end to end.

use std::path::Path;
use std::process::Command;

use crate::support::*;

fn cells(r: &serde_json::Value) -> &Vec<serde_json::Value> {
    r["cells"].as_array().unwrap()
}

/// `faultline run` started from `cwd`, writing its run directory under `cwd/runs`.
fn run_in(cwd: &Path, spec: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_faultline")).current_dir(cwd).arg("run").arg(spec).args(args).output().unwrap()
}

const MATRIX: &str = r#"name: matrix
targets:
  a: {kind: redis, provider: process, args: [--appendonly, "yes", --appendfsync, {fsync}]}
  b: {kind: redis, provider: process, args: [--appendonly, "yes", --appendfsync, "{fsync}"]}
workloads:
  w: {ops: {set: 1}, keys: {count: 1000}}
profiles:
  p: {closed: "2x{depth}"}
timing: {warmup: 0s, duration: 300ms, repeats: 2}
scenarios:
  - name: s
    target: [a, b]
    workload: w
    profiles: [p]
    matrix: {fsync: [always, everysec], depth: [1, 4]}
    probes:
      - {name: config, when: start, run: "redis-cli -p {port} CONFIG GET appendfsync"}
      - {name: dir, when: start, run: "redis-cli -p {port} CONFIG GET dir"}
      - {name: persistence, when: after, run: "redis-cli -p {port} INFO persistence | grep aof_enabled"}
      - {name: missing, when: before, run: "no-such-program-here --version"}
gates:
  g: errors == 0
"#;

/// Every point runs with its own values: the dry run lists each cell, the
/// results carry each cell's values, each server really ran with its
/// `appendfsync` (probed), in a directory of its own under the run
/// directory, and nothing was written where faultline was started.
#[test]
fn a_matrix_runs_every_point_with_its_values_in_directories_of_its_own() {
    let _load = shared();
    let (dir, spec) = spec_file(MATRIX);
    let dry = faultline().arg("run").arg(&spec).arg("--dry-run").output().unwrap();
    let plan = String::from_utf8_lossy(&dry.stdout).into_owned();
    assert!(dry.status.success(), "{plan}{}", String::from_utf8_lossy(&dry.stderr));
    assert!(plan.contains("16 cells"), "{plan}");
    for label in ["s[fsync=always,depth=1]/p/a#1", "s[fsync=always,depth=1]/p/b#2", "s[fsync=everysec,depth=4]/p/a#2"] {
        assert!(plan.contains(label), "{label} in {plan}");
    }
    assert!(plan.contains("redis-server --appendonly yes --appendfsync everysec"), "{plan}");

    let cwd = tempfile::tempdir().unwrap();
    let out = run_in(cwd.path(), &spec, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    // Nothing of the servers' in the directory faultline was started from.
    let entries: Vec<String> =
        std::fs::read_dir(cwd.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(entries, ["runs"], "the servers wrote into the current directory");
    let run_dir = run_dir(&cwd.path().join("runs")).unwrap();
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("results.json")).unwrap()).unwrap();

    assert_eq!(cells(&r).len(), 16);
    for c in cells(&r) {
        assert_eq!(c["status"], "completed", "{c}");
        let (fsync, depth) = (c["matrix"]["fsync"].as_str().unwrap(), c["matrix"]["depth"].as_str().unwrap());
        assert_eq!(c["shape"], format!("closed 2x{depth}"), "{c}");
        assert!(["always", "everysec"].contains(&fsync), "{c}");
        let probes = c["probes"].as_array().unwrap();
        let missing = probes.iter().find(|p| p["name"] == "missing").unwrap();
        assert_eq!(missing["status"], "unavailable", "{missing}");
        assert!(missing["note"].as_str().unwrap().contains("command not found"), "{missing}");
        let after = probes.iter().find(|p| p["name"] == "persistence").unwrap();
        assert_eq!(after["status"], "ok", "{after}");
        let saved = std::fs::read_to_string(run_dir.join(after["file"].as_str().unwrap())).unwrap();
        assert!(saved.contains("aof_enabled:1"), "{saved}");
    }
    // One server per target and fsync value, each with its own directory,
    // holding its own AOF, and really running with its value.
    let targets = r["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 4, "{targets:?}");
    let mut dirs = Vec::new();
    for t in targets {
        let instance = t["instance"].as_str().unwrap();
        let fsync = if instance.contains("fsync=always") { "always" } else { "everysec" };
        let config = t["probes"].as_array().unwrap().iter().find(|p| p["name"] == "config").unwrap();
        assert_eq!(config["status"], "ok", "{config}");
        assert!(config["output"].as_str().unwrap().contains(fsync), "{instance}: {config}");
        let work_dir = t["work_dir"].as_str().unwrap();
        let probed_dir = t["probes"].as_array().unwrap().iter().find(|p| p["name"] == "dir").unwrap();
        assert!(probed_dir["output"].as_str().unwrap().contains(work_dir), "{probed_dir} vs {work_dir}");
        assert!(Path::new(work_dir).starts_with(std::path::absolute(&run_dir).unwrap()), "{work_dir}");
        assert!(Path::new(work_dir).join("appendonlydir").is_dir(), "{work_dir} has no AOF");
        assert!(t["binary"]["sha256"].as_str().unwrap().len() == 64, "{t}");
        dirs.push(work_dir.to_string());
    }
    dirs.sort();
    dirs.dedup();
    assert_eq!(dirs.len(), 4, "two targets shared a directory: {dirs:?}");
    // Comparisons are per point.
    let comparisons = r["comparisons"].as_array().unwrap();
    assert_eq!(comparisons.len(), 4, "{comparisons:?}");
    assert!(comparisons.iter().all(|c| c["matrix"]["fsync"].is_string()), "{comparisons:?}");
    assert!(r["run"]["faultline_commit"].as_str().unwrap().len() >= 7, "{}", r["run"]);
    let report = std::fs::read_to_string(run_dir.join("report.md")).unwrap();
    assert!(report.contains("## s[fsync=everysec,depth=4] — p (closed 2x4)"), "{report}");
    assert!(report.contains("Isolation, `s` | idle"), "{report}");
    assert!(report.contains("`missing` (before) on a[fsync=always]@s: Unavailable"), "{report}");
    drop(dir);
}

fn crash_spec(args: &str, signal: &str) -> String {
    format!(
        r#"name: crash
targets:
  cache: {{kind: redis, provider: process, args: [{args}]}}
workloads:
  w: {{ops: {{set: 1}}, keys: {{count: 1000000}}, value_size: 64B}}
profiles:
  p: {{closed: 2x4}}
timing: {{warmup: 200ms, duration: 1500ms, repeats: 2}}
scenarios:
  - name: s
    target: cache
    workload: w
    profiles: [p]
    faults: [{{name: restarted, at: 1s, action: restart, target: cache{signal}}}]
checkers: [lost-acknowledged-write]
gates:
  nothing-lost: lost_acked_writes == 0
"#
    )
}

/// kill -9 and a start on the same directory and port: the server comes
/// back with its AOF, and every write acknowledged before the kill is there.
/// Without persistence the same crash loses what was acknowledged, and the
/// check says how much.
#[test]
fn a_crash_restart_keeps_the_data_and_the_check_finds_what_a_server_without_persistence_loses() {
    let _load = shared();
    let (_d, durable) = spec_file(&crash_spec(r#"--appendonly, "yes", --appendfsync, always"#, ""));
    let run = run(&durable, &[]);
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout(), run.stderr());
    let r = run.results();
    for c in cells(&r) {
        let fault = &c["faults"][0];
        let evidence = fault["evidence"].as_str().unwrap();
        assert!(evidence.contains("gone after SIGKILL") && evidence.contains("started again"), "{evidence}");
        // The same port: the uri is the one the target started on.
        assert!(evidence.contains(r["targets"][0]["uri"].as_str().unwrap()), "{evidence}");
        let check = &c["checks"][0];
        assert_eq!(check["status"], "ok", "{check}");
        assert!(check["checked"].as_u64().unwrap() > 0, "{check}");
    }
    let row = &r["crash_recovery"][0];
    assert_eq!(
        (row["restart"].as_str(), row["restarts"].as_u64(), row["nothing_lost"].as_u64()),
        (Some("crash"), Some(2), Some(2))
    );
    assert!(run.report().contains("2/2 crashes with nothing lost"), "{}", run.report());
    assert!(
        std::fs::read_to_string(run.dir.as_ref().unwrap().join("logs/cache.log"))
            .unwrap()
            .matches("Ready to accept connections")
            .count()
            >= 3
    );

    let (_d, volatile) = spec_file(&crash_spec(r#"--appendonly, "no""#, ""));
    let run = crate::support::run(&volatile, &[]);
    assert_eq!(run.code(), 1, "{}\n{}", run.stdout(), run.stderr());
    let r = run.results();
    let row = &r["crash_recovery"][0];
    assert_eq!(row["nothing_lost"], 0, "{row}");
    // Some writes were acknowledged before each kill and all of them are
    // gone (how many, this machine's speed decides): lost ones are among
    // those the checks judged, and each cell's check counts its own.
    let lost = row["lost"].as_u64().unwrap();
    let checks: Vec<&serde_json::Value> = cells(&r).iter().map(|c| &c["checks"][0]).collect();
    let judged: u64 = checks.iter().map(|k| k["checked"].as_u64().unwrap()).sum();
    let violations: u64 = checks.iter().map(|k| k["violations"].as_u64().unwrap()).sum();
    assert!(lost > 0 && lost <= judged, "{row}, {checks:?}");
    assert_eq!(violations, lost, "{row}, {checks:?}");
    assert!(!row["examples"].as_array().unwrap().is_empty(), "{row}");
    let (earliest, latest) =
        (row["lost_acked_relative_s"][0].as_f64().unwrap(), row["lost_acked_relative_s"][1].as_f64().unwrap());
    // Acknowledged from the start of the load until the kill landed, which
    // is before faultline confirmed the server back (on its own clock: a
    // busy machine may take its time between the two, never reorder them).
    let landed_by = cells(&r)
        .iter()
        .map(|c| c["faults"][0]["confirmed_s"].as_f64().unwrap() - c["faults"][0]["requested_s"].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert!(earliest < -0.5 && latest <= landed_by, "{row}, confirmed {landed_by} s after the request");
    assert!(run.report().contains("0/2 crashes with nothing lost"), "{}", run.report());
}

/// A clean restart (SIGTERM, then start): Redis without an AOF but with a
/// save point writes its RDB on shutdown and loses nothing; with neither it
/// loses everything, and only this check sees it.
#[test]
fn a_clean_restart_is_checked_too() {
    let _load = shared();
    let (_d, saving) = spec_file(&crash_spec(r#"--appendonly, "no", --save, "3600 1""#, ", signal: SIGTERM"));
    let run = run(&saving, &[]);
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout(), run.stderr());
    let r = run.results();
    assert!(
        r["cells"][0]["faults"][0]["evidence"].as_str().unwrap().contains("gone after SIGTERM"),
        "{}",
        r["cells"][0]["faults"][0]
    );
    let row = &r["crash_recovery"][0];
    assert_eq!((row["restart"].as_str(), row["nothing_lost"].as_u64()), (Some("clean"), Some(2)), "{row}");

    let (_d, forgetful) = spec_file(&crash_spec(r#"--appendonly, "no", --save, """#, ", signal: SIGTERM"));
    let run = crate::support::run(&forgetful, &[]);
    assert_eq!(run.code(), 1, "{}\n{}", run.stdout(), run.stderr());
    assert!(run.report().contains("0/2 clean restarts with nothing lost"), "{}", run.report());
}

const ISOLATED: &str = r#"name: isolated
targets:
  a: {kind: redis, provider: process}
  b: {kind: redis, provider: process}
workloads:
  w: {ops: {get: 1}}
profiles:
  p: {closed: 1x1}
timing: {warmup: 0s, duration: 300ms, repeats: 2}
scenarios:
  - {name: s, target: [a, b], workload: w, profiles: [p], isolation: ISOLATION}
gates:
  g: errors == 0
"#;

/// `stop` freezes the other target for each cell; `own-cells` runs each
/// target only for its own cells; the report says which.
#[test]
fn competitors_are_frozen_or_started_only_for_their_own_cells() {
    let _load = shared();
    let (_d, spec) = spec_file(&ISOLATED.replace("ISOLATION", "stop"));
    let run = run(&spec, &[]);
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout(), run.stderr());
    let r = run.results();
    for c in cells(&r) {
        let other = if c["target"] == "a" { "b" } else { "a" };
        assert_eq!(c["frozen"], serde_json::json!([other]), "{c}");
    }
    assert_eq!(r["manifest"]["isolation"]["s"], "stop");
    assert!(run.report().contains("stop: the other targets frozen (SIGSTOP) during each cell"), "{}", run.report());

    let (_d, spec) = spec_file(&ISOLATED.replace("ISOLATION", "own-cells"));
    let run = crate::support::run(&spec, &[]);
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout(), run.stderr());
    let logs = run.dir.as_ref().unwrap().join("logs");
    for target in ["a", "b"] {
        let log = std::fs::read_to_string(logs.join(format!("{target}.log"))).unwrap();
        assert_eq!(log.matches("Ready to accept connections").count(), 2, "{target}: started once per own cell");
    }
    assert_eq!(run.results()["targets"].as_array().unwrap().len(), 2);
}

/// The shipped campaign, as CI runs it: every matrix point for both
/// variants, the crash matrix with 3 kills per fsync mode, the clean-restart
/// row, the servers' configuration and the strace counts (or why there are
/// none) in the report.
#[test]
fn the_durability_campaign_runs_with_quick() {
    let _load = heavy();
    let run = run(&repo().join("specs/kv-durability.yaml"), &["--quick"]);
    let (stdout, stderr) = (run.stdout(), run.stderr());
    // --quick is never PASS; a FAIL is a gate, which the rows below explain.
    assert!([1, 2].contains(&run.code()), "{stdout}\n{stderr}");
    let r = run.results();
    assert!(cells(&r).iter().all(|c| c["status"] == "completed"), "{stdout}\n{stderr}");
    let write_path: Vec<&serde_json::Value> = cells(&r).iter().filter(|c| c["scenario"] == "write-path").collect();
    assert_eq!(write_path.len(), 2 * 2 * 3 * 2, "fsync x depth x repeats x variants");
    let rows = r["crash_recovery"].as_array().unwrap();
    assert_eq!(rows.len(), 14, "crash and clean x 2 fsync modes, power-loss x 3, x variant: {rows:?}");
    for row in rows {
        assert_eq!(row["restarts"], 3, "{row}");
        assert_eq!(row["unchecked"], 0, "{row}");
        if row["restart"] == "clean" || row["matrix"]["fsync"] == "always" {
            assert_eq!(row["nothing_lost"], 3, "nothing acknowledged may be lost here: {row}");
        }
        if row["restart"] == "power-loss" && row["matrix"]["fsync"] == "no" {
            assert!(row["lost"].as_u64().unwrap() > 0, "appendfsync no loses what it acknowledged: {row}");
        }
    }
    // The disk under the AOF filled: writes refused with a server error
    // meanwhile, nothing acknowledged lost.
    let full: Vec<&serde_json::Value> = cells(&r).iter().filter(|c| c["scenario"] == "disk-full").collect();
    assert_eq!(full.len(), 3 * 2, "repeats x variants");
    for c in full {
        assert!(c["faults"][0]["evidence"].as_str().unwrap().contains("ENOSPC"), "{}", c["faults"][0]);
        assert!(c["stats"]["errors"]["server"].as_u64().unwrap() > 0, "{}", c["stats"]);
        assert_eq!(c["checks"][0]["violations"], 0, "{}", c["checks"][0]);
    }
    let report = run.report();
    for needle in [
        "## Crash recovery",
        "3/3 crashes with nothing lost",
        "3/3 clean restarts with nothing lost",
        "3/3 power losses with nothing lost",
        "## Probes",
        "appendfsync",
    ] {
        assert!(report.contains(needle), "{needle} in {report}");
    }
    // strace: counts side by side, or said to be unavailable.
    let strace: Vec<&serde_json::Value> = cells(&r)
        .iter()
        .filter(|c| c["scenario"] == "syscalls")
        .flat_map(|c| c["probes"].as_array().unwrap())
        .collect();
    assert!(!strace.is_empty());
    for p in &strace {
        match p["status"].as_str().unwrap() {
            "ok" => assert!(!p["syscalls"].as_array().unwrap().is_empty(), "{p}"),
            _ => assert!(!p["note"].as_str().unwrap().is_empty(), "{p}"),
        }
    }
    if strace.iter().any(|p| p["status"] == "ok") {
        assert!(report.contains("### `strace`: syscalls[fsync=always,depth=16]"), "{report}");
    }
}
