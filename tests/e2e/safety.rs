//! The checkers on real recorded histories: clean on a healthy redis-server,
//! and catching data loss and torn values that the test really inflicts on it.

use std::time::Duration;

use crate::support::*;

#[test]
fn a_healthy_server_passes_every_checker_and_the_export_round_trips() {
    let _load = shared();
    let run = run(&repo().join("specs/quickstart-safety.yaml"), &["--set", "duration=2s"]);
    quickstart_safety_judged(&run);
    assert!(run.report().contains("| cache | 1 | linearizability |"), "{}", run.report());

    let dir = run.dir.clone().unwrap();
    let out = faultline().args(["history", "export"]).arg(&dir).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let edn = dir.join("history/001.edn");
    let check = faultline().args(["check", "--model", "kv"]).arg(&edn).output().unwrap();
    let said = String::from_utf8_lossy(&check.stdout);
    // Linearizable; or, on a slow moment, unknown at its limits by its own
    // word (as the run's search may be); never a violation.
    let at_limits = [": unknown — memory cap of", ": unknown — time budget of"].iter().any(|w| said.contains(w));
    assert!(check.status.code() == Some(0) || (check.status.code() == Some(2) && at_limits), "{said}");
}

fn spec_against(port: u16, keys: u32, checkers: &str, gate: &str) -> String {
    format!(
        r#"name: injured
targets:
  t: {{kind: redis, provider: external, uri: "redis://127.0.0.1:{port}"}}
workloads:
  w: {{ops: {{get: 60, set: 40}}, keys: {{count: {keys}}}, value_size: 48B}}
profiles:
  p: {{open: {{rate: 5000, connections: 2, in_flight: 16}}}}
timing: {{warmup: 0s, duration: 3s}}
scenarios:
  - {{name: s, target: t, workload: w, profiles: [p]}}
checkers: [{checkers}]
gates:
  g: {gate}
"#
    )
}

fn check<'a>(r: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    r["cells"][0]["checks"].as_array().unwrap().iter().find(|c| c["checker"] == name).unwrap()
}

#[test]
fn data_loss_is_caught_as_stale_reads_lost_writes_and_a_linearizability_violation() {
    let _load = shared();
    let server = RedisServer::start();
    let (_d, spec) = spec_file(&spec_against(
        server.port,
        20_000,
        "stale-read-after-ack, lost-acknowledged-write, linearizability",
        "stale_reads == 0",
    ));
    // A second after the load reached the server (seen there, not guessed
    // from how long faultline takes to start), every key is wiped:
    // acknowledged writes vanish.
    let run = std::thread::scope(|scope| {
        let wipe = scope.spawn(|| {
            assert!(wait_until(Duration::from_secs(30), || server.load_clients() == 2), "the load never came");
            std::thread::sleep(Duration::from_secs(1));
            server.cli(&["FLUSHALL"])
        });
        let run = run(&spec, &[]);
        assert_eq!(wipe.join().unwrap().as_deref(), Some("OK"));
        run
    });
    assert_eq!(run.code(), 1, "{}\n{}", run.stdout(), run.stderr());
    let r = run.results();
    let stale = check(&r, "stale-read-after-ack");
    assert_eq!(stale["status"], "violated", "{stale}");
    assert!(stale["witnesses"][0].as_str().unwrap().contains("returned no value"), "{stale}");
    let lost = check(&r, "lost-acknowledged-write");
    // Of 20000 keys, most written before the wipe are not written again after it.
    assert_eq!(lost["status"], "violated", "{lost}");
    assert!(lost["witnesses"][0].as_str().unwrap().contains("the key is absent"), "{lost}");
    assert_eq!(check(&r, "linearizability")["status"], "violated");
    assert_eq!(r["gates"][0]["result"], "fail");
    assert!(run.report().contains("returned no value"));
}

#[test]
fn torn_values_are_caught_in_the_final_state() {
    let _load = shared();
    let server = RedisServer::start();
    let (_d, spec) = spec_file(&spec_against(server.port, 200, "final-state", "torn_values == 0"));
    let port = server.port.to_string();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    // Until the run ends, keep appending to every key: values stop being one write's.
    let tear = std::thread::spawn(move || {
        while done_rx.try_recv().is_err() {
            let mut cmds = String::new();
            for k in 0..200 {
                cmds.push_str(&format!("APPEND fl:{k} xyz\n"));
            }
            let mut child = std::process::Command::new("redis-cli")
                .args(["-p", &port])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap();
            use std::io::Write;
            child.stdin.take().unwrap().write_all(cmds.as_bytes()).unwrap();
            child.wait().unwrap();
        }
    });
    let run = run(&spec.clone(), &[]);
    done_tx.send(()).unwrap();
    tear.join().unwrap();
    let r = run.results();
    let fs = check(&r, "final-state");
    assert_eq!(fs["status"], "violated", "{fs}");
    assert!(fs["violations"].as_u64().unwrap() > 10, "{fs}");
    assert!(fs["witnesses"][0].as_str().unwrap().contains("torn or mixed"), "{fs}");
}

#[test]
fn the_uri_database_holds_the_load_and_the_final_read() {
    let _load = shared();
    let server = RedisServer::start();
    let spec = spec_against(server.port, 200, "lost-acknowledged-write, final-state", "lost_acked_writes == 0")
        .replace(&format!("127.0.0.1:{}\"", server.port), &format!("127.0.0.1:{}/3\"", server.port));
    let (_d, spec) = spec_file(&spec);
    let run = run(&spec, &[]);
    measured_as_asked(&run, &[]);
    assert_eq!(check(&run.results(), "lost-acknowledged-write")["violations"], 0);
    assert_eq!(server.cli(&["-n", "0", "DBSIZE"]).as_deref(), Some("0"));
    assert_ne!(server.cli(&["-n", "3", "DBSIZE"]).as_deref(), Some("0"));
}
