//! What happens when things go wrong: a target that never comes up, an
//! interrupted run, a server that stops answering.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::*;

fn never_ready_spec(command: &str, args: &str) -> String {
    format!(
        "name: never\ntargets:\n  t: {{kind: redis, provider: process, command: {command}, args: {args}, ready_timeout: 1s}}\nworkloads:\n  w: {{ops: {{get: 1}}}}\nprofiles:\n  p: {{closed: 1x1}}\nscenarios:\n  - {{name: s, target: t, workload: w, profiles: [p]}}\ngates:\n  g: errors == 0\n"
    )
}

#[test]
fn a_target_that_never_answers_is_stopped_and_reported() {
    let _load = shared();
    // `sleep` starts fine but never speaks Redis; the distinctive number lets us find it.
    let (_d, spec) = spec_file(&never_ready_spec("sleep", "[\"987654\", \"{port}\"]"));
    let started = Instant::now();
    let run = run(&spec, &[]);
    assert!(started.elapsed() < Duration::from_secs(15), "bounded wait");
    assert_eq!(run.code(), 2, "{}\n{}", run.stdout(), run.stderr());
    let r = run.results();
    assert_eq!(r["verdict"], "INCOMPLETE");
    let error = r["errors"][0].as_str().unwrap();
    assert!(
        error.contains("target `t` (sleep)") && error.contains("did not answer") && error.contains("within 1s"),
        "{error}"
    );
    assert_eq!(r["cells"][0]["status"], "skipped");
    assert!(processes_matching("sleep 987654").is_empty(), "the process was left running");
}

/// A program that is not there is known before anything starts: a spec
/// error at the field, from `validate` and from `run` before any target.
#[test]
fn a_missing_binary_is_a_spec_error_before_anything_starts() {
    let (_d, spec) = spec_file(&never_ready_spec("redis-server-that-does-not-exist", "[]"));
    let run = run(&spec, &[]);
    assert_eq!(run.code(), 3, "{}", run.stderr());
    assert!(run.dir.is_none(), "no run directory for a spec error");
    let error = run.stderr();
    assert!(error.contains("not installed or not on PATH") && error.contains("field `targets.t.command`"), "{error}");
    let validated = faultline().arg("validate").arg(&spec).output().unwrap();
    assert_eq!(validated.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&validated.stderr).contains("spec.yaml:3:"), "{validated:?}");
}

fn interrupt_with(signal: i32) {
    let _load = shared();
    let out = tempfile::tempdir().unwrap();
    let mut child = faultline()
        .args(["run", "specs/quickstart.yaml", "--set", "duration=30s", "--out"])
        .arg(out.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The first cell's measured window has begun and an op of it was
    // answered: faultline says so in run.log (no guess of how long its
    // start and warm-up take).
    wait_for_log(out.path(), ": measuring, first op answered", Duration::from_secs(90));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, signal) };
    let started = Instant::now();
    let status = child.wait().unwrap();
    assert!(started.elapsed() < Duration::from_secs(30), "stopped (a limit only a hang reaches)");
    assert_eq!(status.code(), Some(2));
    let dir = run_dir(out.path()).unwrap();
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(r["verdict"], "INCOMPLETE");
    assert_eq!(r["run"]["interrupted"], true);
    let cells = r["cells"].as_array().unwrap();
    assert_eq!(cells[0]["status"], "interrupted");
    assert!(cells[0]["stats"]["ok"].as_u64().unwrap() > 0, "partial results kept");
    // Stopped at the signal, not at the end of its 30 s window.
    assert!(cells[0]["measured_s"].as_f64().unwrap() < 25.0, "{}", cells[0]["measured_s"]);
    assert!(cells[1..].iter().all(|c| c["status"] == "skipped"));
    let uri = r["targets"][0]["uri"].as_str().unwrap();
    let port = uri.rsplit(':').next().unwrap();
    assert!(processes_matching(&format!("redis-server 127.0.0.1:{port}")).is_empty(), "redis-server left running");
    assert!(std::fs::read_to_string(dir.join("report.md")).unwrap().contains("INCOMPLETE"));
}

#[test]
fn ctrl_c_stops_the_load_and_keeps_partial_results() {
    interrupt_with(libc::SIGINT);
}

#[test]
fn sigterm_stops_the_load_and_keeps_partial_results() {
    interrupt_with(libc::SIGTERM);
}

fn paused_server_spec(port: u16, cancel_at_deadline: bool) -> String {
    format!(
        r#"name: paused
targets:
  t: {{kind: redis, provider: external, uri: "redis://127.0.0.1:{port}", cancel_at_deadline: {cancel_at_deadline}}}
workloads:
  w: {{ops: {{get: 1}}, keys: {{count: 100}}}}
profiles:
  p: {{closed: 2x4}}
timing: {{warmup: 0s, duration: 6s, deadline: 300ms, hang_after: 500ms}}
scenarios:
  - {{name: s, target: t, workload: w, profiles: [p]}}
gates:
  no-hangs: hangs == 0
  no-errors: errors == 0
"#
    )
}

/// CLIENT PAUSE makes a real redis-server hold every command for 2.2 s, a
/// second after the load reached it (seen on the server, not guessed from
/// how long faultline takes to start), in a 6 s window: the load is seen
/// again after the thaw however late a busy machine made the pause. Without
/// cancelling, an op is given up 800 ms after it was sent (300 ms deadline,
/// 500 ms hang_after), as a hang; cancelling, at its deadline. Every op in
/// flight when the pause began is given up so, whenever the watchdog runs.
fn run_with_pause(cancel_at_deadline: bool) -> serde_json::Value {
    let _load = shared();
    let server = RedisServer::start();
    let (_d, spec) = spec_file(&paused_server_spec(server.port, cancel_at_deadline));
    let run = std::thread::scope(|scope| {
        let pauser = scope.spawn(|| {
            assert!(wait_until(Duration::from_secs(30), || server.load_clients() == 2), "the load never came");
            std::thread::sleep(Duration::from_secs(1));
            server.cli(&["CLIENT", "PAUSE", "2200", "ALL"])
        });
        let run = run(&spec, &[]);
        assert_eq!(pauser.join().unwrap().as_deref(), Some("OK"));
        run
    });
    assert_eq!(run.code(), 1, "{}\n{}", run.stdout(), run.stderr());
    run.results()
}

/// Over-deadline ops, as faultline counts them, agree with the latencies
/// it recorded: an op answered more than 400 ms after it was sent (the
/// 300 ms deadline and the 100 ms `over_deadline_after`) counts, and only
/// such ops (given-up ops end when they were due to be given up: a hang is
/// not counted as over-deadline, a deadline error ends on time). Which ops
/// the thaw finds in flight, and how long they had waited, depends on when
/// the watchdog ran on a busy machine; that the count is true does not.
fn over_deadline_agrees_with_latency(stats: &serde_json::Value) -> u64 {
    let over = stats["over_deadline"].as_u64().unwrap();
    let slowest = stats["per_op"]["get"]["latency_ms"]["max"].as_f64().unwrap_or(0.0);
    // The histogram keeps 3 significant digits: 0.4 ms either side.
    if slowest > 400.5 {
        assert!(over >= 1, "a get answered after {slowest} ms is over-deadline: {stats}");
    }
    if over > 0 {
        assert!(slowest > 399.5, "{over} over-deadline ops, the slowest answered after {slowest} ms: {stats}");
    }
    over
}

#[test]
fn the_watchdog_counts_ops_that_outlive_their_deadline_as_hangs() {
    let r = run_with_pause(false);
    let stats = &r["cells"][0]["stats"];
    let errors = &stats["errors"];
    assert!(errors["hang"].as_u64().unwrap() >= 8, "every in-flight op hung: {errors}");
    assert_eq!(errors["deadline"], 0);
    // The ops the thaw finds in flight end late but are answered: when the
    // watchdog ran on time, sent 1.6 s into the pause, 0.6 s before the
    // thaw, and over-deadline.
    let over = over_deadline_agrees_with_latency(stats);
    eprintln!("{over} ops ended over their deadline");
    let gate = &r["gates"][0];
    assert_eq!((gate["name"].as_str(), gate["result"].as_str()), (Some("no-hangs"), Some("fail")));
    // The load recovered after the pause: ops answered in the last second.
    let timeline = stats["timeline"].as_array().unwrap();
    let per_second = (1.0 / stats["timeline_step_s"].as_f64().unwrap()).round() as usize;
    let last: u64 = timeline[timeline.len() - per_second..].iter().map(|p| p["ok"].as_u64().unwrap()).sum();
    assert!(last > 0, "{timeline:?}");
}

#[test]
fn a_client_that_honours_the_deadline_fails_fast_without_hangs() {
    let r = run_with_pause(true);
    let stats = &r["cells"][0]["stats"];
    assert!(stats["errors"]["deadline"].as_u64().unwrap() >= 8, "{}", stats["errors"]);
    assert_eq!(stats["errors"]["hang"], 0);
    // None over the deadline: every op waiting at the pause failed at its
    // deadline, and none answered ended late, unless a watchdog run late
    // let a reply in first, and then its latency says so.
    let over = over_deadline_agrees_with_latency(stats);
    eprintln!("{over} ops ended over their deadline");
    assert_eq!(r["gates"][0]["result"], "pass");
    assert_eq!(r["gates"][1]["result"], "fail");
}

#[test]
fn a_crashed_server_fails_the_ops_on_it_and_clients_reconnect_when_it_is_back() {
    let _load = shared();
    let server = RedisServer::start();
    let port = server.port;
    let (_d, spec) = spec_file(&paused_server_spec(port, true));
    // The server is down for 2.5 s of wall time from 1.5 s after the load
    // reached it; which second is the dark one is not fixed, but at least
    // one whole second of the timeline falls inside the outage.
    let crash = std::thread::spawn(move || {
        assert!(wait_until(Duration::from_secs(30), || server.load_clients() == 2), "the load never came");
        std::thread::sleep(Duration::from_millis(1500));
        server.kill();
        std::thread::sleep(Duration::from_millis(2500));
        RedisServer::start_on(port)
    });
    let run = run(&spec, &[]);
    let _restarted = crash.join().unwrap();
    assert_eq!(run.code(), 1, "{}\n{}", run.stdout(), run.stderr());
    let stats = &run.results()["cells"][0]["stats"];
    // The 8 ops in flight when the server died failed with connection errors;
    // ops issued while it was down waited for it until their 300ms deadline.
    assert!(stats["errors"]["connection"].as_u64().unwrap() >= 1, "{}", stats["errors"]);
    assert!(stats["errors"]["deadline"].as_u64().unwrap() >= 8, "{}", stats["errors"]);
    let timeline = stats["timeline"].as_array().unwrap();
    let ok: Vec<u64> = timeline.iter().map(|p| p["ok"].as_u64().unwrap()).collect();
    let dark = ok.iter().position(|&n| n == 0);
    assert!(ok[0] > 0 && dark.is_some_and(|d| d > 0 && ok[d + 1..].iter().any(|&n| n > 0)), "ok per second: {ok:?}");
}

#[test]
fn a_command_line_in_an_error_shows_empty_arguments_quoted() {
    // redis-server refuses the unknown option and exits before it is ready.
    let (_d, spec) = spec_file(&never_ready_spec("redis-server", "[--no-such-option, \"two words\"]"));
    let run = run(&spec, &[]);
    assert_eq!(run.code(), 2, "{}", run.stderr());
    let error = run.results()["errors"][0].as_str().unwrap().to_string();
    assert!(error.contains("exited with"), "{error}");
    assert!(error.contains("--bind 127.0.0.1 --save '' --appendonly no --no-such-option 'two words'\n"), "{error}");
}
