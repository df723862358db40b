//! Interrupted at random points, during start-up and during active faults, a
//! run leaves nothing behind: after SIGINT or SIGTERM faultline heals its
//! faults and removes what it started; after SIGKILL `faultline teardown`
//! does. Containers, networks, host firewall rules and processes are compared
//! before and after. The interrupt points come from a seed printed with each
//! failure, so a failing point can be replayed.

use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::support::*;

/// Everything a run could leave behind on the host.
#[derive(Debug, PartialEq)]
struct Host {
    containers: BTreeSet<String>,
    networks: BTreeSet<String>,
    firewall: BTreeSet<String>,
    processes: BTreeSet<String>,
}

fn host(marker: &str) -> Host {
    let (containers, networks) = docker_snapshot();
    // Counters change under traffic; the rules themselves must not.
    let firewall = Command::new("iptables-save")
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter(|l| !l.starts_with(['#', ':']))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    Host { containers, networks, firewall, processes: processes_matching(marker).into_iter().collect() }
}

/// A small xorshift, seeded per test run: the interrupt points.
struct Points(u64);

impl Points {
    fn new() -> Points {
        let seed = std::env::var("FAULTLINE_INTERRUPT_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64 | 1);
        eprintln!("interrupt points: FAULTLINE_INTERRUPT_SEED={seed}");
        Points(seed)
    }

    fn next_ms(&mut self, from: u64, to: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        from + self.0 % (to - from)
    }
}

/// Starts `faultline run SPEC ARGS`, sends `signal` after `after`, and
/// waits for it to end; returns how long the stop took.
fn interrupt(spec: &std::path::Path, args: &[&str], after: Duration, signal: i32) -> Duration {
    let out = tempfile::tempdir().unwrap();
    let mut child = faultline()
        .arg("run")
        .arg(spec)
        .args(args)
        .arg("--out")
        .arg(out.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(after);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, signal) };
    let stopped = Instant::now();
    let status = child.wait().unwrap();
    if signal != libc::SIGKILL {
        // Finished before the signal came (exit 0/1/2 by verdict) or interrupted (2).
        assert!(status.code().is_some(), "ended by a signal: {status:?}");
    }
    stopped.elapsed()
}

fn check_all_gone(before: &Host, marker: &str, what: &str) {
    // Removal is confirmed before faultline exits; allow the engine a moment to settle.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let after = host(marker);
        if &after == before {
            return;
        }
        assert!(Instant::now() < deadline, "{what} left something behind:\nbefore {before:#?}\nafter {after:#?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Runs `spec` (with `args`) once per signal, each sent at a random point
/// within `window_ms`, and checks the host is as it was (by `marker`): a
/// SIGINT or SIGTERM stops within `stop_within`, a SIGKILL is cleaned up by
/// `faultline teardown`.
fn interrupt_anywhere(
    spec: &std::path::Path,
    args: &[&str],
    marker: &str,
    signals: &[i32],
    window_ms: (u64, u64),
    stop_within: Duration,
) {
    let before = host(marker);
    let mut points = Points::new();
    for &signal in signals {
        let at = Duration::from_millis(points.next_ms(window_ms.0, window_ms.1));
        let took = interrupt(spec, args, at, signal);
        let what = format!("signal {signal} after {at:?}");
        if signal == libc::SIGKILL {
            let out = faultline().arg("teardown").output().unwrap();
            assert!(out.status.success(), "teardown: {}", String::from_utf8_lossy(&out.stderr));
        } else {
            assert!(took < stop_within, "{what}: took {took:?} to stop");
        }
        check_all_gone(&before, marker, &what);
    }
}

#[test]
#[ignore = "alone: needs the machine to itself; scripts/test.sh runs it after the rest"]
fn a_process_campaign_interrupted_anywhere_leaves_nothing() {
    let _load = exclusive();
    let marker = format!("fl-interrupt-{}", std::process::id());
    // The server is wrapped in a shell, as users do; a pause fault is in
    // force during part of the window.
    let (_d, spec) = spec_file(&format!(
        "name: interrupts\ntargets:\n  cache:\n    kind: redis\n    provider: process\n    command: sh\n    \
         args: [-c, 'redis-server --port {{port}} --bind 127.0.0.1 --save \"\" --dbfilename {marker}.rdb']\n\
         workloads:\n  w: {{ops: {{get: 1, set: 1}}}}\nprofiles:\n  p: {{closed: 2x8}}\n\
         timing: {{warmup: 200ms, duration: 3s, deadline: 300ms}}\nscenarios:\n\
         \x20 - {{name: s, target: cache, workload: w, profiles: [p],\n\
         \x20    faults: [{{name: frozen, at: 1s, action: pause, target: cache, heal_after: 1s}}]}}\n\
         gates:\n  g: errors >= 0\n"
    ));
    let signals = [libc::SIGINT, libc::SIGTERM, libc::SIGINT, libc::SIGTERM, libc::SIGKILL];
    interrupt_anywhere(&spec, &[], &marker, &signals, (20, 3000), Duration::from_secs(10));
}

/// Three etcd members as processes, both followers paused during part of
/// the window: every member's process group goes with the run, whatever
/// the signal (SIGKILL: each group's guardian, then `teardown`).
#[test]
#[ignore = "alone: needs the machine to itself; scripts/test.sh runs it after the rest"]
fn a_process_cluster_interrupted_anywhere_leaves_nothing() {
    let _load = exclusive();
    // The target's name is in every member's command line (`--name MARKER-i`).
    let marker = format!("fl-interrupt-etcd-{}", std::process::id());
    let (_d, spec) = spec_file(&format!(
        "name: interrupts\ntargets:\n  {marker}: {{kind: etcd, provider: process, ready_timeout: 30s}}\n\
         workloads:\n  w: {{ops: {{get: 1, set: 1}}}}\nprofiles:\n  p: {{closed: 2x4}}\n\
         timing: {{warmup: 200ms, duration: 3s, deadline: 500ms}}\nscenarios:\n\
         \x20 - {{name: s, target: {marker}, workload: w, profiles: [p],\n\
         \x20    faults: [{{name: frozen, at: 1s, action: pause, target: {marker}.followers, heal_after: 1s}}]}}\n\
         gates:\n  g: errors >= 0\n"
    ));
    let signals = [libc::SIGINT, libc::SIGTERM, libc::SIGKILL];
    interrupt_anywhere(&spec, &[], &marker, &signals, (20, 5000), Duration::from_secs(15));
}

#[test]
#[ignore = "alone: needs the machine to itself; scripts/test.sh runs it after the rest"]
fn a_docker_campaign_interrupted_anywhere_leaves_nothing() {
    let _load = exclusive();
    let marker = "no-such-process-marker";
    let spec = repo().join("specs/kv-failover.yaml");
    // Start-up takes a few seconds; faults begin 5 s into the window.
    let signals = [libc::SIGINT, libc::SIGTERM, libc::SIGKILL];
    interrupt_anywhere(&spec, &["--quick"], marker, &signals, (500, 16_000), Duration::from_secs(30));
}

/// SIGINT or SIGTERM however early: the handlers are in place before the run
/// directory is made, so a signal either ends faultline before it has made
/// anything, or finds a run directory that gets its results.json.
#[test]
#[ignore = "alone: needs the machine to itself; scripts/test.sh runs it after the rest"]
fn a_signal_in_the_first_milliseconds_leaves_a_complete_run_directory_or_none() {
    let _load = exclusive();
    let (_d, spec) = spec_file(
        "name: early\ntargets:\n  cache: {kind: redis, provider: process}\nworkloads:\n  w: {ops: {get: 1}}\n\
         profiles:\n  p: {closed: 1x1}\ntiming: {warmup: 0s, duration: 2s}\n\
         scenarios:\n  - {name: s, target: cache, workload: w, profiles: [p]}\ngates:\n  g: errors == 0\n",
    );
    let mut made = 0;
    for signal in [libc::SIGINT, libc::SIGTERM] {
        for ms in [0u64, 1, 2, 4, 6, 8, 10, 13, 16, 20, 25, 30, 40, 60, 80, 120] {
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
            std::thread::sleep(Duration::from_millis(ms));
            // SAFETY: signalling our own child.
            unsafe { libc::kill(child.id() as i32, signal) };
            let status = child.wait().unwrap();
            if let Some(dir) = run_dir(out.path()) {
                made += 1;
                assert!(
                    dir.join("results.json").is_file(),
                    "signal {signal} after {ms} ms ({status:?}): {} has no results.json",
                    dir.display()
                );
                assert!(status.code().is_some(), "signal {signal} after {ms} ms: ended by the signal, {status:?}");
            }
        }
    }
    eprintln!("{made} of 32 early signals found a run directory");
}
