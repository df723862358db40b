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
fn a_run_warns_about_a_killed_runs_paused_container_and_leaves_it() {
    let _load = exclusive();
    let before = docker_snapshot();
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
    assert_eq!(docker_snapshot(), before);
}
