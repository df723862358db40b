//! A target is up when it would serve the load: a redis-server still
//! loading its dataset answers INFO but refuses commands with -LOADING, so
//! it is not ready until PING answers PONG and `INFO persistence` says
//! `loading:0`; and the wait tries until its `ready_timeout`, not before.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;

/// A directory holding a dump.rdb of 20,000 keys, written by redis itself.
fn dataset() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut server = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .args(["--enable-debug-command", "yes", "--dir"])
        .arg(dir.path())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let cli = |args: &[&str]| {
        let out = Command::new("redis-cli").args(["-p", &port.to_string()]).args(args).output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while cli(&["PING"]) != "PONG" {
        assert!(Instant::now() < deadline, "the dataset's redis-server did not come up");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(cli(&["DEBUG", "POPULATE", "20000"]), "OK");
    assert_eq!(cli(&["SAVE"]), "OK");
    let _ = server.kill();
    let _ = server.wait();
    assert!(dir.path().join("dump.rdb").exists());
    dir
}

/// A redis-server that loads `dir`'s dump.rdb slowly (100 µs a key, about
/// 2 s), answering -LOADING meanwhile (it serves clients every 1 KiB read).
fn slow_loading_spec(dir: &Path, ready_timeout: &str) -> String {
    format!(
        r#"name: loading
targets:
  t:
    kind: redis
    provider: process
    args: [--dir, "{}", --key-load-delay, "100", --loading-process-events-interval-bytes, "1024"]
    ready_timeout: {ready_timeout}
workloads:
  w: {{ops: {{get: 1}}, keys: {{count: 20000}}}}
profiles:
  p: {{closed: 1x4}}
timing: {{warmup: 0s, duration: 1s}}
scenarios:
  - {{name: s, target: t, workload: w, profiles: [p]}}
gates:
  g: errors == 0
"#,
        dir.display()
    )
}

#[test]
fn a_server_loading_its_dataset_is_not_up_until_it_has_loaded() {
    let _load = shared();
    let data = dataset();
    let (_d, spec) = spec_file(&slow_loading_spec(data.path(), "20s"));
    let run = run(&spec, &[]);
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout(), run.stderr());
    let cell = &run.results()["cells"][0];
    // Not one -LOADING (a server error) in the first cell.
    assert_eq!(cell["stats"]["failed"], 0, "{}", cell["stats"]);
    assert_eq!(cell["stats"]["errors"]["server"], 0, "{}", cell["stats"]);
    assert!(cell["stats"]["ok"].as_u64().unwrap() > 0, "{}", cell["stats"]);
    let log = std::fs::read_to_string(run.dir.as_ref().unwrap().join("logs/t.log")).unwrap();
    assert!(log.contains("DB loaded from disk"), "{log}");
}

#[test]
fn a_server_still_loading_at_its_ready_timeout_says_so() {
    let _load = shared();
    let data = dataset();
    // Loading takes 2 s at least (100 µs a key, 20,000 keys): at 1.5 s the
    // server has long been up on any machine, and is still loading.
    let (_d, spec) = spec_file(&slow_loading_spec(data.path(), "1500ms"));
    let run = run(&spec, &[]);
    assert_eq!(run.code(), 2, "{}\n{}", run.stdout(), run.stderr());
    let r = run.results();
    let error = r["errors"][0].as_str().unwrap();
    assert!(error.contains("within 1.5s") && error.contains("still loading the dataset"), "{error}");
    assert_eq!(r["cells"][0]["status"], "skipped");
}

/// The server starts listening 250 ms before the 3 s ready_timeout: the
/// wait must still be probing then (it used to give up after its probe at
/// about 2.62 s, since the next pause would have crossed the deadline).
/// On a busy machine the server may take longer than those 250 ms to
/// answer: then faultline's error says when its last probe began and
/// ended, and the wait must have gone on to its deadline: the last probe
/// began once the server was due, or was still running at the deadline.
#[test]
fn the_ready_wait_probes_until_its_deadline() {
    let _load = shared();
    let spec_text = r#"name: late
targets:
  t:
    kind: redis
    provider: process
    command: sh
    args: [-c, "sleep 2.75; exec redis-server --port {port} --bind 127.0.0.1 --save '' --appendonly no"]
    ready_timeout: 3s
workloads:
  w: {ops: {get: 1}}
profiles:
  p: {closed: 1x1}
timing: {warmup: 0s, duration: 500ms}
scenarios:
  - {name: s, target: t, workload: w, profiles: [p]}
gates:
  g: errors == 0
"#;
    let (_d, spec) = spec_file(spec_text);
    let run = run(&spec, &[]);
    if run.code() == 0 {
        return;
    }
    assert_eq!(run.code(), 2, "{}\n{}", run.stdout(), run.stderr());
    let error = run.results()["errors"][0].as_str().unwrap_or_default().to_string();
    let marker = "probes, the last begun ";
    let at = error.find(marker).map(|i| &error[i + marker.len()..]).unwrap_or_else(|| panic!("{error}"));
    let last: f64 = at.split(' ').next().and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{error}"));
    let marker = ", ended ";
    let at = error.find(marker).map(|i| &error[i + marker.len()..]).unwrap_or_else(|| panic!("{error}"));
    let ended: f64 = at.split(' ').next().and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{error}"));
    assert!(error.contains("within 3s"), "{error}");
    // Both on the wait's own clock, printed to 0.01 s. A last probe that
    // began before 2.75 s and ended at the deadline was running when the
    // server was due: either way, the wait did not give up early.
    assert!(ended >= 2.995 && last <= ended, "gave up before its deadline: {error}");
}
