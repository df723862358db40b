//! MongoDB campaigns against a real MongoDB-wire-protocol server: secantusd-rs
//! (crates.io `secantus-mdb`, one node advertising a one-member replica set;
//! scripts/install-deps.sh installs it), started by faultline as a process
//! target and driven through the official driver by the request/response
//! executor. No real mongod exists on this machine: elections among members
//! are not tested here.

use crate::support::*;

/// A one-target MongoDB spec; `extra` goes under the target's options,
/// `rest` after the workloads (profiles, timing, scenarios, gates).
fn mongo_spec(options: &str, workload: &str, rest: &str) -> String {
    format!(
        r#"name: mongo
seed: 5
targets:
  db:
    kind: mongodb
    provider: process
    ready_timeout: 30s
    options: {{database: fl_test, {options}}}
workloads:
  w: {workload}
{rest}"#
    )
}

#[test]
#[ignore = "alone: needs the machine to itself; scripts/test.sh runs it after the rest"]
fn the_local_campaign_runs_every_scenario_and_its_checks_hold() {
    let _load = exclusive();
    let run = run(&repo().join("specs/mongodb-local.yaml"), &["--quick"]);
    // --quick is never a PASS; everything else must have run and held. The
    // bounds on the denied windows judge this machine's speed: a FAIL of
    // those (exit 1) is faultline measuring right (checked below: no other
    // gate fails).
    assert!([1, 2].contains(&run.code()), "{}\n{}", run.stdout(), run.stderr());
    let r = run.results();
    assert_eq!(r["targets"][0]["kind"], "mongodb");
    // The server as it names itself, never the product it is compatible with.
    let server = r["targets"][0]["server"].as_str().unwrap();
    assert!(server.starts_with("secantus ") && server.contains("(buildInfo version "), "{server}");
    let cells = r["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 8, "linearizable and majority at 3 profiles, step-down, pause");
    for c in cells {
        let label = format!("{}/{}", c["scenario"], c["profile"]);
        assert_eq!(c["status"], "completed", "{label}: {}", c["error"]);
        assert!(c["stats"]["ok"].as_u64().unwrap() > 0, "{label}: {}", c["stats"]["ok"]);
        assert_eq!(c["stats"]["errors"]["hang"], 0, "{label}");
        for check in c["checks"].as_array().unwrap() {
            assert_eq!(check["status"], "ok", "{label}: {check}");
        }
    }
    let stepped = cells.iter().find(|c| c["scenario"] == "step-down").unwrap();
    let fault = &stepped["faults"][0];
    assert!(fault["confirmed_s"].is_number(), "{fault}");
    assert!(fault["evidence"].as_str().unwrap().contains("no longer primary"), "{fault}");
    // Writes refused while the node is not primary, counted under the
    // server's own code name with its message.
    let labels = stepped["stats"]["error_labels"].as_array().unwrap();
    assert!(
        labels.iter().any(|l| l["label"].as_str().unwrap().starts_with("server ") && l["count"].as_u64().unwrap() > 0),
        "{labels:?}"
    );
    let gates = r["gates"].as_array().unwrap();
    let majority = gates.iter().find(|g| g["name"] == "majority-no-errors").unwrap();
    assert_eq!(majority["informational"], true);
    // The bounds on the denied windows judge this machine's speed: a FAIL
    // there is faultline measuring right; no other gate may fail.
    let speed = ["step-down-bounded", "pause-bounded"];
    for g in gates.iter().filter(|g| g["informational"] != true) {
        assert!(g["result"] != "fail" || speed.contains(&g["name"].as_str().unwrap()), "{g}");
    }
    let failed = gates.iter().any(|g| g["informational"] != true && g["result"] == "fail");
    assert_eq!(run.code() == 1, failed, "exit 1 exactly when a speed gate failed: {}", run.stdout());
    let report = run.report();
    assert!(report.contains("(information only)"), "{report}");
}

/// The request/response executor's watchdog on a real server frozen with
/// SIGSTOP: a client that does not cancel at the deadline has its ops counted
/// as hangs 500 ms past it; one that cancels fails them at the deadline.
#[test]
fn a_frozen_server_gives_hangs_or_deadline_errors_as_the_client_cancels() {
    let _load = shared();
    for cancel in [false, true] {
        let spec = mongo_spec(
            "read_concern: majority",
            "{ops: {get: 1}, keys: {count: 100}}",
            r#"profiles:
  p: {closed: 2x4}
timing: {warmup: 500ms, duration: 5s, deadline: 300ms, hang_after: 500ms}
scenarios:
  - name: s
    target: db
    workload: w
    profiles: [p]
    faults: [{name: frozen, at: 1s, action: pause, target: db, heal_after: 2s}]
gates:
  no-hangs: hangs == 0
"#,
        )
        .replace("ready_timeout: 30s", &format!("ready_timeout: 30s\n    cancel_at_deadline: {cancel}"));
        let (_d, path) = spec_file(&spec);
        let run = run(&path, &[]);
        let r = run.results();
        let stats = &r["cells"][0]["stats"];
        assert_eq!(r["cells"][0]["status"], "completed", "{}", run.stderr());
        let (hangs, deadline) =
            (stats["errors"]["hang"].as_u64().unwrap(), stats["errors"]["deadline"].as_u64().unwrap());
        if cancel {
            // 8 in flight at the freeze and more issued during it, each given up at 300 ms.
            assert!(deadline >= 8 && hangs == 0, "cancel: {}", stats["errors"]);
            assert_eq!(run.code(), 0, "{}", run.stderr());
        } else {
            assert!(hangs >= 8, "no cancel: {}", stats["errors"]);
            assert_eq!(run.code(), 1, "the hang gate fails");
        }
        // The lanes went on after the thaw: ops ended in the timeline's
        // buckets from the one the thaw fell in (faultline's clock), so no
        // slot stayed taken. A client that does not cancel leaves its ops
        // running, and they and the next ones are answered once the server
        // is back. One that cancels drops ops inside the driver, whose pool
        // once served no fresh op in the 2 s left after the thaw
        // (docs/testing.md): how soon it serves again is the driver's, and
        // what faultline must get right is saying which it was.
        let healed = r["cells"][0]["faults"][0]["healed_s"].as_f64().unwrap();
        let step = stats["timeline_step_s"].as_f64().unwrap();
        let after = |field: &str| -> u64 {
            stats["timeline"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|p| p["t"].as_f64().unwrap() + step > healed)
                .map(|p| p[field].as_u64().unwrap())
                .sum()
        };
        assert!(after("ok") + after("failed") > 0, "ops ended after the thaw at {healed} s: {stats}");
        assert!(cancel || after("ok") > 0, "answers after the thaw at {healed} s: {stats}");
        if after("ok") == 0 {
            let impact = &stats["fault_impact"][0];
            assert_eq!(impact["not_recovered"], true, "nothing answered after the thaw: {impact}");
        }
    }
}

/// An open loop on the request/response executor keeps its schedule when
/// the server can serve it, and reports what it could not send when not.
/// Asked to send all of it (`min_sent: 1`), a rate the server serves is a
/// pass, or, if the machine was too slow for it that moment, INCOMPLETE
/// saying so; a flood is always the latter.
#[test]
fn an_open_loop_on_mongodb_counts_every_op_due() {
    let _load = shared();
    let spec = |rate: &str| {
        mongo_spec(
            "read_concern: local",
            "{ops: {get: 1}, keys: {count: 100}}",
            &format!(
                r#"profiles:
  paced: {{open: {{rate: {rate}, connections: 2, in_flight: 4, min_sent: 1}}}}
timing: {{warmup: 500ms, duration: 3s}}
scenarios:
  - {{name: s, target: db, workload: w, profiles: [paced]}}
gates:
  no-errors: errors == 0
"#
            ),
        )
    };
    let (_d, kept) = spec_file(&spec("200"));
    let run_kept = run(&kept, &[]);
    let passed = measured_as_asked(&run_kept, &[]);
    let open = &run_kept.results()["cells"][0]["stats"]["open_loop"];
    assert_eq!(open["due"], 600, "{open}");
    assert_eq!(passed, open["unsent"] == 0, "{open}");
    let (_d, flooded) = spec_file(&spec("1000000"));
    let run_flooded = run(&flooded, &[]);
    let r = run_flooded.results();
    let open = &r["cells"][0]["stats"]["open_loop"];
    assert_eq!(open["due"], 3_000_000, "{open}");
    assert_eq!(open["sent"].as_u64().unwrap() + open["unsent"].as_u64().unwrap(), 3_000_000, "{open}");
    assert_eq!(r["gates"][0]["result"], "incomplete", "{}", r["gates"][0]);
    assert_eq!(run_flooded.code(), 2);
}

/// Every op kind the MongoDB target runs, and the final read the checkers use.
#[test]
fn every_op_kind_runs_and_a_duplicate_insert_is_a_named_server_error() {
    let _load = shared();
    let spec = mongo_spec(
        "read_concern: majority, write_concern: {w: majority, j: true}",
        "{ops: {get: 40, set: 30, incr: 10, del: 10, insert: 10}, keys: {count: 20}}",
        r#"profiles:
  p: {closed: 2x4}
timing: {warmup: 0s, duration: 2s}
scenarios:
  - {name: s, target: db, workload: w, profiles: [p]}
gates:
  ok: errors == 0
"#,
    );
    let (_d, path) = spec_file(&spec);
    let run = run(&path, &[]);
    let r = run.results();
    let stats = &r["cells"][0]["stats"];
    for kind in ["get", "set", "incr", "del", "insert"] {
        assert!(stats["per_op"][kind]["ok"].as_u64().unwrap() > 0, "{kind}: {}", stats["per_op"][kind]);
    }
    // Inserting a key that exists fails, as it should, under the server's name for it.
    let labels = stats["error_labels"].as_array().unwrap();
    let duplicate = labels.iter().find(|l| l["label"] == "server DuplicateKey").unwrap_or_else(|| panic!("{labels:?}"));
    assert!(duplicate["examples"][0].as_str().unwrap().contains("duplicate key"), "{duplicate}");
    assert_eq!(run.code(), 1, "the errors gate fails on the duplicate inserts");
}

/// A step-down on secantusd-rs refuses writes while reads go on: the
/// failures, the denied window and the first success are each op kind's
/// own, and the linearizable reads the node answers while it reports
/// SECONDARY (which MongoDB serves on the primary only) are counted, each
/// by the member that answered it (the driver's address of the connection,
/// mapped to the member the role sampler asked there), with examples naming
/// it; majority reads are not judged. The node is the one member of a
/// one-member replica set: the member answering is never in doubt here, so
/// this proves the attribution reaches the judgement on a real server, not
/// that it tells members apart (no real multi-member set runs on this
/// machine; the rule that does is unit-tested in faultline-model's roles).
#[test]
#[ignore = "alone: needs the machine to itself; scripts/test.sh runs it after the rest"]
fn a_step_down_is_measured_per_op_kind_and_linearizable_reads_from_a_secondary_are_reported() {
    let _load = exclusive();
    let spec = mongo_spec(
        "read_concern: linearizable, write_concern: {w: majority}, max_time: 5s, seed_documents: 200",
        "{ops: {get: 90, set: 10}, keys: {count: 200}}",
        r#"profiles:
  p: {closed: 2x4}
timing: {warmup: 1s, duration: 8s, deadline: 5s}
scenarios:
  - name: linearizable
    target: db
    workload: w
    profiles: [p]
    faults: [{name: stepped-down, at: 2s, action: stepdown, target: db, seconds: 3s, force: true}]
  - name: majority
    target: db
    workload: w
    profiles: [p]
    options: {read_concern: majority}
    faults: [{name: stepped-down, at: 2s, action: stepdown, target: db, seconds: 3s, force: true}]
gates:
  writes-back: denied_window(stepped-down, set) <= 6s
  reads-from-primary: {expr: non_primary_reads == 0, scenario: linearizable}
  majority-reads-judged: {expr: non_primary_reads == 0, scenario: majority}
"#,
    );
    let (_d, path) = spec_file(&spec);
    let run = run(&path, &[]);
    let r = run.results();
    let cell =
        |scenario: &str| r["cells"].as_array().unwrap().iter().find(|c| c["scenario"] == scenario).unwrap().clone();
    let lin = cell("linearizable");
    assert_eq!(lin["status"], "completed", "{}", lin["error"]);
    let impact = &lin["stats"]["fault_impact"][0];
    let (set, get) = (&impact["per_op"]["set"], &impact["per_op"]["get"]);
    // Every failure is counted under the kind that failed, and writes failed.
    let failed = |v: &serde_json::Value| v["failed"].as_u64().unwrap();
    assert_eq!(failed(set) + failed(get), failed(impact), "{impact}");
    assert!(failed(set) > 0, "writes are refused while stepped down: {impact}");
    assert!(set["denied_window_s"].as_f64().unwrap() > 0.0, "{set}");
    assert!(set["first_success_s"].as_f64().unwrap() >= set["denied_window_s"].as_f64().unwrap(), "{set}");
    assert!(failed(get) < failed(set), "reads go on on this server: {impact}");
    // The node said SECONDARY, with no primary, for about 3 s.
    let reads = &lin["non_primary_reads"];
    assert_eq!(
        (reads["read_concern"].as_str(), reads["requires_primary"].as_bool()),
        (Some("linearizable"), Some(true))
    );
    assert!(!reads["spans"].as_array().unwrap().is_empty(), "{reads}");
    assert!(lin["roles"].as_array().unwrap().iter().any(|c| c["role"] != "primary"), "{}", lin["roles"]);
    let count = reads["count"].as_u64().unwrap();
    let judged = reads["judged"].as_u64().unwrap();
    assert!(count > 0 && count <= judged, "{reads}");
    // Every read named the member that answered it, and was judged by its role.
    assert_eq!((reads["rule"].as_str(), reads["attributed"].as_u64()), (Some("attributed"), Some(judged)), "{reads}");
    assert_eq!(reads["demoted"], 0, "one member has no successor: {reads}");
    let member = lin["roles"][0]["member"].as_str().unwrap();
    for e in reads["examples"].as_array().unwrap() {
        let e = e.as_str().unwrap();
        assert!(e.contains(&format!(" by {member} (took ")) && e.contains(" while it was replica"), "{e}");
    }
    let majority = cell("majority");
    assert_eq!(majority["non_primary_reads"]["requires_primary"], false, "{}", majority["non_primary_reads"]);
    let gate = |name: &str| r["gates"].as_array().unwrap().iter().find(|g| g["name"] == name).unwrap().clone();
    let lin_gate = gate("reads-from-primary");
    assert_eq!(lin_gate["result"], "fail", "{lin_gate}");
    assert!(lin_gate["evidence"].as_str().unwrap().contains(&format!("non_primary_reads = {count}")), "{lin_gate}");
    let majority_gate = gate("majority-reads-judged");
    assert_eq!(majority_gate["result"], "incomplete", "{majority_gate}");
    assert!(majority_gate["evidence"].as_str().unwrap().contains("`majority`"), "{majority_gate}");
    let writes = gate("writes-back");
    assert!(writes["evidence"].as_str().unwrap().contains("denied_window(stepped-down, set)"), "{writes}");
    assert_eq!(writes["result"], "pass", "{writes}");
    assert_eq!(run.code(), 1);
    // The report has one row per op kind and the reads from a secondary.
    let report = run.report();
    assert!(report.contains("| stepped-down (stepdown) |") && report.contains("| set | "), "{report}");
    let shown = count
        .to_string()
        .as_bytes()
        .rchunks(3)
        .rev()
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect::<Vec<_>>()
        .join(",");
    assert!(report.contains(&format!("reads answered by a member that was not primary: **{shown}**")), "{report}");
    assert!(report.contains("judged by the role of the member that answered each"), "{report}");
}

/// With no fault, the linearizable reads on secantusd-rs are still judged,
/// each by the member that answered it, and none is counted: the judgement
/// ran (reads judged > 0) and found the one member primary throughout.
/// Majority reads, which need no primary, are not judged without a fault.
#[test]
fn linearizable_reads_without_a_fault_are_judged_by_the_member_that_answered_and_none_counted() {
    let _load = shared();
    let spec = mongo_spec(
        "read_concern: linearizable, write_concern: {w: majority}, max_time: 5s, seed_documents: 200",
        "{ops: {get: 90, set: 10}, keys: {count: 200}}",
        r#"profiles:
  p: {closed: 2x4}
timing: {warmup: 1s, duration: 3s, deadline: 5s}
scenarios:
  - {name: linearizable, target: db, workload: w, profiles: [p]}
  - {name: majority, target: db, workload: w, profiles: [p], options: {read_concern: majority}}
gates:
  reads-from-primary: {expr: non_primary_reads == 0, scenario: linearizable}
"#,
    );
    let (_d, path) = spec_file(&spec);
    let run = run(&path, &[]);
    let r = run.results();
    let cells = r["cells"].as_array().unwrap();
    let lin = cells.iter().find(|c| c["scenario"] == "linearizable").unwrap();
    assert_eq!(lin["status"], "completed", "{}", lin["error"]);
    let reads = &lin["non_primary_reads"];
    let judged = reads["judged"].as_u64().unwrap();
    assert!(judged > 0, "the reads were judged: {reads}");
    assert_eq!(judged, lin["stats"]["per_op"]["get"]["ok"].as_u64().unwrap(), "every successful read: {reads}");
    assert_eq!((reads["rule"].as_str(), reads["attributed"].as_u64()), (Some("attributed"), Some(judged)), "{reads}");
    assert_eq!((reads["count"].as_u64(), reads["demoted"].as_u64()), (Some(0), Some(0)), "{reads}");
    assert!(reads.get("examples").is_none() && reads.get("spans").is_none(), "{reads}");
    // The role timeline the reads were judged against: the one member,
    // primary (or, on a busy machine, too slow for a sample: unreachable,
    // which says nothing of its role and counts no read).
    let roles = lin["roles"].as_array().unwrap();
    assert!(roles.iter().any(|c| c["role"] == "primary"), "{roles:?}");
    assert!(roles.iter().all(|c| c["role"] == "primary" || c["role"] == "unreachable"), "{roles:?}");
    let majority = cells.iter().find(|c| c["scenario"] == "majority").unwrap();
    assert!(majority.get("non_primary_reads").is_none(), "{}", majority["non_primary_reads"]);
    let gate = r["gates"].as_array().unwrap().iter().find(|g| g["name"] == "reads-from-primary").unwrap().clone();
    assert_eq!(gate["result"], "pass", "{gate}");
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout(), run.stderr());
}

#[test]
fn a_mongodb_uri_that_cannot_be_parsed_is_a_clear_error() {
    let spec = mongo_spec("read_concern: local", "{ops: {get: 1}, keys: {count: 10}}", "profiles:\n  p: {closed: 1x1}\ntiming: {duration: 1s}\nscenarios:\n  - {name: s, target: db, workload: w, profiles: [p]}\ngates:\n  ok: errors == 0\n")
        .replace("provider: process", "provider: external\n    uri: \"mongodb://no host here:/x\"");
    let (_d, path) = spec_file(&spec);
    // Known before anything starts: a spec error at the field, no run directory.
    let run = run(&path, &[]);
    assert_eq!(run.code(), 3, "{}", run.stderr());
    assert!(run.dir.is_none());
    let error = run.stderr();
    assert!(
        error.contains("field `targets.db.uri`: `mongodb://no host here:/x` is not a valid MongoDB URI"),
        "{error}"
    );
}

/// A secantusd-rs the test starts itself, for faults it makes through a
/// first run and a second run that then meets them.
struct Secantus {
    port: u16,
    child: std::process::Child,
    _data: tempfile::TempDir,
}

impl Secantus {
    fn start() -> Secantus {
        let data = tempfile::tempdir().unwrap();
        let port = free_port();
        let child = std::process::Command::new("secantusd-rs")
            .args(["--port", &port.to_string(), "--storage-path"])
            .arg(data.path().join("db"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("secantusd-rs is installed (scripts/install-deps.sh all)");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(std::time::Instant::now() < deadline, "secantusd-rs on {port} did not come up");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Secantus { port, child, _data: data }
    }
}

impl Drop for Secantus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_server_that_is_not_primary_by_the_ready_timeout_is_refused_clearly() {
    let _load = shared();
    let server = Secantus::start();
    // The collection is kept: the first run ends with the server stepped
    // down, which accepts no drop.
    let external = |rest: &str| {
        mongo_spec("read_concern: local, keep_collection: true", "{ops: {get: 1}, keys: {count: 10}}", rest).replace(
            "provider: process",
            &format!("provider: external\n    uri: \"mongodb://127.0.0.1:{}/?directConnection=true\"", server.port),
        )
    };
    // A first run steps the server down for 60 s as its last act.
    let (_d, first) = spec_file(&external(
        "profiles:\n  p: {closed: 1x1}\ntiming: {warmup: 0s, duration: 2s}\nscenarios:\n  - {name: s, target: db, workload: w, profiles: [p], faults: [{name: down, at: 1500ms, action: stepdown, target: db, seconds: 60s, force: true}]}\ngates:\n  ok: hangs == 0\n",
    ));
    let stepped = run(&first, &[]);
    let fault = &stepped.results()["cells"][0]["faults"][0];
    assert!(fault["evidence"].as_str().unwrap_or_default().contains("no longer primary"), "{fault}");
    // The next run finds no primary within its ready timeout: an error that
    // says so, and no cell run on a server that cannot take writes.
    let (_d, second) = spec_file(
        &external("profiles:\n  p: {closed: 1x1}\ntiming: {duration: 1s}\nscenarios:\n  - {name: s, target: db, workload: w, profiles: [p]}\ngates:\n  ok: errors == 0\n")
            .replace("ready_timeout: 30s", "ready_timeout: 2s"),
    );
    let refused = run(&second, &[]);
    assert_eq!(refused.code(), 2, "{}", refused.stderr());
    let r = refused.results();
    let error = r["errors"][0].as_str().unwrap();
    assert!(error.contains("within 2s") && error.contains("not a writable primary"), "{error}");
    assert_eq!(r["cells"][0]["status"], "skipped");
}

/// kill -9 of secantusd-rs under load and a start on the same data: the
/// restart is confirmed by the probe, the load resumes, and the checkers
/// judge the history across the crash. What the checkers find is the
/// server's business: on secantusd-rs 0.5.3-beta.196 reads after the
/// restart have returned writes older than ones acknowledged with `j: true`
/// just before the kill; the test asserts that the checks ran, not what
/// they found. So is whether a 1 s stretch after the restart reaches 90% of
/// the throughput before it (`recovered()`): on a busy machine it sometimes
/// does not within the window (unmeasured, never a pass), so the gate here
/// is on the first success after the crash, and how soon that comes judges
/// this machine's speed (a FAIL is faultline measuring right).
#[test]
fn a_killed_server_restarts_on_its_data_and_the_checks_run_across_the_crash() {
    let _load = shared();
    let spec = mongo_spec(
        "write_concern: {w: majority, j: true}, read_concern: majority",
        "{ops: {get: 50, set: 50}, keys: {count: 200}, value_size: 64B}",
        r#"profiles:
  p: {closed: 2x4}
timing: {warmup: 0s, duration: 6s, deadline: 2s}
checkers: [stale-read-after-ack, lost-acknowledged-write]
scenarios:
  - name: crash
    target: db
    workload: w
    profiles: [p]
    faults: [{name: crashed, at: 2s, action: restart, target: db}]
gates:
  resumes: first_success(crashed) <= 5s
"#,
    );
    let (_d, path) = spec_file(&spec);
    let run = run(&path, &[]);
    measured_as_asked(&run, &["resumes"]);
    let r = run.results();
    let cell = &r["cells"][0];
    let evidence = cell["faults"][0]["evidence"].as_str().unwrap();
    assert!(evidence.contains("after SIGKILL") && evidence.contains("started again"), "{evidence}");
    for check in cell["checks"].as_array().unwrap() {
        assert_ne!(check["status"], "unknown", "{check}");
        assert!(check["checked"].as_u64().unwrap() > 0, "{check}");
    }
    assert_eq!(r["crash_recovery"][0]["restarts"], 1, "{}", r["crash_recovery"]);
}

/// A fault the server refuses says why on the console, in the server's
/// decoded words: a step-down shorter than its catch-up period is answered
/// `BadValue` by the server.
#[test]
fn a_fault_the_server_refuses_shows_the_servers_reason_on_the_console() {
    let _load = shared();
    let spec = mongo_spec(
        "read_concern: local",
        "{ops: {get: 1, set: 1}, keys: {count: 10}}",
        "profiles:\n  p: {closed: 1x1}\ntiming: {warmup: 0s, duration: 2s}\nscenarios:\n  - {name: s, target: db, workload: w, profiles: [p], faults: [{name: down, at: 500ms, action: stepdown, target: db, seconds: 5s, catch_up: 10s}]}\ngates:\n  stepped: denied_window(down) < 10s\n",
    );
    let (_d, path) = spec_file(&spec);
    let run = run(&path, &[]);
    let reason = "stepdown period must be longer than secondaryCatchUpPeriodSecs";
    let line = format!("fault `down` (stepdown on db) failed: `db`: replSetStepDown: BadValue (2): {reason}");
    assert!(run.stderr().contains(&line), "{}", run.stderr());
    let error = run.results()["cells"][0]["faults"][0]["error"].as_str().unwrap().to_string();
    assert_eq!(error, format!("`db`: replSetStepDown: BadValue (2): {reason}"));
    // The gate on it is unmeasured, with the reason already said above it.
    assert_eq!(run.code(), 2, "{}", run.stderr());
}

/// The collections of database `fl_test` on the server at `uri`, read with
/// the official driver, after creating `create` there when given.
fn collections(uri: &str, create: Option<&str>) -> Vec<String> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let client = mongodb::Client::with_uri_str(uri).await.unwrap();
        let database = client.database("fl_test");
        if let Some(name) = create {
            database.create_collection(name).await.unwrap();
        }
        let mut names = database.list_collection_names().await.unwrap();
        client.shutdown().immediate(true).await;
        names.sort();
        names
    })
}

fn teardown(state: &std::path::Path, args: &[&str]) -> (i32, String) {
    let out = faultline().arg("teardown").args(args).env("FAULTLINE_STATE_DIR", state).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

/// On an external MongoDB the collection a run creates outlives it unless
/// removed: a run drops what it created and leaves what was there; a
/// SIGKILLed run's collection is in its run ledger, `teardown --dry-run`
/// lists it, the next run does not adopt it (it drops it and creates it
/// afresh, saying so), and `teardown --run` drops it.
#[test]
fn a_killed_runs_collection_on_an_external_server_is_listed_never_adopted_and_dropped_by_teardown() {
    let _load = shared();
    let server = Secantus::start();
    let uri = format!("mongodb://127.0.0.1:{}/?directConnection=true", server.port);
    let state = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let spec = |collection: &str, duration: &str| {
        mongo_spec(
            &format!("collection: {collection}"),
            "{ops: {set: 1}, keys: {count: 10}}",
            &format!(
                "profiles:\n  p: {{closed: 1x1}}\ntiming: {{warmup: 0s, duration: {duration}}}\nscenarios:\n  - {{name: s, target: db, workload: w, profiles: [p]}}\ngates:\n  ok: errors == 0\n"
            ),
        )
        .replace("provider: process", &format!("provider: external\n    uri: \"{uri}\""))
    };
    let run_to_the_end = |spec: &std::path::Path, out: &std::path::Path| {
        let done = faultline()
            .arg("run")
            .arg(spec)
            .arg("--out")
            .arg(out)
            .env("FAULTLINE_STATE_DIR", state.path())
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&done.stderr).into_owned();
        assert_eq!(done.status.code(), Some(0), "{said}");
        said
    };

    // A run that ends its own way drops the collection it created.
    let (_a, short) = spec_file(&spec("left", "1s"));
    let said = run_to_the_end(&short, &out.path().join("1"));
    assert!(said.contains("created collection `fl_test.left`"), "{said}");
    let has = |name: &str| collections(&uri, None).contains(&name.to_string());
    assert!(!has("left"), "{:?}", collections(&uri, None));
    // One that was there before the run is used and left.
    collections(&uri, Some("theirs"));
    let (_b, theirs) = spec_file(&spec("theirs", "1s"));
    let said = run_to_the_end(&theirs, &out.path().join("2"));
    assert!(said.contains("collection `fl_test.theirs` exists, used as it is"), "{said}");
    assert!(has("theirs"), "{:?}", collections(&uri, None));

    let (_c, long) = spec_file(&spec("left", "120s"));
    let first = killed_when(&long, state.path(), &out.path().join("3"), "created collection `fl_test.left`");
    let first_id = first.file_name().unwrap().to_string_lossy().into_owned();
    assert!(has("left"));
    let (code, listed) = teardown(state.path(), &["--dry-run", "--run", &first_id]);
    assert_eq!(code, 0, "{listed}");
    assert!(listed.contains(&format!("would remove mongodb collection `fl_test.left` at {uri}")), "{listed}");
    assert!(has("left"), "a dry run removes nothing");

    let said = run_to_the_end(&short, &out.path().join("4"));
    assert!(said.contains(&format!("dropped collection `fl_test.left`, left by killed run {first_id}")), "{said}");
    assert!(!said.contains("used as it is"), "{said}");
    let (_, after) = teardown(state.path(), &["--dry-run", "--run", &first_id]);
    assert!(after.contains("nothing to remove"), "taken back, so no longer listed: {after}");
    assert!(!has("left"), "the run dropped the collection it created");

    let again = killed_when(&long, state.path(), &out.path().join("5"), "created collection `fl_test.left`");
    let again_id = again.file_name().unwrap().to_string_lossy().into_owned();
    let (code, removed) = teardown(state.path(), &["--run", &again_id]);
    assert_eq!(code, 0, "{removed}");
    assert!(removed.contains("removed mongodb collection `fl_test.left`"), "{removed}");
    assert!(!has("left"), "{:?}", collections(&uri, None));
    assert_eq!(std::fs::read_dir(state.path()).unwrap().count(), 0, "every ledger is gone");
}
