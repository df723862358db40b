//! etcd, a real Raft cluster (Debian's etcd-server 3.4): three members in
//! containers from faultline/etcd (`fixtures/images/build.sh etcd`;
//! scripts/test.sh builds it), three as processes on loopback, and one
//! member as a process. The known-bad
//! and known-good cases of the failover campaign: serializable reads from a
//! leader cut off from its peers (still reachable by clients) are found
//! stale, linearizable ones in the same scenario are refused, never stale;
//! a killed leader is replaced and `move-leader` hands leadership over.

use crate::support::*;

/// A 3-member cluster in containers, `scenarios` on it and `gates` besides
/// nothing acknowledged lost.
fn cluster_spec(scenarios: &str, gates: &str) -> String {
    format!(
        r#"name: etcd-e2e
targets:
  kv:
    kind: etcd
    provider: docker
    image: faultline/etcd:bookworm
    members: 3
    memory: 384MiB
    ready_timeout: 60s
workloads:
  w: {{ops: {{get: 80, set: 20}}, keys: {{count: 50}}, value_size: 32B}}
profiles:
  p: {{closed: 3x8}}
timing: {{warmup: 1s, duration: 14s, deadline: 1s}}
checkers: [stale-read-after-ack, lost-acknowledged-write]
gates:
  nothing-lost: lost_acked_writes == 0
{gates}scenarios:
{scenarios}"#
    )
}

fn cell<'a>(r: &'a serde_json::Value, scenario: &str) -> &'a serde_json::Value {
    r["cells"].as_array().unwrap().iter().find(|c| c["scenario"] == scenario).unwrap_or_else(|| panic!("{r}"))
}

fn check<'a>(cell: &'a serde_json::Value, checker: &str) -> &'a serde_json::Value {
    cell["checks"].as_array().unwrap().iter().find(|k| k["checker"] == checker).unwrap_or_else(|| panic!("{cell}"))
}

fn gate<'a>(r: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    r["gates"].as_array().unwrap().iter().find(|g| g["name"] == name).unwrap_or_else(|| panic!("{}", r["gates"]))
}

/// The fault was confirmed (and healed, for one that heals), and
/// afterwards a member other than the one it hit led: the old leader is
/// named in `hit`.
fn a_new_leader_after(cell: &serde_json::Value) -> String {
    assert_eq!(cell["status"], "completed", "{}", cell["error"]);
    let fault = &cell["faults"][0];
    assert!(fault.get("error").is_none() && fault["confirmed_s"].is_number(), "{fault}");
    assert!(fault["action"] == "move-leader" || fault["healed_s"].is_number(), "{fault}");
    // `kv-1`, or `kv-1 (process group 4242)` for a process member.
    let old = fault["hit"][0].as_str().unwrap().split(' ').next().unwrap().to_string();
    let roles = cell["roles"].as_array().unwrap();
    assert!(roles.iter().any(|c| c["member"] == old.as_str() && c["role"] == "primary"), "{roles:?}");
    assert!(roles.iter().any(|c| c["member"] != old.as_str() && c["role"] == "primary"), "no new leader: {roles:?}");
    old
}

#[test]
fn serializable_reads_from_a_cut_off_leader_are_stale_and_linearizable_ones_never() {
    let _load = shared();
    let scenarios = r#"  - name: linearizable
    target: kv
    workload: w
    profiles: [p]
    faults: [{name: cut-off, at: 3s, action: isolate, target: kv.leader, heal_after: 7s}]
  - name: serializable
    target: kv
    workload: w
    profiles: [p]
    options: {read: serializable}
    faults: [{name: cut-off, at: 3s, action: isolate, target: kv.leader, heal_after: 7s}]
"#;
    let gates = "  linearizable-never-stale: {expr: stale_reads == 0, scenario: linearizable}\n  \
                 serializable-never-stale: {expr: stale_reads == 0, scenario: serializable}\n";
    let (_d, path) = spec_file(&cluster_spec(scenarios, gates));
    let run = run(&path, &[]);
    let r = run.results();

    // The known-good side: reads the cut-off member could not confirm with
    // a quorum failed (they reached it: clients balance over the members),
    // and none returned a superseded value.
    let lin = cell(&r, "linearizable");
    let old = a_new_leader_after(lin);
    let stale = check(lin, "stale-read-after-ack");
    assert_eq!(stale["status"], "ok", "{stale}");
    assert!(stale["checked"].as_u64().unwrap() > 100, "{stale}");
    let impact = &lin["stats"]["fault_impact"][0];
    assert!(impact["failed"].as_u64().unwrap() > 0, "the cut-off member refused or timed out: {impact}");
    assert!(impact["denied_window_s"].is_number(), "{impact}");
    assert_eq!(gate(&r, "linearizable-never-stale")["result"], "pass");

    // The known-bad side: the same cut, serializable reads, stale values.
    let ser = cell(&r, "serializable");
    a_new_leader_after(ser);
    let stale = check(ser, "stale-read-after-ack");
    assert_eq!(stale["status"], "violated", "{stale}");
    assert!(stale["violations"].as_u64().unwrap() > 0, "{stale}");
    let witnesses = stale["witnesses"].as_array().unwrap();
    assert!(!witnesses.is_empty(), "{stale}");
    // Each names the member that answered the stale read.
    assert!(witnesses.iter().all(|w| w.as_str().unwrap().contains(" answered by ")), "{stale}");
    let failed = gate(&r, "serializable-never-stale");
    assert_eq!(failed["result"], "fail", "{failed}");
    assert_eq!(ser["non_primary_reads"]["read_concern"], "serializable", "{}", ser["non_primary_reads"]);

    for c in [lin, ser] {
        assert_eq!(check(c, "lost-acknowledged-write")["status"], "ok", "{}", check(c, "lost-acknowledged-write"));
    }
    assert_eq!(run.code(), 1, "the serializable gate fails the run: {}", run.stdout());
    assert!(run.report().contains(&old), "{}", run.report());
    assert_eq!(left_behind(run.dir.as_ref().unwrap()), Vec::<String>::new());
}

#[test]
fn a_killed_leader_is_replaced_and_move_leader_hands_leadership_over() {
    let _load = shared();
    let scenarios = r#"  - name: killed
    target: kv
    workload: w
    profiles: [p]
    faults: [{name: killed, at: 3s, action: kill, target: kv.leader, heal_after: 5s}]
  - name: moved
    target: kv
    workload: w
    profiles: [p]
    faults: [{name: moved, at: 3s, action: move-leader, target: kv.leader}]
"#;
    let (_d, path) = spec_file(&cluster_spec(scenarios, ""));
    let run = run(&path, &[]);
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout(), run.stderr());
    let r = run.results();

    let killed = cell(&r, "killed");
    a_new_leader_after(killed);
    let impact = &killed["stats"]["fault_impact"][0];
    assert!(!impact["not_recovered"].as_bool().unwrap_or(false), "{impact}");
    assert!(impact["first_success_s"].is_number(), "{impact}");

    let moved = cell(&r, "moved");
    let old = a_new_leader_after(moved);
    let evidence = moved["faults"][0]["evidence"].as_str().unwrap();
    assert!(evidence.contains(&format!("leadership moved from `{old}` to `kv-")), "{evidence}");
    for c in [killed, moved] {
        assert_eq!(check(c, "lost-acknowledged-write")["status"], "ok", "{c}");
        assert_eq!(check(c, "stale-read-after-ack")["status"], "ok", "{c}");
    }
    let server = r["targets"][0]["server"].as_str().unwrap();
    assert!(server.starts_with("etcd 3.4") && server.contains("a cluster of 3 member(s)"), "{server}");
    // The members' Raft timing, read from their own command lines.
    assert!(server.contains("election timeout 1000 ms, heartbeat 100 ms"), "{server}");
    assert_eq!(left_behind(run.dir.as_ref().unwrap()), Vec::<String>::new());
}

#[test]
fn one_etcd_process_runs_every_op_and_its_history_checks_clean() {
    let _load = shared();
    let spec = r#"name: etcd-process
targets:
  kv: {kind: etcd, provider: process, members: 1}
workloads:
  judged: {ops: {get: 60, set: 40}, keys: {count: 100}, value_size: 32B}
  every-op: {ops: {get: 40, set: 30, del: 15, insert: 15}, keys: {count: 100}, value_size: 32B}
profiles:
  p: {closed: 2x4}
timing: {warmup: 300ms, duration: 2s}
checkers: [stale-read-after-ack, lost-acknowledged-write, linearizability]
gates:
  never-stale: {expr: stale_reads == 0, scenario: judged}
scenarios:
  - {name: judged, target: kv, workload: judged, profiles: [p]}
  # The checkers judge get and set; del and insert run without them.
  - {name: every-op, target: kv, workload: every-op, profiles: [p], checkers: []}
"#;
    let (_d, path) = spec_file(spec);
    let run = run(&path, &[]);
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout(), run.stderr());
    let r = run.results();
    let every = cell(&r, "every-op");
    let ops = &every["stats"]["per_op"];
    for op in ["get", "set", "del", "insert"] {
        assert!(ops[op]["ok"].as_u64().unwrap_or(0) > 0, "{op}: {ops}");
    }
    // An insert of a key that exists is refused by its compare, by name.
    let refused = every["stats"]["error_labels"].as_array().unwrap();
    assert!(refused.iter().any(|l| l["label"] == "server key exists"), "{refused:?}");
    let judged = cell(&r, "judged");
    for checker in ["stale-read-after-ack", "lost-acknowledged-write", "linearizability"] {
        let k = check(judged, checker);
        assert_eq!(k["status"], "ok", "{k}");
        assert!(k["checked"].as_u64().unwrap() > 0, "{k}");
    }
    let server = r["targets"][0]["server"].as_str().unwrap();
    assert!(server.starts_with("etcd 3.4") && server.contains("a cluster of 1 member(s)"), "{server}");
    assert_eq!(left_behind(run.dir.as_ref().unwrap()), Vec::<String>::new());
}

/// Three members as processes on loopback (a process etcd target's
/// default): faults by role resolved when they fire, each confirmed and
/// healed, a new leader after the leader is killed or hands over, no
/// majority while both followers are paused, and nothing left running.
#[test]
fn a_three_member_process_cluster_is_faulted_by_role() {
    let _load = shared();
    let spec = r#"name: etcd-process-cluster
targets:
  kv: {kind: etcd, provider: process, ready_timeout: 30s}
workloads:
  w: {ops: {get: 80, set: 20}, keys: {count: 50}, value_size: 32B}
profiles:
  p: {closed: 2x4}
timing: {warmup: 1s, duration: 10s, deadline: 1s}
checkers: [stale-read-after-ack, lost-acknowledged-write]
gates:
  nothing-lost: lost_acked_writes == 0
scenarios:
  - {name: killed, target: kv, workload: w, profiles: [p], faults: [{name: killed, at: 2s, action: kill, target: kv.leader, heal_after: 4s}]}
  - {name: no-majority, target: kv, workload: w, profiles: [p], faults: [{name: frozen, at: 2s, action: pause, target: kv.followers, heal_after: 3s}]}
  - {name: any, target: kv, workload: w, profiles: [p], faults: [{name: again, at: 2s, action: restart, target: kv.any}]}
  - {name: moved, target: kv, workload: w, profiles: [p], faults: [{name: moved, at: 2s, action: move-leader, target: kv.leader}]}
"#;
    let (_d, path) = spec_file(spec);
    let run = run(&path, &[]);
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout(), run.stderr());
    let r = run.results();
    let server = r["targets"][0]["server"].as_str().unwrap();
    assert!(server.starts_with("etcd 3.4") && server.contains("a cluster of 3 member(s)"), "{server}");

    let killed = cell(&r, "killed");
    let old = a_new_leader_after(killed);
    assert!(killed["faults"][0]["heal_evidence"].as_str().unwrap().contains("started again"), "{killed}");
    let impact = &killed["stats"]["fault_impact"][0];
    assert!(impact["first_success_s"].is_number(), "{impact}");

    // Both followers frozen: the leader alone has no majority, writes fail
    // until they thaw.
    let frozen = cell(&r, "no-majority");
    let fault = &frozen["faults"][0];
    assert!(fault.get("error").is_none() && fault["healed_s"].is_number(), "{fault}");
    let hit = fault["hit"].as_array().unwrap();
    assert_eq!(hit.len(), 2, "{fault}");
    assert!(hit.iter().all(|h| h.as_str().unwrap().contains("(process group ")), "{fault}");
    let impact = &frozen["stats"]["fault_impact"][0];
    assert!(impact["failed"].as_u64().unwrap() > 0, "no majority, no write: {impact}");

    let any = cell(&r, "any");
    let fault = &any["faults"][0];
    assert!(fault.get("error").is_none() && fault["hit"].as_array().unwrap().len() == 1, "{fault}");
    assert!(fault["evidence"].as_str().unwrap().contains("started again"), "{fault}");

    let moved = cell(&r, "moved");
    let from = a_new_leader_after(moved);
    let evidence = moved["faults"][0]["evidence"].as_str().unwrap();
    assert!(evidence.contains(&format!("leadership moved from `{from}` to `kv-")), "{evidence}");

    for c in [killed, frozen, any, moved] {
        assert_eq!(check(c, "lost-acknowledged-write")["status"], "ok", "{c}");
        assert_eq!(check(c, "stale-read-after-ack")["status"], "ok", "{c}");
        let members: Vec<&str> = c["roles"].as_array().unwrap().iter().filter_map(|x| x["member"].as_str()).collect();
        for m in ["kv-0", "kv-1", "kv-2"] {
            assert!(members.contains(&m), "{m} has a role timeline: {members:?}");
        }
    }
    assert!(run.report().contains(&old), "{}", run.report());
    // Every member's process group is gone with the run.
    let dir = std::fs::canonicalize(run.dir.as_ref().unwrap()).unwrap();
    assert_eq!(processes_matching(&dir.display().to_string()), Vec::<String>::new());
}
