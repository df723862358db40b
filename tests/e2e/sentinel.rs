//! `redis+sentinel://` targets against real redis-server processes and a
//! real Sentinel (`redis-server --sentinel`) that the test repoints by hand,
//! as an operator would: a primary demoted without its clients being
//! disconnected answers writes with `-READONLY`, and the load must leave it
//! for the primary the Sentinel names now. The Sentinels' own failover is in
//! faults.rs (docker), and here the lost-write count around a failover, on
//! containers: a coordinated failover loses nothing, and where a plain one,
//! an isolated primary or a killed one loses acknowledged writes, the report
//! places them against the span a demoted primary was still primary.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::*;

/// A real Sentinel watching one primary as `m` (quorum 1). Its
/// down-after is a minute, so it never fails over by itself in a test.
struct Sentinel {
    port: u16,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Sentinel {
    fn start(primary_port: u16) -> Sentinel {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let conf = dir.path().join("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {}\nsentinel monitor m 127.0.0.1 {primary_port} 1\n\
                 sentinel down-after-milliseconds m 60000\n",
                dir.path().display()
            ),
        )
        .unwrap();
        let child = Command::new("redis-server")
            .arg(&conf)
            .arg("--sentinel")
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server is installed (apt-get install redis-server)");
        let sentinel = Sentinel { port, child, _dir: dir };
        let named = format!("127.0.0.1\n{primary_port}");
        assert!(
            wait_until(Duration::from_secs(10), || sentinel.cli(&["SENTINEL", "get-master-addr-by-name", "m"])
                == Some(named.clone())),
            "the Sentinel on {port} did not come up naming 127.0.0.1:{primary_port}"
        );
        sentinel
    }

    fn cli(&self, args: &[&str]) -> Option<String> {
        let out = Command::new("redis-cli").args(["-p", &self.port.to_string()]).args(args).output().ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// Makes the Sentinel name another primary, the way an operator moves
    /// a Sentinel by hand: forget the old one, monitor the new one.
    fn repoint(&self, primary_port: u16) {
        assert_eq!(self.cli(&["SENTINEL", "REMOVE", "m"]).as_deref(), Some("OK"));
        let port = primary_port.to_string();
        assert_eq!(self.cli(&["SENTINEL", "MONITOR", "m", "127.0.0.1", &port, "1"]).as_deref(), Some("OK"));
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_demoted_primary_answering_readonly_is_left_for_the_one_the_sentinel_names() {
    let _load = shared();
    let old = RedisServer::start();
    let new = RedisServer::start();
    // A replica's full sync loads from the socket, so it writes no RDB file
    // into the working directory (the source tree).
    for server in [&old, &new] {
        assert_eq!(server.cli(&["CONFIG", "SET", "repl-diskless-load", "swapdb"]).as_deref(), Some("OK"));
    }
    new.cli(&["REPLICAOF", "127.0.0.1", &old.port.to_string()]).unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || new
            .cli(&["INFO", "replication"])
            .is_some_and(|i| i.contains("master_link_status:up"))),
        "the replica did not link up"
    );
    let sentinel = Sentinel::start(old.port);
    let spec = format!(
        r#"name: readonly-reroute
targets:
  t: {{kind: redis, provider: external, uri: "redis+sentinel://127.0.0.1:{}/m"}}
workloads:
  w: {{ops: {{get: 50, set: 50}}, keys: {{count: 200000}}, value_size: 48B}}
profiles:
  p: {{open: {{rate: 5000, connections: 2, in_flight: 16}}}}
timing: {{warmup: 0s, duration: 6s}}
scenarios:
  - {{name: s, target: t, workload: w, profiles: [p]}}
checkers: [lost-acknowledged-write]
gates:
  no-hangs: hangs == 0
"#,
        sentinel.port
    );
    let (_d, spec) = spec_file(&spec);

    std::thread::scope(|scope| {
        let switch = scope.spawn(|| {
            // The load is on the old primary.
            assert!(wait_until(Duration::from_secs(20), || old.load_clients() == 2), "the load never reached it");
            std::thread::sleep(Duration::from_millis(1200));
            // An operator's switch-over, done by hand: promote the replica and
            // point the Sentinel at it; the old primary keeps taking writes for
            // a moment (those are lost), then is demoted. Nothing disconnects
            // the clients: only the READONLY answers tell them.
            new.cli(&["REPLICAOF", "NO", "ONE"]).unwrap();
            sentinel.repoint(new.port);
            std::thread::sleep(Duration::from_millis(300));
            old.cli(&["REPLICAOF", "127.0.0.1", &new.port.to_string()]).unwrap();
            // How soon is faultline's count of READONLY answers below; here
            // only that the clients moved while the run went on.
            let moved = wait_until(Duration::from_secs(20), || new.load_clients() == 2 && old.load_clients() == 0);
            (moved, old.load_clients(), new.load_clients())
        });
        let run = run(&spec, &[]);
        let (moved, on_old, on_new) = switch.join().unwrap();
        assert!(moved, "the load stayed on the old primary ({on_old} clients; {on_new} on the new)");

        let r = run.results();
        let stats = &r["cells"][0]["stats"];
        let errors = &stats["errors"];
        // The writes the old primary refused: each connection leaves at its
        // first READONLY, so a batch's worth at most, not the rest of the run
        // (a client that stayed would collect thousands, however fast the
        // machine).
        let server = errors["server"].as_u64().unwrap();
        assert!((1..=32).contains(&server), "{errors}");
        assert!(errors["connection"].as_u64().unwrap() <= 32, "{errors}");
        // The load goes on on the new primary to the end: ops answered in
        // the last second, whatever the timeline's bucket.
        let timeline = stats["timeline"].as_array().unwrap();
        let per_second = (1.0 / stats["timeline_step_s"].as_f64().unwrap()).round() as usize;
        let last: u64 = timeline[timeline.len() - per_second..].iter().map(|p| p["ok"].as_u64().unwrap()).sum();
        assert!(last > 0, "the load goes on on the new primary: {timeline:?}");
        // Writes the old primary acknowledged after the promotion are gone:
        // that stays visible.
        let lost =
            r["cells"][0]["checks"].as_array().unwrap().iter().find(|c| c["checker"] == "lost-acknowledged-write");
        let lost = lost.unwrap();
        assert_eq!(lost["status"], "violated", "{lost}");
        assert_eq!(r["targets"][0]["uri"], format!("redis+sentinel://127.0.0.1:{}/m", sentinel.port));
    });
}

/// Three Redis containers and three Sentinels that fail over after 2 s;
/// the load follows the primary through them. `{scenarios}` is filled in.
const SENTINEL_GROUP: &str = r#"name: failover-truth
targets:
  kv:
    kind: redis
    provider: docker
    image: faultline/redis:bookworm
    members: 3
    tmpfs: ["/data:size=64m"]
    ready: {log: "Ready to accept connections"}
    ready_timeout: 30s
    companions:
      sentinels:
        count: 3
        port: 26379
        command: sh
        args:
          - -c
          - |
            printf 'port 26379\nsentinel monitor kv {primary_ip} {port} {quorum}\nsentinel down-after-milliseconds kv 2000\nsentinel failover-timeout kv 10000\n' > /tmp/s.conf
            exec redis-sentinel /tmp/s.conf
    discovery: {sentinels: sentinels, master: kv}
workloads:
  counters:
    ops: {get: 60, set: 40}
    keys: {count: 5000, distribution: zipfian, exponent: 0.99}
    value_size: {min: 32B, max: 256B}
profiles:
  clients: {closed: 2x8}
timing: {warmup: 500ms, duration: 7s, deadline: 1s}
checkers: [stale-read-after-ack, lost-acknowledged-write, final-state]
gates:
  no-lost-writes: lost_acked_writes == 0
scenarios:
"#;

fn lost_check(cell: &serde_json::Value) -> &serde_json::Value {
    let checks = cell["checks"].as_array().unwrap();
    checks.iter().find(|k| k["checker"] == "lost-acknowledged-write").unwrap_or_else(|| panic!("{cell}"))
}

/// The fault's share of the lost writes adds up: inside the spans plus
/// outside them is all of it, and all of the fault's is the checker's count
/// (each cell here has one fault).
fn placement(cell: &serde_json::Value) -> &serde_json::Value {
    let fault = &cell["faults"][0];
    let placed = &fault["lost_writes"];
    let count = |v: &serde_json::Value| v["count"].as_u64().unwrap();
    assert_eq!(count(&placed["lost"]), lost_check(cell)["violations"].as_u64().unwrap(), "{fault}");
    let inside: u64 = placed["demoted_primaries"].as_array().unwrap().iter().map(|d| count(&d["lost"])).sum();
    assert_eq!(inside + count(&placed["outside_demoted"]), count(&placed["lost"]), "{fault}");
    placed
}

#[test]
fn a_coordinated_failover_loses_nothing_and_a_plain_ones_losses_lie_in_the_demoted_primary_span() {
    let _load = shared();
    // Coordinated first, while the group has one primary; it leaves one
    // primary behind (the old one made a replica at once).
    let spec = format!(
        "{SENTINEL_GROUP}{}",
        r#"  - name: coordinated
    target: kv
    workload: counters
    profiles: [clients]
    faults: [{name: coordinated, at: 2s, action: failover, target: kv.primary, coordinated: true}]
  - name: plain
    target: kv
    workload: counters
    profiles: [clients]
    faults: [{name: plain, at: 2s, action: failover, target: kv.primary}]
"#
    );
    let (_d, spec) = spec_file(&spec);
    let run = run(&spec, &[]);
    let r = run.results();
    let cells = r["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2, "{}\n{}", run.stdout(), run.stderr());

    // The known-good path: the switch happened (another member is primary)
    // and nothing acknowledged was lost.
    let coordinated = &cells[0];
    let fault = &coordinated["faults"][0];
    assert!(fault.get("error").is_none() && fault["confirmed_s"].is_number(), "{fault}");
    assert!(fault["evidence"].as_str().unwrap().contains("caught up"), "{fault}");
    let old = fault["hit"][0].as_str().unwrap().to_string();
    let roles = coordinated["roles"].as_array().unwrap();
    assert!(roles.iter().any(|c| c["member"] != old.as_str() && c["role"] == "primary"), "no switch: {roles:?}");
    let lost = lost_check(coordinated);
    assert_eq!(lost["status"], "ok", "{lost}");
    assert!(lost["checked"].as_u64().unwrap() > 1000, "{lost}");
    assert_eq!(placement(coordinated)["lost"]["count"], 0);

    // The plain failover: the old primary goes on acknowledging writes after
    // its successor was promoted; the checker counts them lost, and the
    // report places them inside that span.
    let plain = &cells[1];
    let lost = lost_check(plain);
    assert_eq!(lost["status"], "violated", "{lost}");
    let placed = placement(plain);
    let spans = placed["demoted_primaries"].as_array().unwrap();
    let old = plain["faults"][0]["hit"][0].as_str().unwrap();
    let span = spans.iter().find(|d| d["member"] == old).unwrap_or_else(|| panic!("{old} never demoted: {placed}"));
    assert_ne!(span["successor"], old);
    let (count, inside) = (placed["lost"]["count"].as_u64().unwrap(), span["lost"]["count"].as_u64().unwrap());
    assert!(inside * 100 >= count * 99, "{inside} of {count} lost writes inside the span: {placed}");
    assert!(span["lost"]["first_s"].as_f64().unwrap() >= span["from_s"].as_f64().unwrap(), "{span}");
    let report = run.report();
    assert!(report.contains("fault plain: "), "{report}");
    if count == inside {
        assert!(report.contains("lost writes, all acknowledged between"), "{report}");
    }
    assert!(report.contains(&format!("{old} was a demoted primary still answering as primary")), "{report}");
    let gate = r["gates"].as_array().unwrap().iter().find(|g| g["name"] == "no-lost-writes").unwrap();
    assert_eq!(gate["result"], "fail", "{gate}");
    assert_eq!(left_behind(run.dir.as_ref().unwrap()), Vec::<String>::new());
}

#[test]
fn lost_writes_of_a_killed_or_isolated_primary_are_counted_and_placed() {
    let _load = shared();
    // Killed and started again at once, before the Sentinels act: it comes
    // back empty (no persistence) and its replicas copy the empty data set.
    // Then a primary cut off from its peers but not from its clients: the
    // Sentinels promote another, and it goes on acknowledging writes.
    let spec = format!(
        "{SENTINEL_GROUP}{}",
        r#"  - name: killed
    target: kv
    workload: counters
    profiles: [clients]
    faults: [{name: killed, at: 2s, action: kill, target: kv.primary, heal_after: 500ms}]
  - name: isolated
    target: kv
    workload: counters
    profiles: [clients]
    faults: [{name: isolated, at: 1500ms, action: isolate, target: kv.primary, heal_after: 4s}]
"#
    );
    let (_d, spec) = spec_file(&spec);
    let run = run(&spec, &[]);
    let r = run.results();
    let cells = r["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2, "{}\n{}", run.stdout(), run.stderr());
    let report = run.report();

    // Killed: the checker judged, and what it counts is what is placed.
    let killed = &cells[0];
    let lost = lost_check(killed);
    assert_ne!(lost["status"], "unknown", "{lost}");
    placement(killed);
    if lost["violations"].as_u64().unwrap() > 0 {
        assert!(report.contains("fault killed: "), "{report}");
    }

    // Isolated: writes acknowledged by the cut-off primary are lost, and
    // every write acknowledged while it was a demoted primary with a
    // successor is one of them (the load stays on it: it never refuses).
    let isolated = &cells[1];
    let lost = lost_check(isolated);
    assert_eq!(lost["status"], "violated", "{lost}");
    let placed = placement(isolated);
    let old = isolated["faults"][0]["hit"][0].as_str().unwrap();
    let spans = placed["demoted_primaries"].as_array().unwrap();
    let span = spans.iter().find(|d| d["member"] == old).unwrap_or_else(|| panic!("{old} never demoted: {placed}"));
    let inside = span["lost"]["count"].as_u64().unwrap();
    assert!(inside > 0, "{span}");
    assert!(inside * 100 >= span["acked_writes"].as_u64().unwrap() * 95, "{span}");
    assert!(report.contains("fault isolated: "), "{report}");
    assert!(report.contains(&format!("{old} was a demoted primary still answering as primary")), "{report}");
    assert_eq!(left_behind(run.dir.as_ref().unwrap()), Vec::<String>::new());
}
