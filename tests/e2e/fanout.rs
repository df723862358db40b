//! Publish/subscribe fan-out against real redis-server processes: what the
//! subscribers received is set against what was published, exactly. With
//! every subscriber reading, nothing is dropped and every message reaches
//! every subscriber of its channel once; with one subscriber paused on a
//! server whose pubsub output buffer limit is small, the server drops that
//! subscriber (its log says so), it subscribes again, and its drops are
//! exactly what was published on its channel and never reached it, while
//! the others drop nothing. Only what faultline recorded and decided is
//! asserted, never how fast the machine was.

use std::path::Path;

use serde_json::Value;

use crate::support::*;

const EVERY_SUBSCRIBER_READS: &str = "name: fanout
targets:
  a: {kind: redis, provider: process}
  b: {kind: redis, provider: process}
workloads:
  fan: {ops: {publish: 1}, fanout: {channels: 2, subscribers: 6, message_size: 100B}}
profiles:
  open: {open: {rate: 1500, connections: 2, in_flight: 16, min_sent: 0}}
  closed: {closed: 2x4}
timing: {warmup: 300ms, duration: 2s, repeats: 2}
scenarios:
  - {name: fan, target: [a, b], workload: fan, profiles: [open, closed], checkers: []}
gates:
  no-drops: drops == 0
  all-delivered: delivered_rate > 0
  nothing-twice: duplicates == 0 and reordered == 0
  delivery: delivery_p99 < 10s
  b-like-a: ratio(delivered_rate, b/a) > 0
";

/// The cell's fan-out books, with a context for failures.
fn fanout(cell: &Value) -> &Value {
    assert_eq!(cell["status"], "completed", "{cell}");
    &cell["stats"]["fanout"]
}

fn n(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("no `{key}` in {v}"))
}

/// Per subscriber: (published, received, drops); and the totals add up.
fn books_add_up(f: &Value) -> Vec<(u64, u64, u64)> {
    let subs = f["per_subscriber"].as_array().unwrap();
    assert_eq!(subs.len() as u64, n(f, "subscribers"), "{f}");
    let per: Vec<(u64, u64, u64)> = subs.iter().map(|s| (n(s, "published"), n(s, "received"), n(s, "drops"))).collect();
    for (s, (published, received, drops)) in subs.iter().zip(&per) {
        assert_eq!(*drops, published - received, "{s}");
    }
    let sum = |pick: fn(&(u64, u64, u64)) -> u64| per.iter().map(pick).sum::<u64>();
    assert_eq!(sum(|p| p.0), n(f, "expected"), "owed is the subscribers' published, summed: {f}");
    assert_eq!(sum(|p| p.1), n(f, "delivered"), "{f}");
    assert_eq!(sum(|p| p.2), n(f, "drops"), "{f}");
    assert_eq!(n(f, "delivered") + n(f, "drops"), n(f, "expected"), "{f}");
    // Subscriber i takes channel i mod channels: the subscribers of one
    // channel were owed the same messages, and the channels' add up to
    // what was published.
    let channels = n(f, "channels") as usize;
    let owed: Vec<u64> = (0..channels).map(|c| per[c].0).collect();
    for (i, p) in per.iter().enumerate() {
        assert_eq!(subs[i]["channels"], serde_json::json!([i % channels]), "{f}");
        assert_eq!(p.0, owed[i % channels], "{f}");
    }
    assert_eq!(owed.iter().sum::<u64>(), n(f, "published"), "{f}");
    per
}

#[test]
fn every_message_reaches_every_subscriber_of_its_channel_once_and_variants_compare_on_deliveries() {
    let _load = shared();
    let (_d, spec) = spec_file(EVERY_SUBSCRIBER_READS);
    let run = run(&spec, &[]);
    let r = run.results();
    let context = || format!("{}\n{}", run.stdout(), run.stderr());
    assert_eq!(run.code(), 0, "exit {}: {}", run.code(), context());
    let cells = r["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 8, "2 targets x 2 profiles x 2 repeats");
    for cell in cells {
        let f = fanout(cell);
        assert!(n(f, "published") > 0, "{f}");
        // Each message to each of its channel's 3 subscribers, once.
        assert_eq!(n(f, "expected"), 3 * n(f, "published"), "{f}");
        assert_eq!(n(f, "delivered"), n(f, "expected"), "{f}");
        assert_eq!(n(f, "receivers"), n(f, "expected"), "PUBLISH reached every subscriber: {f}");
        for key in ["drops", "duplicates", "reordered", "reconnects"] {
            assert_eq!(n(f, key), 0, "{key}: {f}");
        }
        assert_eq!(f["drained"], true, "{f}");
        assert!(f["drain_ms"].as_f64().unwrap() <= 1100.0, "{f}");
        let per = books_add_up(f);
        assert!(per.iter().all(|(published, received, _)| published == received), "{f}");
        let rate = f["delivered_per_s"].as_f64().unwrap();
        assert!((rate - n(f, "delivered") as f64 / cell["measured_s"].as_f64().unwrap()).abs() < 1e-6, "{f}");
        assert!(f["latency_ms"]["p99"].as_f64().unwrap() > 0.0, "{f}");
        // The publishes are ops of their own (PUBLISH's round trip), and
        // the window's successful ones are the messages published.
        assert_eq!(cell["stats"]["per_op"]["publish"]["ok"].as_u64().unwrap(), n(f, "published"), "{cell}");
    }
    // An open loop at 1,500/s for 2 s owes its schedule, all published.
    let open = cells.iter().find(|c| c["profile"] == "open").unwrap();
    assert_eq!(n(fanout(open), "published"), n(&open["stats"]["open_loop"], "sent"), "{open}");
    // Variants compare on deliveries per second, with an interval.
    for c in r["comparisons"].as_array().unwrap() {
        let ratio = &c["delivered_rate"];
        assert!(ratio["value"].as_f64().unwrap() > 0.0, "{c}");
        assert!(ratio["interval"]["low"].is_number(), "{c}");
        assert!(c["target_stats"]["mean_delivered_rate"].as_f64().unwrap() > 0.0, "{c}");
    }
    for gate in r["gates"].as_array().unwrap() {
        assert_eq!(gate["result"], "pass", "{gate}");
    }
    let report = run.report();
    assert!(report.contains("Publish/subscribe fan-out: messages published in the window"), "{report}");
    assert!(report.contains("| Delivered/s | Drops |"), "{report}");
    assert!(report.contains("Publish/subscribe fan-out: deliveries per second"), "{report}");
}

const ONE_SUBSCRIBER_PAUSED: &str = "name: fanout-paused
targets:
  cache:
    kind: redis
    provider: process
    # A subscriber 64 KiB behind is disconnected at once.
    args: [--client-output-buffer-limit, pubsub 64kb 0 0]
workloads:
  fan:
    ops: {publish: 1}
    fanout:
      channels: 2
      subscribers: 4
      # Large enough that the socket buffers cannot hold a 2 s pause.
      message_size: 8KiB
      pause: {subscribers: 1, at: 500ms, for: 2s}
profiles:
  p: {open: {rate: 2000, connections: 2, in_flight: 16, min_sent: 0}}
timing: {warmup: 300ms, duration: 4s}
scenarios:
  - {name: slow, target: cache, workload: fan, profiles: [p], checkers: []}
gates:
  no-drops: drops == 0
";

/// Lines of the server's logs under the run directory that contain `needle`.
fn log_lines(dir: &Path, needle: &str) -> usize {
    let mut count = 0;
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            count += log_lines(&path, needle);
        } else if path.extension().is_some_and(|e| e == "log") && path.file_name().is_some_and(|n| n != "run.log") {
            let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
            count += text.lines().filter(|l| l.contains(needle)).count();
        }
    }
    count
}

#[test]
fn a_paused_subscriber_is_dropped_by_the_server_and_its_drops_are_counted_exactly() {
    let _load = shared();
    let (_d, spec) = spec_file(ONE_SUBSCRIBER_PAUSED);
    let run = run(&spec, &[]);
    let r = run.results();
    let context = || format!("{}\n{}", run.stdout(), run.stderr());
    assert_eq!(run.code(), 1, "the drops gate fails: {}", context());
    let cell = &r["cells"][0];
    let f = fanout(cell);
    let per = books_add_up(f);
    let subs = f["per_subscriber"].as_array().unwrap();
    // The paused subscriber: the server dropped it (its log says so, once
    // per reconnect), it subscribed again, and lost what was published on
    // its channel meanwhile.
    let paused = &subs[0];
    assert_eq!(paused["paused"], true, "{f}");
    let reconnects = n(paused, "reconnects");
    assert!(reconnects >= 1, "{f}");
    assert_eq!(
        log_lines(run.dir.as_ref().unwrap(), "scheduled to be closed ASAP for overcoming of output buffer limits")
            as u64,
        reconnects,
        "the server's log against the subscriber's reconnects: {f}"
    );
    assert!(per[0].2 > 0, "{f}");
    assert_eq!(per[0].2, per[0].0 - per[0].1, "{f}");
    // Every other subscriber, its channel's neighbour included, got everything.
    for (s, p) in subs.iter().zip(&per).skip(1) {
        assert_eq!((p.2, n(s, "reconnects")), (0, 0), "{s}");
        assert_eq!(p.0, p.1, "{s}");
    }
    assert_eq!(n(f, "drops"), per[0].2, "{f}");
    // PUBLISH saw one subscriber fewer while it was gone: every message it
    // said nobody took on that channel is among the drops.
    let missed = n(f, "expected") - n(f, "receivers");
    assert!(missed > 0 && missed <= n(f, "drops"), "{f}");
    assert_eq!(n(f, "duplicates"), 0, "{f}");
    let gate = &r["gates"][0];
    assert_eq!(gate["result"], "fail", "{gate}");
    assert!(gate["evidence"].as_str().unwrap().contains(&format!("drops = {}", n(f, "drops"))), "{gate}");
    let report = run.report();
    assert!(report.contains("subscriber 0 (channel 0, paused)"), "{report}");
}
