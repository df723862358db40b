//! `redis+sentinel://` targets against real redis-server processes and a
//! real Sentinel (`redis-server --sentinel`) that the test repoints by hand,
//! as an operator would: a primary demoted without its clients being
//! disconnected answers writes with `-READONLY`, and the load must leave it
//! for the primary the Sentinel names now. The Sentinels' own failover is in
//! faults.rs (docker).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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

/// Load clients connected to a server: normal clients whose last command
/// was one of the load's (the replication link is a client too, flag M).
fn load_clients(server: &RedisServer) -> usize {
    let list = server.cli(&["CLIENT", "LIST"]).unwrap_or_default();
    list.lines().filter(|l| l.contains(" flags=N ") && (l.contains(" cmd=get ") || l.contains(" cmd=set "))).count()
}

fn wait_until(within: Duration, mut ok: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    ok()
}

#[test]
fn a_demoted_primary_answering_readonly_is_left_for_the_one_the_sentinel_names() {
    let _load = exclusive();
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
timing: {{warmup: 0s, duration: 4s}}
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
            assert!(wait_until(Duration::from_secs(20), || load_clients(&old) == 2), "the load never reached it");
            std::thread::sleep(Duration::from_millis(1200));
            // An operator's switch-over, done by hand: promote the replica and
            // point the Sentinel at it; the old primary keeps taking writes for
            // a moment (those are lost), then is demoted. Nothing disconnects
            // the clients: only the READONLY answers tell them.
            new.cli(&["REPLICAOF", "NO", "ONE"]).unwrap();
            sentinel.repoint(new.port);
            std::thread::sleep(Duration::from_millis(300));
            let demoted_at = Instant::now();
            old.cli(&["REPLICAOF", "127.0.0.1", &new.port.to_string()]).unwrap();
            let moved = wait_until(Duration::from_secs(2), || load_clients(&new) == 2 && load_clients(&old) == 0);
            (moved, demoted_at.elapsed(), load_clients(&old), load_clients(&new))
        });
        let run = run(&spec, &[]);
        let (moved, took, on_old, on_new) = switch.join().unwrap();
        assert!(moved, "after {took:?} the load was still on the old primary ({on_old} clients; {on_new} on the new)");
        assert!(took < Duration::from_secs(1), "moved within {took:?}");

        let r = run.results();
        let stats = &r["cells"][0]["stats"];
        let errors = &stats["errors"];
        // The writes the old primary refused: each connection leaves at its
        // first READONLY, so a batch's worth at most, not the rest of the run.
        let server = errors["server"].as_u64().unwrap();
        assert!((1..=32).contains(&server), "{errors}");
        assert!(errors["connection"].as_u64().unwrap() <= 32, "{errors}");
        let timeline = stats["timeline"].as_array().unwrap();
        for point in &timeline[timeline.len() - 2..] {
            assert!(point["ok"].as_u64().unwrap() > 1000, "the load goes on on the new primary: {point}");
        }
        // Writes the old primary acknowledged after the promotion are gone:
        // that stays visible.
        let lost =
            r["cells"][0]["checks"].as_array().unwrap().iter().find(|c| c["checker"] == "lost-acknowledged-write");
        let lost = lost.unwrap();
        assert_eq!(lost["status"], "violated", "{lost}");
        assert_eq!(r["targets"][0]["uri"], format!("redis+sentinel://127.0.0.1:{}/m", sentinel.port));
    });
}
