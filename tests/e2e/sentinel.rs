//! `redis+sentinel://` targets against real redis-server processes and a
//! stand-in Sentinel the test steers: a primary demoted without its clients
//! being disconnected answers writes with `-READONLY`, and the load must
//! leave it for the primary the Sentinel names now. The real Sentinels'
//! failover is in docker.rs.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::*;

/// Answers every `SENTINEL get-master-addr-by-name` with 127.0.0.1 and the
/// port it is told, and counts the questions.
struct FakeSentinel {
    port: u16,
    master: Arc<AtomicU16>,
    asked: Arc<AtomicU32>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeSentinel {
    fn start(master_port: u16) -> FakeSentinel {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let master = Arc::new(AtomicU16::new(master_port));
        let asked = Arc::new(AtomicU32::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (m, a, s) = (Arc::clone(&master), Arc::clone(&asked), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let mut conn = match listener.accept() {
                    Ok((c, _)) => c,
                    Err(_) => {
                        std::thread::sleep(Duration::from_millis(2));
                        continue;
                    }
                };
                conn.set_nonblocking(false).unwrap();
                conn.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
                let mut request = Vec::new();
                let mut buf = [0u8; 256];
                while !request.ends_with(b"$1\r\nm\r\n") {
                    match conn.read(&mut buf) {
                        Ok(n) if n > 0 => request.extend_from_slice(&buf[..n]),
                        _ => break,
                    }
                }
                assert!(
                    request.starts_with(b"*3\r\n$8\r\nSENTINEL\r\n$23\r\nget-master-addr-by-name\r\n"),
                    "{}",
                    String::from_utf8_lossy(&request)
                );
                a.fetch_add(1, Ordering::Relaxed);
                let port = m.load(Ordering::Relaxed).to_string();
                let reply = format!("*2\r\n$9\r\n127.0.0.1\r\n${}\r\n{port}\r\n", port.len());
                let _ = conn.write_all(reply.as_bytes());
            }
        });
        FakeSentinel { port, master, asked, stop, thread: Some(thread) }
    }
}

impl Drop for FakeSentinel {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
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
    let sentinel = FakeSentinel::start(old.port);
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
            sentinel.master.store(new.port, Ordering::Relaxed);
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
        // Asked at the probe, at each of the 2 connects, at each of the 2
        // reconnects, and for the final state.
        assert!(sentinel.asked.load(Ordering::Relaxed) >= 6, "{}", sentinel.asked.load(Ordering::Relaxed));
        // Writes the old primary acknowledged after the promotion are gone:
        // that stays visible.
        let lost =
            r["cells"][0]["checks"].as_array().unwrap().iter().find(|c| c["checker"] == "lost-acknowledged-write");
        let lost = lost.unwrap();
        assert_eq!(lost["status"], "violated", "{lost}");
        assert_eq!(r["targets"][0]["uri"], format!("redis+sentinel://127.0.0.1:{}/m", sentinel.port));
    });
}
