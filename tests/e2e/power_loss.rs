//! Power loss and disk faults on the fault filesystem (faultline-faultfs,
//! FUSE): what a kill -9 cannot test. A SIGKILL never loses what the
//! server handed the kernel, so Redis with `appendfsync no` passes a crash
//! matrix; a power loss throws away what was never fsynced and the
//! lost-acknowledged-write check finds it, while `appendfsync always`
//! loses nothing.

use crate::support::*;

fn cells(r: &serde_json::Value) -> &Vec<serde_json::Value> {
    r["cells"].as_array().unwrap()
}

/// One Redis with an AOF under `fsync`, SETs, and `fault` at 1 s.
fn spec(fsync: &str, fault: &str) -> String {
    format!(
        r#"name: power
targets:
  cache: {{kind: redis, provider: process, args: [--appendonly, "yes", --appendfsync, {fsync}]}}
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
    faults: [{{name: out, at: 1s, target: cache, {fault}}}]
checkers: [lost-acknowledged-write]
gates:
  nothing-lost: lost_acked_writes == 0
"#
    )
}

fn restart_row(r: &serde_json::Value) -> &serde_json::Value {
    let rows = r["crash_recovery"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    &rows[0]
}

#[test]
fn a_power_loss_loses_nothing_fsync_always_acknowledged() {
    let _load = shared();
    let (_d, path) = spec_file(&spec("always", "action: power-loss"));
    let run = run(&path, &[]);
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout(), run.stderr());
    let r = run.results();
    for c in cells(&r) {
        let fault = &c["faults"][0];
        let evidence = fault["evidence"].as_str().unwrap();
        assert!(evidence.contains("gone after SIGKILL") && evidence.contains("thrown away"), "{evidence}");
        assert!(evidence.contains("started again"), "{evidence}");
        assert_eq!(fault["restart"], "power-loss", "{fault}");
        let check = &c["checks"][0];
        assert_eq!(check["status"], "ok", "{check}");
        assert!(check["checked"].as_u64().unwrap() > 0, "{check}");
    }
    let row = restart_row(&r);
    assert_eq!(
        (row["restart"].as_str(), row["restarts"].as_u64(), row["nothing_lost"].as_u64()),
        (Some("power-loss"), Some(2), Some(2)),
        "{row}"
    );
    assert!(run.report().contains("2/2 power losses with nothing lost"), "{}", run.report());
}

/// A server that acknowledges before it fsyncs (Redis with `appendfsync
/// no`, whatever it claims): the kill -9 matrix passes it, a power loss
/// does not, and says when the lost writes had been acknowledged.
#[test]
fn a_server_that_acknowledges_before_it_fsyncs_passes_kill_9_and_fails_a_power_loss() {
    let _load = shared();
    let (_d, killed) = spec_file(&spec("no", "action: restart"));
    let run = run(&killed, &[]);
    assert_eq!(run.code(), 0, "kill -9 keeps the page cache: {}\n{}", run.stdout(), run.stderr());
    let row = restart_row(&run.results()).clone();
    assert_eq!((row["restart"].as_str(), row["nothing_lost"].as_u64()), (Some("crash"), Some(2)), "{row}");

    let (_d, powered_off) = spec_file(&spec("no", "action: power-loss"));
    let run = crate::support::run(&powered_off, &[]);
    assert_eq!(run.code(), 1, "{}\n{}", run.stdout(), run.stderr());
    let r = run.results();
    let row = restart_row(&r);
    assert_eq!((row["restart"].as_str(), row["nothing_lost"].as_u64()), (Some("power-loss"), Some(0)), "{row}");
    let lost = row["lost"].as_u64().unwrap();
    let violations: u64 = cells(&r).iter().map(|c| c["checks"][0]["violations"].as_u64().unwrap()).sum();
    assert!(lost > 0 && violations == lost, "{row}");
    // Acknowledged before the power went out, up to the moment it did.
    let (earliest, latest) =
        (row["lost_acked_relative_s"][0].as_f64().unwrap(), row["lost_acked_relative_s"][1].as_f64().unwrap());
    assert!(earliest < 0.0 && earliest <= latest, "{row}");
    for c in cells(&r) {
        let evidence = c["faults"][0]["evidence"].as_str().unwrap();
        assert!(evidence.contains("unsynced write(s)") && !evidence.contains(" 0 unsynced"), "{evidence}");
    }
    assert!(run.report().contains("0/2 power losses with nothing lost"), "{}", run.report());
}

/// POSIX's letter against what Redis counts on: Redis 7.0.15 creates
/// `appendonlydir` and never fsyncs the data directory that holds it, so
/// under `names: strict` a power loss takes the AOF directory whole, and
/// every acknowledged write with it, even under `appendfsync always`;
/// ext4's order (the default, the first test) keeps it.
#[test]
fn strict_names_find_the_directory_redis_never_fsyncs() {
    let _load = shared();
    let (_d, path) = spec_file(&spec("always", "action: power-loss, names: strict"));
    let run = run(&path, &[]);
    assert_eq!(run.code(), 1, "{}\n{}", run.stdout(), run.stderr());
    let r = run.results();
    let row = restart_row(&r);
    assert_eq!((row["restart"].as_str(), row["nothing_lost"].as_u64()), (Some("power-loss"), Some(0)), "{row}");
    for c in cells(&r) {
        let evidence = c["faults"][0]["evidence"].as_str().unwrap();
        assert!(evidence.contains("rename(s) undone"), "{evidence}");
        assert!(c["checks"][0]["violations"].as_u64().unwrap() > 0, "{}", c["checks"][0]);
    }
}

/// A full disk under Redis's AOF (`everysec`): writes are refused with a
/// server error while it is full, answered again once it heals, and
/// nothing acknowledged is lost.
#[test]
fn a_full_disk_refuses_writes_until_it_heals_and_loses_nothing_acknowledged() {
    let _load = shared();
    // Redis retries its AOF once a second: a window long enough to see it back.
    let text = spec("everysec", "action: disk-full, heal_after: 300ms").replace("duration: 1500ms", "duration: 4s");
    let (_d, path) = spec_file(&text);
    let run = run(&path, &[]);
    let r = run.results();
    for c in cells(&r) {
        let fault = &c["faults"][0];
        assert!(fault["evidence"].as_str().unwrap().contains("ENOSPC"), "{fault}");
        assert!(fault["healed_s"].as_f64().unwrap() - fault["confirmed_s"].as_f64().unwrap() >= 0.3, "{fault}");
        assert!(fault["heal_evidence"].as_str().unwrap().contains("healthy"), "{fault}");
        let stats = &c["stats"];
        assert!(stats["errors"]["server"].as_u64().unwrap() > 0, "writes refused while full: {stats}");
        let impact = &stats["fault_impact"][0];
        assert_eq!(impact["not_recovered"], serde_json::Value::Null, "writes answered again after the heal: {impact}");
        assert!(impact["first_success_s"].as_f64().unwrap() >= 0.3, "{impact}");
        assert_eq!(c["checks"][0]["violations"], 0, "{}", c["checks"][0]);
        assert_eq!(c["checks"][0]["status"], "ok", "{}", c["checks"][0]);
    }
    // The only gate is the check's: refused writes were never acknowledged.
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout(), run.stderr());
}

/// The fault filesystems mounted now whose mountpoint is `path`.
fn mounted_at(path: &std::path::Path) -> usize {
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let at = format!(" {} ", path.display());
    table.lines().filter(|l| l.contains(&at) && l.contains(" faultline-faultfs:")).count()
}

/// faultline SIGKILLed while a target's data is on the fault filesystem:
/// the mount is left answering ENOTCONN (nothing hangs), and `teardown`
/// finds it in the mount table, detaches it, and removes the directories.
#[test]
fn a_killed_runs_fault_filesystem_is_unmounted_by_teardown() {
    let _load = shared();
    let state = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let text = spec("always", "action: power-loss")
        .replace("duration: 1500ms", "duration: 120s")
        .replace("at: 1s", "at: 100s");
    let (_d, path) = spec_file(&text);
    let dir = killed_when(&path, state.path(), out.path(), "is up:");
    let id = dir.file_name().unwrap().to_string_lossy().into_owned();
    let data = dir.join("targets/cache");
    assert_eq!(mounted_at(&data), 1, "left mounted by the killed run");
    let stat = std::fs::metadata(&data).map(|_| ()).unwrap_err();
    assert_eq!(stat.raw_os_error(), Some(libc::ENOTCONN), "a dead mount answers at once: {stat}");
    let teardown = |args: &[&str]| {
        let o = faultline().arg("teardown").args(args).env("FAULTLINE_STATE_DIR", state.path()).output().unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (code, listed, err) = teardown(&["--dry-run", "--run", &id]);
    assert_eq!(code, Some(0), "{listed}{err}");
    assert!(
        listed.contains(&format!("would unmount the fault filesystem at {} (target cache", data.display())),
        "{listed}"
    );
    assert_eq!(mounted_at(&data), 1, "a dry run unmounts nothing");
    let (code, removed, err) = teardown(&["--run", &id]);
    assert_eq!(code, Some(0), "{removed}{err}");
    assert!(removed.contains(&format!("unmounted the fault filesystem at {}", data.display())), "{removed}");
    assert_eq!(mounted_at(&data), 0, "{removed}");
    assert!(!data.exists() && !dir.join("targets/cache.disk").exists(), "{removed}");
}
