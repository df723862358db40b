//! `faultline run` warns about what killed runs left behind (a paused
//! container would disturb the new run unseen), and leaves it in place.

use std::process::Command;

use crate::support::*;

fn docker(args: &[&str]) -> String {
    let out = Command::new("docker").args(args).output().expect("the docker CLI is installed");
    assert!(out.status.success(), "docker {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
#[ignore = "alone: needs the machine to itself; scripts/test.sh runs it after the rest"]
fn a_run_warns_about_a_killed_runs_paused_container_and_leaves_it() {
    let _load = exclusive();
    // The pid of a process that has exited: the "faultline" that was killed.
    let mut gone = Command::new("true").spawn().unwrap();
    let dead_pid = gone.id().to_string();
    gone.wait().unwrap();
    let run_id = format!("leftover-test-{}", std::process::id());
    let name = format!("fl-{run_id}-kv-0");
    let labels = [
        "faultline.owner=faultline".to_string(),
        format!("faultline.run={run_id}"),
        "faultline.target=kv".to_string(),
        format!("faultline.pid={dead_pid}"),
    ];
    let mut create = vec!["run", "-d", "--name", &name, "--network", "none"];
    for l in &labels {
        create.extend(["--label", l]);
    }
    create.extend(["faultline/redis:bookworm", "sleep", "600"]);
    docker(&create);
    docker(&["pause", &name]);

    let (_d, spec) = spec_file(
        "name: beside\ntargets:\n  t: {kind: redis, provider: process}\nworkloads:\n  w: {ops: {get: 1}}\n\
         profiles:\n  p: {closed: 1x1}\ntiming: {warmup: 0s, duration: 300ms}\n\
         scenarios:\n  - {name: s, target: t, workload: w, profiles: [p]}\ngates:\n  g: errors == 0\n",
    );
    let run = run(&spec, &[]);
    let stderr = run.stderr();
    let state = docker(&["inspect", "-f", "{{.State.Status}}", &name]);
    let removed = faultline().args(["teardown", "--run", &run_id]).output().unwrap();

    assert_eq!(run.code(), 0, "{stderr}");
    assert!(
        stderr.contains(&format!("warning: run {run_id} was killed and left 1 container: {name} (paused)"))
            && stderr.contains(&format!("`faultline teardown --run {run_id}`")),
        "{stderr}"
    );
    assert_eq!(state, "paused", "the warning removes nothing");
    assert_eq!(removed.status.code(), Some(0), "{}", String::from_utf8_lossy(&removed.stderr));
    assert_eq!(labelled_with_run(&run_id), Vec::<String>::new());
}

/// `teardown --run` takes the id a user sees, the run directory's name (or
/// its path), as well as the full label with its hash.
#[test]
#[ignore = "alone: needs the machine to itself; scripts/test.sh runs it after the rest"]
fn teardown_finds_a_killed_run_by_its_run_directorys_name() {
    let _load = exclusive();
    let state = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let (_d, spec) = spec_file(
        "name: by-name\ntargets:\n  kv: {kind: redis, provider: docker, image: faultline/redis:bookworm, ready_timeout: 30s}\n\
         workloads:\n  w: {ops: {get: 1}}\nprofiles:\n  p: {closed: 1x1}\ntiming: {warmup: 0s, duration: 120s}\n\
         scenarios:\n  - {name: s, target: kv, workload: w, profiles: [p]}\ngates:\n  g: errors == 0\n",
    );
    let dir = killed_when(&spec, state.path(), out.path(), "is up:");
    let id = dir.file_name().unwrap().to_string_lossy().into_owned();
    let label = docker(&["ps", "-a", "--filter", &format!("label=faultline.run={id}"), "--format", "{{.Labels}}"]);
    assert!(label.is_empty(), "the label is not the bare name, so the name must be matched: {label}");

    let teardown = |args: &[&str]| {
        let o = faultline().arg("teardown").args(args).env("FAULTLINE_STATE_DIR", state.path()).output().unwrap();
        (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned())
    };
    let (code, listed) = teardown(&["--dry-run", "--run", &id]);
    assert_eq!(code, Some(0), "{listed}");
    assert!(listed.contains("would remove container fl-") && listed.contains(&format!("run {id}-")), "{listed}");
    let (_, by_path) = teardown(&["--dry-run", "--run", &dir.display().to_string()]);
    assert_eq!(by_path, listed, "the run directory's path names the same run");
    let (_, other) = teardown(&["--dry-run", "--run", &format!("{id}x")]);
    assert!(!other.contains("would remove container"), "another name matches nothing: {other}");
    let (code, removed) = teardown(&["--run", &id]);
    assert_eq!(code, Some(0), "{removed}");
    assert!(removed.contains("removed container fl-"), "{removed}");
    assert_eq!(left_behind(&dir), Vec::<String>::new());
}

/// A killed run's servers' data directories are in its run ledger:
/// `teardown` lists and removes them, and then the ledger itself.
#[test]
#[ignore = "alone: needs the machine to itself; scripts/test.sh runs it after the rest"]
fn teardown_removes_a_killed_runs_data_directories() {
    let _load = exclusive();
    let state = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let (_d, spec) = spec_file(
        "name: data\ntargets:\n  cache: {kind: redis, provider: process}\nworkloads:\n  w: {ops: {set: 1}}\n\
         profiles:\n  p: {closed: 1x1}\ntiming: {warmup: 0s, duration: 120s}\n\
         scenarios:\n  - {name: s, target: cache, workload: w, profiles: [p]}\ngates:\n  g: errors == 0\n",
    );
    let dir = killed_when(&spec, state.path(), out.path(), "is up:");
    let id = dir.file_name().unwrap().to_string_lossy().into_owned();
    let data = dir.join("targets/cache");
    assert!(data.is_dir(), "the server's data directory");
    let teardown = |args: &[&str]| {
        let o = faultline().arg("teardown").args(args).env("FAULTLINE_STATE_DIR", state.path()).output().unwrap();
        (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned())
    };
    let (code, listed) = teardown(&["--dry-run", "--run", &id]);
    assert_eq!(code, Some(0), "{listed}");
    assert!(listed.contains(&format!("would remove data directory {} (target cache)", data.display())), "{listed}");
    assert!(data.is_dir(), "a dry run removes nothing");
    let (code, removed) = teardown(&["--run", &id]);
    assert_eq!(code, Some(0), "{removed}");
    assert!(!data.exists(), "{removed}");
    assert!(dir.join("run.log").is_file(), "the rest of the run directory stays");
    assert_eq!(std::fs::read_dir(state.path()).unwrap().count(), 0, "the ledger is gone");
}
