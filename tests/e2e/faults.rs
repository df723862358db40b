//! Scheduled faults against real servers: each applied, confirmed, healed,
//! recorded with its times, and its cost measured.

use crate::support::*;

/// The freeze's times are faultline's own record: applied when due or
/// later, healed its 2 s after that or later (a busy machine only makes
/// each later), and the cost is measured from them. The open loop at
/// 20,000/s may find the machine too slow to send its schedule around the
/// thaw (INCOMPLETE, saying so), and the spec's bounds on latency, the
/// denied window and the recovery judge this machine's speed (a FAIL there
/// is faultline measuring right): what faultline recorded is checked
/// either way, and the gates' passes on a pass.
#[test]
fn a_frozen_process_is_confirmed_healed_and_its_denied_window_measured() {
    let _load = shared();
    let run = run(&repo().join("specs/process-faults.yaml"), &[]);
    let passed = measured_as_asked(&run, &["denial-bounded", "calm-before", "calm-after", "back-quickly"]);
    let r = run.results();
    for cell in r["cells"].as_array().unwrap() {
        let fault = &cell["faults"][0];
        assert_eq!(fault["action"], "pause");
        assert!(fault["evidence"].as_str().unwrap().contains("state T"), "{fault}");
        assert!(fault["heal_evidence"].as_str().unwrap().contains("running"), "{fault}");
        let requested = fault["requested_s"].as_f64().unwrap();
        let healed = fault["healed_s"].as_f64().unwrap();
        assert!(requested >= 1.99 && healed - fault["confirmed_s"].as_f64().unwrap() >= 1.99, "{fault}");
        let impact = &cell["stats"]["fault_impact"][0];
        let denied = impact["denied_window_s"].as_f64().unwrap();
        // Ops waiting out their 300 ms deadline fail while the server is
        // frozen, and none succeeds after the last of them until it was
        // thawed: no sooner than 2 s after faultline confirmed the freeze
        // (times in seconds after the request, faultline's clock; the
        // impact's to 10 µs). How long before the thaw the last failure
        // came depends on how soon a busy machine issued the next op.
        assert!(impact["failed"].as_u64().unwrap() >= 16, "{impact}");
        let first_success = impact["first_success_s"].as_f64().unwrap();
        let confirmed = fault["confirmed_s"].as_f64().unwrap();
        assert!(denied > 0.0 && first_success >= denied, "{impact}");
        assert!(requested + first_success >= confirmed + 2.0 - 1e-3, "{impact}, {fault}");
    }
    assert!(run.report().contains("| cache | 1 | frozen (pause) |"), "{}", run.report());
    // Latency before, during and after the freeze (in the closed loop), and
    // gates on it.
    let cell = &r["cells"][0];
    let healed = cell["faults"][0]["healed_s"].as_f64().unwrap();
    let windows = cell["stats"]["window_latency"].as_array().unwrap();
    let sides: Vec<&str> = windows.iter().map(|w| w["window"].as_str().unwrap()).collect();
    assert_eq!(sides, ["before", "during", "after"]);
    assert!((windows[2]["from_s"].as_f64().unwrap() - healed).abs() < 1e-9, "{}", windows[2]);
    for gate in ["calm-before", "calm-after", "denial-bounded"] {
        let g = r["gates"].as_array().unwrap().iter().find(|g| g["name"] == gate).unwrap();
        assert!(g["result"] == "pass" || !passed, "{g}");
    }
    // At a fixed rate, the offered load is served again as soon as the
    // server thaws: recovery (to 90% of the rate before) comes no sooner
    // than the thaw, and its gate says when.
    let paced = &r["cells"][1];
    assert_eq!(paced["scenario"], "freeze-paced");
    let fault = &paced["faults"][0];
    let thawed = fault["healed_s"].as_f64().unwrap() - fault["requested_s"].as_f64().unwrap();
    let impact = &paced["stats"]["fault_impact"][0];
    assert!(impact["throughput_before"].as_f64().unwrap() > 0.0, "{impact}");
    let open = &paced["stats"]["open_loop"];
    assert_eq!(open["due"], open["sent"].as_u64().unwrap() + open["unsent"].as_u64().unwrap(), "{open}");
    if passed {
        let recovered = impact["recovered_s"].as_f64().unwrap();
        assert!(recovered >= thawed - 0.2, "recovered before the thaw: {impact}, thawed after {thawed} s");
        let g = r["gates"].as_array().unwrap().iter().find(|g| g["name"] == "back-quickly").unwrap();
        assert_eq!(g["result"], "pass", "{g}");
    }
}

/// A fault that could not be applied (process targets take KILL, TERM and
/// INT only) has no cost to measure: gates on it are unmeasured, never a
/// pass with "no denial".
#[test]
fn gates_on_a_fault_that_never_took_effect_are_incomplete() {
    let _load = shared();
    let (_d, spec) = spec_file(
        "name: unapplied\ntargets:\n  cache: {kind: redis, provider: process}\nworkloads:\n  w: {ops: {get: 1}}\n\
         profiles:\n  p: {closed: 1x4}\ntiming: {warmup: 0s, duration: 2s, deadline: 300ms}\nscenarios:\n\
         \x20 - {name: s, target: cache, workload: w, profiles: [p],\n\
         \x20    faults: [{name: hup, at: 500ms, action: kill, signal: SIGHUP, target: cache}]}\n\
         gates:\n  denial: denied_window(hup) <= 1s\n  calm: \"p99(after: hup) < 50ms\"\n",
    );
    let run = run(&spec, &[]);
    assert_eq!(run.code(), 2, "{}\n{}", run.stdout(), run.stderr());
    let r = run.results();
    let fault = &r["cells"][0]["faults"][0];
    assert!(fault["error"].as_str().unwrap().contains("HUP"), "{fault}");
    assert!(fault["confirmed_s"].is_null(), "{fault}");
    for g in r["gates"].as_array().unwrap() {
        assert_eq!(g["result"], "incomplete", "{g}");
        assert!(g["evidence"].as_str().unwrap().contains("no fault named `hup` was applied"), "{g}");
    }
    let impact = &r["cells"][0]["stats"]["fault_impact"];
    assert!(impact.as_array().is_none_or(|a| a.is_empty()), "no cost measured for it: {impact}");
}

const DOCKER_FAULTS: &str = r#"name: docker-faults
targets:
  kv:
    kind: redis
    provider: docker
    image: faultline/redis:bookworm
    members: 3
    memory: 256MiB
    tmpfs: ["/data:size=32m"]
    ready_timeout: 30s
workloads:
  w: {ops: {get: 50, set: 50}, keys: {count: 500}}
profiles:
  p: {closed: 2x8}
timing: {warmup: 300ms, duration: 6s, deadline: 500ms}
scenarios:
  - name: s
    target: kv
    workload: w
    profiles: [p]
    faults:
      - {name: replicas-paused, at: 500ms, action: pause, target: kv.replicas, heal_after: 1s}
      - {name: replica-killed, at: 1500ms, action: kill, target: "kv.member[2]", heal_after: 1s}
      - {name: replica-cut-off, at: 2500ms, action: isolate, target: "kv.member[1]", heal_after: 1s}
      - {name: primary-frozen, at: 3500ms, action: pause, target: kv.primary, heal_after: 1s}
      - {name: ask-primary, at: 5s, action: exec, target: kv.primary, command: [redis-cli, INFO, replication]}
gates:
  primary-freeze-denied: denied_window(primary-frozen) <= 2s
  replicas-harmless: failed_after(replicas-paused) == 0
"#;

#[test]
fn every_container_fault_is_confirmed_and_healed_and_nothing_is_left() {
    let _load = shared();
    let (_d, spec) = spec_file(DOCKER_FAULTS);
    let run = run(&spec, &[]);
    // How long the frozen primary denied writes judges this machine's
    // speed. So does `replicas-harmless` with its 500 ms deadline: pausing
    // the replicas does not touch the primary's clients, but on a busy
    // machine an op may miss its deadline then; such a failure is an op
    // that waited out its deadline, and the window's longest op says so.
    measured_as_asked(&run, &["primary-freeze-denied", "replicas-harmless"]);
    let r = run.results();
    let harmless = r["gates"].as_array().unwrap().iter().find(|g| g["name"] == "replicas-harmless").unwrap();
    let impact = r["cells"][0]["stats"]["fault_impact"].as_array().unwrap();
    assert_eq!(impact[0]["fault"], "replicas-paused", "{}", impact[0]);
    assert_eq!(harmless["result"] == "fail", impact[0]["failed"].as_u64().unwrap() > 0, "{harmless} {}", impact[0]);
    if harmless["result"] == "fail" {
        assert!(
            impact[0]["max_latency_ms"].as_f64().unwrap() >= 499.0,
            "failed faster than the deadline: {}",
            impact[0]
        );
    }
    let faults = r["cells"][0]["faults"].as_array().unwrap();
    assert_eq!(faults.len(), 5);
    for f in faults {
        assert!(f.get("error").is_none(), "{f}");
        assert!(f["confirmed_s"].as_f64().is_some() && !f["evidence"].as_str().unwrap().is_empty(), "{f}");
        if f["action"] != "exec" {
            assert!(f["healed_s"].as_f64().is_some(), "{f}");
        }
    }
    assert_eq!(faults[0]["hit"].as_array().unwrap().len(), 2, "both replicas paused");
    assert!(faults[0]["evidence"].as_str().unwrap().contains("paused"), "{}", faults[0]);
    assert_eq!(faults[3]["hit"][0], "kv-0", "the primary is member 0");
    assert!(faults[4]["output"].as_str().unwrap().contains("role:master"), "{}", faults[4]);
    // Freezing the primary for 1 s denied writes (their deadline is 500 ms).
    assert!(impact[3]["failed"].as_u64().unwrap() > 0, "{}", impact[3]);
    // The role timeline: everyone's role at the start (each member's first
    // sample), and the primary unreachable while frozen, then primary
    // again. A sample is placed when it was asked, and an ask reads
    // unreachable when no answer comes within two 250 ms periods: the
    // freeze shows as an unreachable sample asked at most 0.5 s before the
    // freeze was requested, and before it was healed (on faultline's clock,
    // however late a busy machine made either). An ask a busy machine left
    // unanswered at another moment may read unreachable too: that is the
    // sampler saying what it saw, so the freeze's sample is looked for in
    // its window, not taken to be the first.
    let roles = r["cells"][0]["roles"].as_array().unwrap();
    let at = |c: &serde_json::Value| c["at_s"].as_f64().unwrap();
    let start: Vec<(&str, &str)> = ["kv-0", "kv-1", "kv-2"]
        .iter()
        .map(|m| {
            let first = roles.iter().filter(|c| c["member"] == *m).min_by(|a, b| at(a).total_cmp(&at(b)));
            (*m, first.unwrap_or_else(|| panic!("no sample of {m}: {roles:?}"))["role"].as_str().unwrap())
        })
        .collect();
    assert_eq!(start, [("kv-0", "primary"), ("kv-1", "replica"), ("kv-2", "replica")], "{roles:?}");
    let kv0: Vec<(f64, &str)> =
        roles.iter().filter(|c| c["member"] == "kv-0").map(|c| (at(c), c["role"].as_str().unwrap())).collect();
    let freeze = &faults[3];
    let (requested, healed) = (freeze["requested_s"].as_f64().unwrap(), freeze["healed_s"].as_f64().unwrap());
    let frozen = kv0
        .iter()
        .find(|(t, role)| *role == "unreachable" && (requested - 0.5..=healed).contains(t))
        .unwrap_or_else(|| panic!("no unreachable sample of kv-0 while frozen: {kv0:?}, {freeze}"));
    assert!(kv0.iter().any(|(t, role)| *t > frozen.0 && *role == "primary"), "{kv0:?}");
    assert!(run.report().contains("Roles per second"), "{}", run.report());
    assert_eq!(left_behind(run.dir.as_ref().unwrap()), Vec::<String>::new());
}

/// A fault due while an earlier one holds its member: the frozen primary is
/// thawed when its `heal_after` says, not once the later fault's apply ends,
/// and the later fault, asking who is primary, gets its answer then.
#[test]
fn a_fault_on_a_member_another_fault_froze_waits_for_its_heal_on_time() {
    let _load = shared();
    let spec = r#"name: overlapping-faults
targets:
  kv: {kind: redis, provider: docker, image: "faultline/redis:bookworm", members: 1, ready_timeout: 30s}
workloads:
  w: {ops: {get: 50, set: 50}, keys: {count: 100}}
profiles:
  p: {closed: 1x1}
timing: {warmup: 300ms, duration: 4s, deadline: 500ms}
scenarios:
  - name: s
    target: kv
    workload: w
    profiles: [p]
    faults:
      - {name: frozen, at: 500ms, action: pause, target: kv.primary, heal_after: 2s}
      - {name: ask, at: 1s, action: exec, target: kv.primary, command: [redis-cli, PING]}
gates:
  served: ops > 0
"#;
    let (_d, spec) = spec_file(spec);
    let run = run(&spec, &[]);
    let r = run.results();
    let faults = r["cells"][0]["faults"].as_array().unwrap_or_else(|| panic!("{}", run.stderr()));
    let names: Vec<&str> = faults.iter().map(|f| f["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["frozen", "ask"], "{}", run.stderr());
    let (frozen, ask) = (&faults[0], &faults[1]);
    assert!(frozen.get("error").is_none() && ask.get("error").is_none(), "{frozen} {ask}");
    let healed = frozen["healed_s"].as_f64().unwrap();
    assert!(healed - frozen["confirmed_s"].as_f64().unwrap() >= 1.99, "{frozen}");
    // Answered only once thawed: the thaw did not wait for the ask.
    assert!(ask["confirmed_s"].as_f64().unwrap() >= healed, "{frozen} {ask}");
    assert!(ask["output"].as_str().unwrap().contains("PONG"), "{ask}");
    assert_eq!(left_behind(run.dir.as_ref().unwrap()), Vec::<String>::new());
}

#[test]
fn the_kv_failover_campaign_runs_every_fault_and_counts_what_was_lost() {
    let _load = heavy();
    let run = run(&repo().join("specs/kv-failover.yaml"), &["--quick"]);
    // --quick is never PASS; lost or stale data FAILs it, honestly.
    assert!(matches!(run.code(), 1 | 2), "{}\n{}", run.stdout(), run.stderr());
    let r = run.results();
    let cells = r["cells"].as_array().unwrap();
    let scenarios: Vec<&str> = cells.iter().map(|c| c["scenario"].as_str().unwrap()).collect();
    assert_eq!(
        scenarios,
        ["coordinated-failover", "graceful-failover", "primary-killed", "primary-isolated", "replicas-paused"]
    );
    for cell in cells {
        let label = cell["scenario"].as_str().unwrap();
        assert_eq!(cell["status"], "completed", "{label}: {cell}");
        let fault = &cell["faults"][0];
        assert!(fault.get("error").is_none(), "{label}: {fault}");
        assert!(fault["confirmed_s"].as_f64().is_some(), "{label}: {fault}");
        if matches!(fault["action"].as_str(), Some("isolate" | "pause")) {
            assert!(fault["healed_s"].as_f64().is_some(), "{label}: healed by the ledger at the latest: {fault}");
        }
        // Every checker decided (a count of lost writes, maybe 0), none unknown.
        let checks = cell["checks"].as_array().unwrap();
        assert_eq!(checks.len(), 3, "{label}");
        for check in checks {
            assert_ne!(check["status"], "unknown", "{label}: {check}");
            assert!(check["checked"].as_u64().unwrap() > 0, "{label}: {check}");
        }
        assert!(!cell["roles"].as_array().unwrap().is_empty(), "{label}: the role timeline was sampled");
    }
    // The graceful failover shows in the role timeline: another member
    // becomes primary.
    let graceful = cells[1]["roles"].as_array().unwrap();
    assert!(graceful.iter().any(|c| c["member"] != "kv-0" && c["role"] == "primary"), "no new primary in {graceful:?}");
    // The report counts lost writes per scenario, and the gate on them
    // fails exactly when some were lost.
    let lost: u64 = cells
        .iter()
        .flat_map(|c| c["checks"].as_array().unwrap())
        .filter(|k| k["checker"] == "lost-acknowledged-write")
        .map(|k| k["violations"].as_u64().unwrap())
        .sum();
    // The coordinated failover loses nothing, and its gate says so.
    let coordinated = cells[0]["checks"].as_array().unwrap().iter().find(|k| k["checker"] == "lost-acknowledged-write");
    assert_eq!(coordinated.unwrap()["violations"], 0, "{}", cells[0]);
    let gate = r["gates"].as_array().unwrap().iter().find(|g| g["name"] == "coordinated-loses-nothing").unwrap();
    assert_eq!(gate["result"], "pass", "{gate}");
    let gate = r["gates"].as_array().unwrap().iter().find(|g| g["name"] == "no-lost-writes").unwrap().clone();
    assert_eq!(gate["result"], if lost > 0 { "fail" } else { "pass" }, "{gate}");
    let report = run.report();
    assert!(report.contains("lost-acknowledged-write"), "{report}");
    assert!(report.contains("Roles per second"), "{report}");
    assert_eq!(left_behind(run.dir.as_ref().unwrap()), Vec::<String>::new());
}

/// `--quick` shortens process-faults' 8 s window to 2 s, which would end
/// at its freeze (2 s in): the freeze moves with the window, to 0.5 s,
/// thawed 0.5 s later, so it is applied and its gates measure it.
#[test]
fn quick_applies_a_fault_at_its_place_in_the_shortened_window() {
    let _load = shared();
    let run = run(&repo().join("specs/process-faults.yaml"), &["--quick"]);
    assert!(matches!(run.code(), 1 | 2), "{}\n{}", run.stdout(), run.stderr());
    let r = run.results();
    for cell in r["cells"].as_array().unwrap() {
        let fault = &cell["faults"][0];
        assert_eq!(fault["name"], "frozen", "{cell}");
        assert!(fault.get("error").is_none(), "{fault}");
        let requested = fault["requested_s"].as_f64().unwrap();
        let healed = fault["healed_s"].as_f64().unwrap();
        // Scheduled at 0.5 s and healed 0.5 s after it took effect; a busy
        // machine only makes each later, never earlier.
        assert!((0.45..2.0).contains(&requested), "{fault}");
        assert!(fault["confirmed_s"].as_f64().is_some() && healed - requested >= 0.45, "{fault}");
        assert!(!cell["stats"]["fault_impact"].as_array().unwrap().is_empty(), "{cell}");
    }
    // The gate bounds the denied window, which judges this machine's speed
    // (a busy one heals the freeze later): it is decided, and as the
    // windows faultline recorded say.
    let bounded = r["cells"].as_array().unwrap().iter().all(|cell| {
        let impact = &cell["stats"]["fault_impact"][0];
        impact["not_recovered"] != true && impact["denied_window_s"].as_f64().unwrap_or(0.0) <= 2.5
    });
    let gate = r["gates"].as_array().unwrap().iter().find(|g| g["name"] == "denial-bounded").unwrap();
    assert_eq!(gate["result"], if bounded { "pass" } else { "fail" }, "{gate}");
}
