//! `faultline compare` tells host drift from a change, against real
//! redis-server processes: two runs of one unchanged spec, the second while
//! this test loads a core and the disk, never exit 1 (the unchanged variant
//! is the control and its move is drift); a candidate given 1 MiB values
//! does, busy host or not; one repeat per side is never called a
//! regression; a `--quick` run is not compared with a full one.

use std::path::Path;
use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::support::*;

/// One server, two workloads: `base` never changes, `cand` takes its value
/// size from a param. Every SET is fsynced, so a busy disk slows both.
const SPEC: &str = r#"name: host-drift-e2e
params:
  cand_value: 64B
  repeats: 3
targets:
  redis: {kind: redis, provider: process, args: ["--save", "", "--appendonly", "yes", "--appendfsync", "always"]}
workloads:
  base: {ops: {set: 1}, keys: {count: 1000}, value_size: 64B}
  cand: {ops: {set: 1}, keys: {count: 100}, value_size: "${cand_value}"}
profiles:
  p: {closed: 2x4}
timing: {warmup: 0s, duration: 1s, repeats: ${repeats}, deadline: 10s}
scenarios:
  - {name: write, target: redis, workload: [base, cand], profiles: [p]}
"#;

/// A core spun and the disk written and fsynced, until dropped.
struct BusyHost {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl BusyHost {
    fn start(scratch: &Path) -> BusyHost {
        let stop = Arc::new(AtomicBool::new(false));
        let spin = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x: u64 = 1;
                while !stop.load(Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            })
        };
        let disk = {
            let stop = stop.clone();
            let path = scratch.join("disk-load");
            std::thread::spawn(move || {
                use std::io::Write;
                let block = vec![0x5au8; 1 << 20];
                while !stop.load(Ordering::Relaxed) {
                    let mut f = std::fs::File::create(&path).unwrap();
                    for _ in 0..16 {
                        f.write_all(&block).unwrap();
                        f.sync_data().unwrap();
                    }
                }
                let _ = std::fs::remove_file(&path);
            })
        };
        BusyHost { stop, threads: vec![spin, disk] }
    }
}

impl Drop for BusyHost {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn compare(a: &Path, b: &Path, json: &Path) -> Output {
    faultline().arg("compare").arg(a).arg(b).arg("--json").arg(json).output().unwrap()
}

fn text(o: &[u8]) -> String {
    String::from_utf8_lossy(o).into_owned()
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Every cell of the run completed (its verdict is INCOMPLETE: no gates).
fn completed(r: &Run) -> std::path::PathBuf {
    let cells = r.results()["cells"].as_array().cloned().unwrap_or_default();
    assert!(!cells.is_empty() && cells.iter().all(|c| c["status"] == "completed"), "{}", r.stderr());
    r.dir.clone().unwrap()
}

fn cell<'a>(c: &'a serde_json::Value, variant: &str) -> &'a serde_json::Value {
    c["cells"].as_array().unwrap().iter().find(|x| x["variant"] == variant).unwrap()
}

#[test]
#[ignore = "alone: needs the machine to itself; scripts/test.sh runs it after the rest"]
fn a_busy_host_is_drift_and_a_real_change_is_a_regression() {
    let _load = exclusive();
    let (dir, spec) = spec_file(SPEC);
    let quiet = run(&spec, &[]);
    let a = completed(&quiet);
    let busy = {
        let _host = BusyHost::start(dir.path());
        run(&spec, &[])
    };
    let b = completed(&busy);

    // Nothing changed: whatever the load did, nothing is a regression.
    let out = dir.path().join("cmp.json");
    for (x, y) in [(&a, &b), (&b, &a)] {
        let o = compare(x, y, &out);
        let md = text(&o.stdout);
        assert_eq!(o.status.code(), Some(0), "{md}{}", text(&o.stderr));
        assert!(md.contains("- `write`: control `base` (unchanged: `base`, `cand`)"), "{md}");
        let c = json(&out);
        assert_eq!(c["regressions"], 0, "{c}");
        for v in ["base", "cand"] {
            let x = cell(&c, v);
            assert!(["drift", "within_noise"].contains(&x["verdict"].as_str().unwrap()), "{x}");
            assert_eq!(x["control"], v, "an unchanged variant is its own control: {x}");
            assert!(x["host_drift"]["value"].as_f64().unwrap() > 0.0, "{x}");
        }
        eprintln!(
            "host drift of base: {} (interval {})",
            cell(&c, "base")["host_drift"]["value"],
            cell(&c, "base")["host_drift"]["interval"]
        );
    }

    // The candidate's values 16,384 times larger, on the busy host: its ratio
    // to the unchanged base falls far beyond any drift.
    let changed = {
        let _host = BusyHost::start(dir.path());
        run(&spec, &["--set", "cand_value=1MiB"])
    };
    let o = compare(&a, &completed(&changed), &out);
    let md = text(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{md}{}", text(&o.stderr));
    assert!(md.contains("changed: `cand`: workload `cand` is defined differently"), "{md}");
    let c = json(&out);
    let cand = cell(&c, "cand");
    assert_eq!((cand["verdict"].as_str(), cand["control"].as_str()), (Some("regression"), Some("base")), "{cand}");
    assert!(cand["normalised"]["interval"]["high"].as_f64().unwrap() < 0.95, "{cand}");
    assert_ne!(cell(&c, "base")["verdict"], "regression");
    assert_eq!(c["regressions"], 1, "{c}");

    // A --quick run is not set beside a full one.
    let quick = run(&spec, &["--quick"]);
    let o = compare(&a, quick.dir.as_ref().unwrap(), &out);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stdout));
    assert!(text(&o.stderr).contains("ran with --quick"), "{}", text(&o.stderr));
}

#[test]
fn one_repeat_per_side_is_never_a_regression() {
    let _load = shared();
    let (_d, spec) = spec_file(SPEC);
    let a = run(&spec, &["--set", "repeats=1"]);
    let b = run(&spec, &["--set", "repeats=1", "--set", "cand_value=1MiB"]);
    let out = tempfile::tempdir().unwrap();
    let json_path = out.path().join("cmp.json");
    let o = compare(a.dir.as_ref().unwrap(), b.dir.as_ref().unwrap(), &json_path);
    let md = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{md}{}", text(&o.stderr));
    assert!(md.contains("2 unjudged: one repeat in a run gives no noise estimate"), "{md}");
    assert!(md.contains("one repeat in runs A and B: a single repeat says nothing of the noise"), "{md}");
    let c = json(&json_path);
    let cand = cell(&c, "cand");
    assert_eq!(cand["verdict"], "unjudged", "{cand}");
    assert!(cand["throughput"]["value"].as_f64().unwrap() < 0.95, "the ratio still shows: {cand}");
}
