//! A `process` target is a whole process group: a server behind a `sh -c`
//! wrapper, and whatever else the wrapper starts, is paused and killed by
//! faults and stopped at the end, and nothing of it outlives faultline —
//! after a PASS, after SIGTERM and after SIGKILL.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;

/// A spec whose target is redis-server and a `sleep MARKER` behind `sh -c`.
fn wrapped_spec(marker: &str, duration: &str, faults: &str) -> String {
    format!(
        r#"name: wrapped
targets:
  t:
    kind: redis
    provider: process
    command: sh
    args: [-c, "redis-server --port {{port}} --bind 127.0.0.1 --save '' --appendonly no & sleep {marker} & wait"]
workloads:
  w: {{ops: {{get: 1}}, keys: {{count: 100}}}}
profiles:
  p: {{closed: 1x4}}
timing: {{warmup: 0s, duration: {duration}, deadline: 300ms}}
scenarios:
  - {{name: s, target: t, workload: w, profiles: [p]{faults}}}
gates:
  g: errors >= 0
"#
    )
}

/// `(pid, ppid, pgid, state)` of every process, from procfs.
fn processes() -> Vec<(i32, i32, i32, char)> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        let Some((_, rest)) = stat.rsplit_once(") ") else { continue };
        let f: Vec<&str> = rest.split(' ').collect();
        all.push((pid, f[1].parse().unwrap(), f[2].parse().unwrap(), f[0].chars().next().unwrap()));
    }
    all
}

fn alive(pid: i32) -> bool {
    processes().iter().any(|p| p.0 == pid && !matches!(p.3, 'Z' | 'X'))
}

fn cmdline(pid: i32) -> String {
    String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default()).replace('\0', " ")
}

/// Everything the run started, seen once the target's group has all three
/// processes (sh, redis-server, sleep): faultline's descendants.
struct Started {
    descendants: Vec<i32>,
}

impl Started {
    fn wait_for(faultline: &Child) -> Started {
        let root = faultline.id() as i32;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let all = processes();
            let mut descendants = vec![root];
            let mut i = 0;
            while i < descendants.len() {
                let parent = descendants[i];
                descendants.extend(all.iter().filter(|p| p.1 == parent).map(|p| p.0));
                i += 1;
            }
            descendants.remove(0);
            let group = descendants.iter().find(|pid| cmdline(**pid).starts_with("sh -c redis-server"));
            if let Some(&leader) = group {
                let members = all.iter().filter(|p| p.2 == leader).count();
                if members == 3 && descendants.len() >= 4 {
                    return Started { descendants };
                }
            }
            assert!(Instant::now() < deadline, "the wrapped target did not start: {descendants:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits up to `limit` for every process the run started to be gone.
    fn assert_gone_within(&self, limit: Duration, after: &str) {
        let deadline = Instant::now() + limit;
        loop {
            let left: Vec<String> =
                self.descendants.iter().filter(|p| alive(**p)).map(|p| format!("{p} {}", cmdline(*p))).collect();
            if left.is_empty() {
                return;
            }
            assert!(Instant::now() < deadline, "left running after {after}: {left:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Started {
    /// A failed assertion must not leave the processes for the next test.
    fn drop(&mut self) {
        for pid in self.descendants.iter().filter(|p| alive(**p)) {
            // SAFETY: SIGKILL to a process this test's faultline started.
            unsafe { libc::kill(*pid, libc::SIGKILL) };
        }
    }
}

fn start(spec: &std::path::Path, out: &std::path::Path) -> Child {
    faultline().arg("run").arg(spec).arg("--out").arg(out).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap()
}

#[test]
fn nothing_of_a_wrapped_target_is_left_after_a_pass_sigterm_or_sigkill() {
    let _load = shared();
    for (ending, marker) in [("pass", "731001"), ("SIGTERM", "731002"), ("SIGKILL", "731003")] {
        let (_d, spec) = spec_file(&wrapped_spec(marker, if ending == "pass" { "2s" } else { "30s" }, ""));
        let out = tempfile::tempdir().unwrap();
        let mut child = start(&spec, out.path());
        let started = Started::wait_for(&child);
        match ending {
            "pass" => {}
            "SIGTERM" => unsafe {
                // SAFETY: signalling our own child.
                libc::kill(child.id() as i32, libc::SIGTERM);
            },
            _ => child.kill().unwrap(),
        }
        let status = child.wait().unwrap();
        let expected = match ending {
            "pass" => Some(0),
            "SIGTERM" => Some(2),
            _ => None,
        };
        assert_eq!(status.code(), expected, "{ending}");
        // After SIGKILL the guardian needs a moment (a limit only a hang
        // reaches: how soon it runs is the machine's business); otherwise
        // all is gone at exit.
        let limit = if ending == "SIGKILL" { Duration::from_secs(20) } else { Duration::ZERO };
        started.assert_gone_within(limit, ending);
        assert!(processes_matching(&format!("sleep {marker}")).is_empty(), "{ending}");
    }
}

#[test]
fn a_pause_freezes_the_wrapped_server_not_only_its_wrapper() {
    let _load = shared();
    let faults = ", faults: [{name: frozen, at: 1s, action: pause, target: t, heal_after: 1500ms}]";
    let (_d, spec) = spec_file(&wrapped_spec("731004", "4s", faults));
    let run = run(&spec, &[]);
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout(), run.stderr());
    let r = run.results();
    let fault = &r["cells"][0]["faults"][0];
    // sh, redis-server and sleep: all three stopped, then all three running.
    let evidence = fault["evidence"].as_str().unwrap();
    assert_eq!(evidence.matches("state T").count(), 3, "{fault}");
    assert!(fault["heal_evidence"].as_str().unwrap().contains("running"), "{fault}");
    // The server itself was frozen: the ops in flight waited out their
    // 300 ms deadline and failed, and no op succeeded after the last
    // failure until the thaw, 1.5 s or more after faultline confirmed the
    // freeze (on faultline's clock: a busy machine makes each later, never
    // earlier).
    let impact = &r["cells"][0]["stats"]["fault_impact"][0];
    assert!(impact["failed"].as_u64().unwrap() >= 4, "{impact}");
    let (requested, confirmed) = (fault["requested_s"].as_f64().unwrap(), fault["confirmed_s"].as_f64().unwrap());
    let first_success = impact["first_success_s"].as_f64().unwrap();
    assert!(first_success >= impact["denied_window_s"].as_f64().unwrap(), "{impact}");
    assert!(requested + first_success >= confirmed + 1.5 - 1e-3, "{impact}, {fault}");
    assert!(processes_matching("sleep 731004").is_empty());
}
