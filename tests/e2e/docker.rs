//! Docker targets against the real engine and the faultline/redis image
//! (`sudo fixtures/images/build.sh redis`; scripts/test.sh builds it). Every
//! test checks that no container or network of the run is left on the
//! engine (by the run's label, so concurrent test runs do not count),
//! however the run ended.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;

/// The running container of `member` in the run writing into `out`, once
/// it is there: scoped to this run by its directory's name (see
/// [`container_in`]), so another run on the engine is never mistaken for it.
fn wait_for_container(out: &Path, member: &str, within: Duration) -> String {
    let deadline = Instant::now() + within;
    loop {
        if let Some(id) = run_dir(out).and_then(|run| container_in(&run, member)) {
            return id;
        }
        assert!(Instant::now() < deadline, "container {member} did not appear within {within:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn docker_exec(id: &str, script: &str) -> String {
    let out = Command::new("docker").args(["exec", id, "sh", "-c", script]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const SENTINELS: &str = r#"
    companions:
      sentinels:
        count: 3
        port: 26379
        command: sh
        args: ["-c", "printf 'port 26379\nsentinel monitor kv {primary_ip} {port} {quorum}\n' > /tmp/s.conf && exec redis-sentinel /tmp/s.conf"]"#;

/// A primary and two replicas (plus `extra` target fields), one closed-loop cell.
fn kv_spec(extra: &str, duration: &str) -> String {
    format!(
        r#"name: kv-docker
targets:
  kv:
    kind: redis
    provider: docker
    image: faultline/redis:bookworm
    members: 3
    memory: 256MiB
    cpus: 1
    tmpfs: ["/data:size=32m"]
    ready_timeout: 30s{extra}
workloads:
  w: {{ops: {{get: 50, set: 50}}, keys: {{count: 500}}}}
profiles:
  p: {{closed: 2x8}}
timing: {{warmup: 300ms, duration: {duration}}}
scenarios:
  - {{name: s, target: kv, workload: w, profiles: [p]}}
gates:
  no-errors: errors == 0
"#
    )
}

#[test]
fn a_docker_campaign_replicates_and_leaves_nothing_behind() {
    let _load = shared();
    // While the run goes on, look at a replica from outside faultline.
    let out = tempfile::tempdir().unwrap();
    let out_path = out.path().to_path_buf();
    let watcher = std::thread::spawn(move || {
        let replica = wait_for_container(&out_path, "kv-2", Duration::from_secs(60));
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let info = docker_exec(&replica, "redis-cli info replication");
            let keys: u64 = docker_exec(&replica, "redis-cli dbsize").trim().parse().unwrap_or(0);
            if (info.contains("role:slave") && info.contains("master_link_status:up") && keys > 0)
                || Instant::now() > deadline
            {
                return (info, keys);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    let started = Instant::now();
    let output = faultline()
        .arg("run")
        .arg(repo().join("specs/kv-replicas.yaml"))
        .args(["--set", "duration=3s", "--out"])
        .arg(out.path())
        .output()
        .unwrap();
    let took = started.elapsed();
    let run = Run { output, dir: run_dir(out.path()), _out: out };
    let (info, keys) = watcher.join().unwrap();
    // The p99 bound on gets judges how fast this machine and its six
    // containers are (a FAIL there is faultline measuring right); no other
    // gate may fail.
    measured_as_asked(&run, &["fast-gets"]);
    assert!(info.contains("role:slave") && info.contains("master_host:kv-0"), "{info}");
    assert!(info.contains("master_link_status:up"), "{info}");
    assert!(keys > 0, "the load's writes reached the replica");
    let r = run.results();
    let target = &r["targets"][0];
    assert_eq!((target["provider"].as_str(), target["kind"].as_str()), (Some("docker"), Some("redis")));
    // The load found the primary through the three Sentinels.
    let uri = target["uri"].as_str().unwrap();
    let sentinels =
        uri.strip_prefix("redis+sentinel://").and_then(|u| u.strip_suffix("/kv")).unwrap_or_else(|| panic!("{uri}"));
    assert_eq!(sentinels.split(',').filter(|s| s.ends_with(":26379")).count(), 3, "{uri}");
    assert!(target["server"].as_str().unwrap().starts_with("redis 7"), "{target}");
    // The load ran, and its counts add up (per op, and over the timeline).
    let stats = &r["cells"][0]["stats"];
    let ok = stats["ok"].as_u64().unwrap();
    assert!(ok > 0, "{stats}");
    let per_op: u64 = stats["per_op"].as_object().unwrap().values().map(|o| o["ok"].as_u64().unwrap()).sum();
    let timeline: u64 = stats["timeline"].as_array().unwrap().iter().map(|p| p["ok"].as_u64().unwrap()).sum();
    assert_eq!((per_op, timeline), (ok, ok), "{stats}");
    let logs = run.dir.as_ref().unwrap().join("logs/kv");
    for name in ["kv-0", "kv-1", "kv-2", "kv-sentinels-0", "kv-sentinels-2"] {
        assert!(logs.join(format!("{name}.log")).is_file(), "{name}'s log was not saved");
    }
    let sentinel_log = std::fs::read_to_string(logs.join("kv-sentinels-0.log")).unwrap();
    assert!(sentinel_log.contains("+monitor master kv"), "{sentinel_log}");
    assert_eq!(left_behind(run.dir.as_ref().unwrap()), Vec::<String>::new());
    eprintln!("specs/kv-replicas.yaml (6 containers) took {took:?} for 3.5s of load");
}

fn interrupt_docker_run(signal: i32, when_up: &str, extra: &str) {
    let _load = shared();
    let (_d, spec) = spec_file(&kv_spec(extra, "30s"));
    let out = tempfile::tempdir().unwrap();
    let mut child = faultline()
        .arg("run")
        .arg(&spec)
        .arg("--out")
        .arg(out.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if when_up == "load" {
        // The cell's measured window has begun and an op of it was
        // answered (faultline says so in run.log): partial results exist.
        wait_for_log(out.path(), ": measuring, first op answered", Duration::from_secs(90));
    } else {
        wait_for_container(out.path(), when_up, Duration::from_secs(60));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, signal) };
    let started = Instant::now();
    let status = child.wait().unwrap();
    // A limit only a hang reaches: how long the engine takes to remove six
    // containers is the machine's business.
    assert!(started.elapsed() < Duration::from_secs(120), "stopped and cleaned up: {:?}", started.elapsed());
    assert_eq!(status.code(), Some(2));
    let dir = run_dir(out.path()).unwrap();
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(r["run"]["interrupted"], true);
    assert_eq!(r["verdict"], "INCOMPLETE");
    if when_up == "load" {
        assert_eq!(r["cells"][0]["status"], "interrupted");
        assert!(r["cells"][0]["stats"]["ok"].as_u64().unwrap() > 0, "partial results kept");
    }
    assert_eq!(left_behind(&dir), Vec::<String>::new());
}

#[test]
fn ctrl_c_during_the_load_removes_every_container_and_network() {
    interrupt_docker_run(libc::SIGINT, "load", SENTINELS);
}

#[test]
fn sigterm_while_the_target_starts_removes_what_was_created() {
    // Members that take a while to be ready: the signal comes mid-start.
    interrupt_docker_run(libc::SIGTERM, "kv-0", "\n    ready: {command: \"sleep 1 && redis-cli ping\"}");
}

#[test]
fn a_member_that_never_gets_ready_fails_clearly_after_its_timeout() {
    let _load = shared();
    let (_d, spec) = spec_file(&kv_spec("\n    ready: {command: \"false\", timeout: 2s}", "2s"));
    let started = Instant::now();
    let run = run(&spec, &[]);
    // A hang guard: the decision is the error's `within 2s`, below.
    assert!(started.elapsed() < Duration::from_secs(120), "bounded wait: {:?}", started.elapsed());
    assert_eq!(run.code(), 2, "{}\n{}", run.stdout(), run.stderr());
    let r = run.results();
    let error = r["errors"][0].as_str().unwrap();
    assert!(error.contains("target `kv` (docker)"), "{error}");
    assert!(error.contains("was not ready within 2s (ready command `sh -c false`)"), "{error}");
    assert!(error.contains("last lines of kv-") && error.contains("saved in"), "{error}");
    assert_eq!(r["cells"][0]["status"], "skipped");
    assert!(run.dir.as_ref().unwrap().join("logs/kv/kv-0.log").is_file(), "logs are saved when a start fails");
    assert_eq!(left_behind(run.dir.as_ref().unwrap()), Vec::<String>::new());
}

#[test]
#[ignore = "alone: needs the machine to itself; scripts/test.sh runs it after the rest"]
fn a_missing_image_names_the_build_script() {
    // It compares every container and network on the host, before and after.
    let _load = exclusive();
    let before = docker_snapshot();
    let spec_text = kv_spec("", "1s").replace("faultline/redis:bookworm", "faultline/nosuch:bookworm");
    let (_d, spec) = spec_file(&spec_text);
    let run = run(&spec, &[]);
    // Refused before anything starts: no run directory, nothing created.
    assert_eq!(run.code(), 3, "{}", run.stderr());
    let error = run.stderr();
    assert!(
        error.contains("target `kv`: image `faultline/nosuch:bookworm` is not on this machine")
            && error.contains("sudo fixtures/images/build.sh nosuch"),
        "{error}"
    );
    assert!(run.dir.is_none(), "a run directory was made for a run that could not start");
    assert_eq!(docker_snapshot(), before);
}

#[test]
fn teardown_removes_what_a_killed_faultline_left() {
    let _load = shared();
    let (_d, spec) = spec_file(&kv_spec(SENTINELS, "30s"));
    let out = tempfile::tempdir().unwrap();
    let mut child = faultline()
        .arg("run")
        .arg(&spec)
        .arg("--out")
        .arg(out.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let id = wait_for_container(out.path(), "kv-sentinels-2", Duration::from_secs(60));
    let run_id = String::from_utf8_lossy(
        &Command::new("docker")
            .args(["inspect", "-f", "{{index .Config.Labels \"faultline.run\"}}", &id])
            .output()
            .unwrap()
            .stdout,
    )
    .trim()
    .to_string();
    assert!(run_id.starts_with("kv-docker-"), "{run_id}");
    let run_dir = run_dir(out.path()).unwrap();
    assert_eq!(docker_run_id(&run_dir), run_id, "the tests look for what is left by the label faultline gives");

    // While its faultline lives, a run is not touched.
    let live = faultline().args(["teardown", "--run", &run_id]).output().unwrap();
    let text = String::from_utf8_lossy(&live.stdout);
    assert!(text.contains(&format!("skipped run {run_id}: faultline (pid {})", child.id())), "{text}");

    child.kill().unwrap(); // SIGKILL: no cleanup
    child.wait().unwrap();
    assert!(container_in(&run_dir, "kv-0").is_some(), "a killed faultline cannot clean up");

    let listed = faultline().args(["teardown", "--dry-run", "--run", &run_id]).output().unwrap();
    let text = String::from_utf8_lossy(&listed.stdout);
    assert!(text.contains(&format!("would remove container fl-{run_id}-kv-0 (run {run_id}, target kv)")), "{text}");
    assert!(text.contains(&format!("would remove network fl-{run_id}-kv")), "{text}");

    let removed = faultline().args(["teardown", "--run", &run_id]).output().unwrap();
    let text = String::from_utf8_lossy(&removed.stdout);
    assert_eq!(removed.status.code(), Some(0), "{text}{}", String::from_utf8_lossy(&removed.stderr));
    assert!(text.contains("removed 6 containers and 1 network"), "{text}");
    assert_eq!(left_behind(&run_dir), Vec::<String>::new(), "teardown left something behind");
    let again = faultline().args(["teardown", "--run", &run_id]).output().unwrap();
    assert!(String::from_utf8_lossy(&again.stdout).contains("nothing to remove"));
}

/// The running container of `member` in the run whose directory is `run`,
/// found by the run's `faultline.run` label. Not by its name: two runs of one
/// spec started in the same second in different output folders share the run
/// directory's name, and only the label's hash of the full path tells them apart.
fn container_in(run: &Path, member: &str) -> Option<String> {
    let out = Command::new("docker")
        .args(["ps", "-q", "--filter", &format!("label=faultline.member={member}")])
        .args(["--filter", &format!("label=faultline.run={}", docker_run_id(run))])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).lines().next().map(str::to_string)
}

/// Each member's `ROLE` now, by member name (containers that answer).
fn member_roles(run: &Path, members: &[&str]) -> Vec<(String, String)> {
    members
        .iter()
        .filter_map(|m| container_in(run, m).map(|id| (m, id)))
        .map(|(m, id)| (m.to_string(), docker_exec(&id, "redis-cli role").lines().next().unwrap_or("").to_string()))
        .collect()
}

/// Load clients on a member: normal clients whose last command was the
/// load's (a replica's link to its primary runs SETs too, with flag M).
fn load_clients_on(run: &Path, member: &str) -> usize {
    let Some(id) = container_in(run, member) else { return 0 };
    docker_exec(&id, "redis-cli client list")
        .lines()
        .filter(|l| l.contains(" flags=N ") && (l.contains(" cmd=get ") || l.contains(" cmd=set ")))
        .count()
}

#[test]
#[ignore = "alone: needs the machine to itself; scripts/test.sh runs it after the rest"]
fn after_a_sentinel_failover_mid_run_the_load_goes_on_on_the_new_primary() {
    let _load = exclusive();
    let discovery = format!("{SENTINELS}\n    discovery: {{sentinels: sentinels, master: kv}}");
    let spec = kv_spec(&discovery, "25s")
        .replace("  no-errors: errors == 0\n", "  few-errors: error_rate < 1%\n  no-hangs: hangs == 0\n");
    let (_d, spec) = spec_file(&spec);
    let out = tempfile::tempdir().unwrap();
    let out_path = out.path().to_path_buf();
    let failover = std::thread::spawn(move || {
        let run = wait_for_log(&out_path, "target `kv` is up", Duration::from_secs(60));
        assert!(wait_until(Duration::from_secs(20), || load_clients_on(&run, "kv-0") == 2), "the load starts on kv-0");
        let sentinel = container_in(&run, "kv-sentinels-0").unwrap();
        let ask = "redis-cli -p 26379 sentinel get-master-addr-by-name kv";
        let first = docker_exec(&sentinel, ask);
        // A Sentinel that has not found the replicas yet says NOGOODSLAVE.
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let said = docker_exec(&sentinel, "redis-cli -p 26379 sentinel failover kv");
            if said.trim() == "OK" {
                break;
            }
            assert!(Instant::now() < deadline, "SENTINEL failover kv: {said}");
            std::thread::sleep(Duration::from_millis(250));
        }
        let failed_over = Instant::now();
        while docker_exec(&sentinel, ask) == first {
            assert!(failed_over.elapsed() < Duration::from_secs(20), "the Sentinels never named a new primary");
            std::thread::sleep(Duration::from_millis(100));
        }
        // The Sentinels demote kv-0 some seconds later (8 to 12 s here),
        // disconnecting its clients; until then it is a second primary that
        // takes writes.
        let mut primary = None;
        let mut roles = Vec::new();
        while failed_over.elapsed() < Duration::from_secs(21) {
            roles = member_roles(&run, &["kv-0", "kv-1", "kv-2"]);
            let new = roles.iter().find(|(m, r)| m != "kv-0" && r == "master").map(|(m, _)| m.clone());
            let demoted = roles.iter().any(|(m, r)| m == "kv-0" && r == "slave");
            if let Some(new) = new.filter(|_| demoted) {
                if load_clients_on(&run, &new) == 2 && load_clients_on(&run, "kv-0") == 0 {
                    primary = Some(new);
                    break;
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        (primary, roles, failed_over.elapsed())
    });
    let output = faultline().arg("run").arg(&spec).arg("--out").arg(out.path()).output().unwrap();
    let (primary, roles, took) = failover.join().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    // kv-0 demoted, a replica promoted, and the load on it, not on kv-0.
    let new_primary =
        primary.unwrap_or_else(|| panic!("the load did not move within {took:?}; roles then: {roles:?}\n{stdout}"));
    assert!(["kv-1", "kv-2"].contains(&new_primary.as_str()), "{new_primary}");
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));

    let dir = run_dir(out.path()).unwrap();
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(r["verdict"], "PASS");
    let stats = &r["cells"][0]["stats"];
    let timeline = stats["timeline"].as_array().unwrap();
    assert!(timeline.len() >= 23, "{}", timeline.len());
    for point in &timeline[timeline.len() - 3..] {
        assert!(point["ok"].as_u64().unwrap() > 0, "ops succeed at the end, on {new_primary}: {point}");
    }
    let sentinel_log = std::fs::read_to_string(dir.join("logs/kv/kv-sentinels-0.log")).unwrap();
    assert!(sentinel_log.contains("+switch-master kv"), "{sentinel_log}");
    assert_eq!(left_behind(&dir), Vec::<String>::new());
    eprintln!("the load moved to {new_primary} {took:?} after SENTINEL failover; errors {}", stats["errors"]);
}
