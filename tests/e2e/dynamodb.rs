//! DynamoDB campaigns against a real DynamoDB-API server: moto (PyPI
//! `moto[server]`, installed by scripts/install-deps.sh), started by
//! faultline as a process target and driven through the official AWS SDK by
//! the request/response executor. moto is a Python server of a few hundred
//! calls a second; it is not the service, and these tests claim only what
//! it answers.

use crate::support::*;

/// A one-target DynamoDB spec; `options` go under the target's options
/// (after the table), `rest` after the workloads.
fn dynamo_spec(options: &str, workload: &str, rest: &str) -> String {
    format!(
        r#"name: dynamo
seed: 5
targets:
  shim:
    kind: dynamodb
    provider: process
    ready_timeout: 30s
    options: {{table: {{name: fl-test, index: {{name: by-group}}}}, {options}}}
workloads:
  w: {workload}
{rest}"#
    )
}

/// A moto_server of the test's own (for external targets), stopped when
/// dropped, also when the test fails.
struct Moto(std::process::Child);

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn moto_server() -> (Moto, u16) {
    moto_server_with(&[])
}

/// With `env`, e.g. moto's `INITIAL_NO_AUTH_ACTION_COUNT=0`, which makes it
/// check every request's credentials as IAM would.
fn moto_server_with(env: &[(&str, &str)]) -> (Moto, u16) {
    moto_server_started(env, &[])
}

/// With more arguments, e.g. a certificate and key to serve HTTPS with.
fn moto_server_with_args(args: &[&str]) -> (Moto, u16) {
    moto_server_started(&[], args)
}

fn moto_server_started(env: &[(&str, &str)], args: &[&str]) -> (Moto, u16) {
    let port = free_port();
    let child = std::process::Command::new("moto_server")
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("moto_server starts");
    (Moto(child), port)
}

fn cell<'a>(r: &'a serde_json::Value, scenario: &str, profile: &str) -> &'a serde_json::Value {
    r["cells"].as_array().unwrap().iter().find(|c| c["scenario"] == scenario && c["profile"] == profile).unwrap()
}

fn classes(c: &serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    c["stats"]["status_classes"].as_object().cloned().unwrap_or_default()
}

fn hot_key(c: &serde_json::Value) -> &serde_json::Value {
    c["checks"].as_array().unwrap().iter().find(|k| k["checker"] == "hot-key").expect("a hot-key check")
}

#[test]
fn the_hot_key_campaign_answers_every_round_and_its_invariants_hold() {
    let _load = shared();
    let rounds = 6u64;
    // moto answering one request at a time (scripts/moto-serial): a serial
    // server, so every invariant must hold, the stream's included.
    let serial = format!("server={}", repo().join("scripts/moto-serial").display());
    let args = ["--quick", "--set", &format!("rounds={rounds}"), "--set", &serial];
    let run = run(&repo().join("specs/dynamodb-hot-key.yaml"), &args);
    // --quick is never a PASS: everything must have run and held.
    assert!([1, 2].contains(&run.code()), "{}\n{}", run.stdout(), run.stderr());
    let r = run.results();
    assert_eq!(r["targets"][0]["kind"], "dynamodb");
    for (profile, writers) in [("32 writers", 32u64), ("64 writers", 64), ("256 writers", 256)] {
        let c = cell(&r, "puts", profile);
        assert_eq!(c["status"], "completed", "{profile}: {}", c["error"]);
        // Every writer put every round's key once: all calls are counted.
        let calls: u64 = classes(c).values().map(|n| n.as_u64().unwrap()).sum();
        assert_eq!(calls, writers * rounds, "{profile}: {:?}", classes(c));
        assert!(classes(c).keys().all(|k| k == "200" || k == "503"), "{profile}: {:?}", classes(c));
        let check = hot_key(c);
        assert_eq!(check["status"], "ok", "{profile}: {check}");
        assert_eq!(check["checked"], rounds, "{profile}: one key per round");
        // The stream was read: one record per call answered 200.
        let answered = classes(c)["200"].as_u64().unwrap();
        let note = check["note"].as_str().unwrap_or_default();
        assert!(note.contains(&format!("stream: {answered} records")), "{profile}: {note}");
        // A round's key sees the cell's writers at once: a client's start
        // each round together, and the gate holds the clients together (no
        // client starts a round before every other had the last one
        // answered). A client a busy machine woke late may begin its calls
        // after the serial server answered the first of the round, so not
        // every round sees all of them: some round did, and the median
        // round most (without the gate, clients drift apart and the median
        // round sees about half).
        let marker = "write calls in flight at once on a key: median ";
        let peaks = note.find(marker).map(|i| &note[i + marker.len()..]).unwrap_or_else(|| panic!("{note}"));
        let (median, most) = peaks.split_once(", most ").unwrap_or_else(|| panic!("{note}"));
        let median: u64 = median.parse().unwrap_or_else(|_| panic!("{note}"));
        let most: u64 = most.split(';').next().unwrap().trim().parse().unwrap_or_else(|_| panic!("{note}"));
        assert!(most == writers && median > writers / 2 && median <= most, "{profile}: {note}");
        // The cell ended when its rounds were done, not at its 120 s cap
        // (its window is the time the rounds took, as faultline measured it).
        assert!(c["measured_s"].as_f64().unwrap() < 120.0, "{profile}: {}", c["measured_s"]);
    }
    // One conditional create wins each round; the rest are refused with
    // ConditionalCheckFailedException, labelled with the server's words.
    let creates = cell(&r, "creates", "32 writers");
    assert_eq!(classes(creates)["200"], rounds, "{:?}", classes(creates));
    assert_eq!(classes(creates)["400"], 31 * rounds, "{:?}", classes(creates));
    let labels = creates["stats"]["error_labels"].as_array().unwrap();
    assert_eq!(labels[0]["label"], "server 400 ConditionalCheckFailedException", "{labels:?}");
    // Creates and transactions hold every invariant on a serial server.
    for scenario in ["creates", "transactions"] {
        let c = cell(&r, scenario, "32 writers");
        assert_eq!(c["status"], "completed", "{scenario}: {}", c["error"]);
        let check = hot_key(c);
        assert_eq!(
            (check["status"].as_str(), check["checked"].as_u64()),
            (Some("ok"), Some(rounds)),
            "{scenario}: {check}"
        );
        assert!(check["note"].as_str().unwrap_or_default().contains("stream: "), "{scenario}: {check}");
    }
    // Updates: every counter and id list holds, but moto's UpdateItem of an
    // absent item writes two stream records (the bare key, then the item),
    // where DynamoDB writes one INSERT: the checker finds exactly that, two
    // violations on each round's key and nothing else.
    let updates = cell(&r, "updates", "32 writers");
    assert_eq!(updates["status"], "completed", "{}", updates["error"]);
    let check = hot_key(updates);
    assert_eq!((check["checked"].as_u64(), check["violations"].as_u64()), (Some(rounds), Some(2 * rounds)), "{check}");
    for w in check["witnesses"].as_array().unwrap() {
        let w = w.as_str().unwrap();
        assert!(w.contains("left an item of no write of this cell") || w.contains("no call of this cell wrote"), "{w}");
    }
    assert_eq!(run.code(), 1, "{}", run.stdout());
    let gates = r["gates"].as_array().unwrap();
    for name in ["put-statuses", "one-create-per-round", "no-hangs", "transaction-statuses"] {
        let g = gates.iter().find(|g| g["name"] == name).unwrap();
        assert_eq!(g["result"], "pass", "{g}");
    }
    let report = run.report();
    for needle in ["| puts | 32 writers |", "Shed (503)", "hot-key"] {
        assert!(report.contains(needle), "{needle} missing from the report:\n{report}");
    }
}

#[test]
fn every_op_kind_runs_and_failures_are_classified_by_status_and_type() {
    let _load = shared();
    let spec = dynamo_spec(
        "siblings: 2",
        "{ops: {set: 3, get: 3, insert: 1, update: 1, del: 1, transact: 1, batch: 1, query: 1}, keys: {count: 20}}",
        // One call at a time: moto answers concurrent writes with the odd
        // 500 of its own (a race in the server), which is not this test's point.
        r#"profiles:
  p: {closed: 1x1}
timing: {warmup: 0s, duration: 3s, deadline: 5s}
scenarios:
  - {name: s, target: shim, workload: w, profiles: [p]}
gates:
  statuses: only(200, 400)
"#,
    );
    let (_dir, path) = spec_file(&spec);
    let run = run(&path, &[]);
    let r = run.results();
    let c = &r["cells"][0];
    assert_eq!(c["status"], "completed", "{}\n{}", c["error"], run.stderr());
    for op in ["set", "get", "insert", "update", "del", "transact", "batch", "query"] {
        let ok = c["stats"]["per_op"][op]["ok"].as_u64().unwrap_or(0);
        assert!(ok > 0, "{op} never succeeded: {}", c["stats"]["per_op"][op]);
    }
    // Inserting a key that exists is refused by its condition.
    let labels = c["stats"]["error_labels"].as_array().unwrap();
    let refused = labels.iter().find(|l| l["label"] == "server 400 ConditionalCheckFailedException");
    assert!(refused.is_some_and(|l| !l["examples"][0].as_str().unwrap().is_empty()), "{labels:?}");
    assert_eq!(run.code(), 0, "only 200 and 400: {}", run.stdout());
}

#[test]
fn a_transaction_that_loses_its_condition_is_cancelled_with_its_reasons() {
    let _load = shared();
    let spec = dynamo_spec(
        "transact_create_only: true",
        "{ops: {transact: 1}, keys: {count: 3, distribution: rounds}}",
        r#"profiles:
  p: {closed: 1x4}
timing: {warmup: 0s, duration: 30s, deadline: 5s}
checkers: [hot-key]
scenarios:
  - {name: s, target: shim, workload: w, profiles: [p]}
gates:
  one-per-round: count(200) == 3 and count(400) == 9
  invariants: hot_key_violations == 0
"#,
    );
    let (_dir, path) = spec_file(&spec);
    let run = run(&path, &[]);
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout(), run.stderr());
    let r = run.results();
    let labels = r["cells"][0]["stats"]["error_labels"].as_array().unwrap();
    let cancelled =
        labels.iter().find(|l| l["label"] == "server 400 TransactionCanceledException").expect("{labels:?}");
    let example = cancelled["examples"][0].as_str().unwrap();
    assert!(example.contains("reasons:") && example.contains("ConditionalCheckFailed"), "{example}");
}

/// One second of single puts on an external endpoint at `port`, with the
/// target's `fields`.
fn one_put_spec(port: u16, fields: &str) -> String {
    format!(
        r#"name: dynamo
targets:
  shim: {{kind: dynamodb, provider: external, uri: "http://127.0.0.1:{port}", {fields}}}
workloads:
  w: {{ops: {{set: 1}}}}
profiles:
  p: {{closed: 1x1}}
timing: {{duration: 1s}}
scenarios:
  - {{name: s, target: shim, workload: w, profiles: [p]}}
gates:
  ok: errors == 0
"#
    )
}

#[test]
fn an_endpoint_that_does_not_answer_is_a_clear_error() {
    let port = free_port();
    let (_dir, path) = spec_file(&one_put_spec(port, "ready_timeout: 2s"));
    let run = run(&path, &[]);
    assert_eq!(run.code(), 2, "{}\n{}", run.stdout(), run.stderr());
    let errors = run.results()["errors"].to_string();
    assert!(errors.contains("did not answer") && errors.contains("ListTables"), "{errors}");
}

/// A Python with boto3 (the machine's, or the one in moto's venv).
fn python_with_boto3() -> Option<String> {
    let venv = "/var/cache/faultline/tools/moto-5.2.1/bin/python";
    ["python3", venv].into_iter().map(String::from).find(|py| {
        std::process::Command::new(py).args(["-c", "import boto3"]).output().is_ok_and(|o| o.status.success())
    })
}

/// The hot-key checker's verdict on an update race, held against what an
/// independent client (boto3) reads from the same table afterwards: every
/// key whose counter or id list is not exactly its 200s is a violation the
/// checker must name, and a table where every key holds them all must pass.
#[test]
fn the_update_race_verdict_agrees_with_an_independent_read_of_the_table() {
    let _load = shared();
    let python = python_with_boto3().expect("boto3 comes with moto (scripts/install-deps.sh all)");
    let (moto, port) = moto_server();
    let spec = format!(
        r#"name: dynamo
seed: 5
targets:
  shim:
    kind: dynamodb
    provider: external
    uri: "http://127.0.0.1:{port}"
    ready_timeout: 30s
    options: {{table: {{name: kept, keep: true}}}}
workloads:
  w: {{ops: {{update: 1}}, keys: {{count: 8, distribution: rounds}}, value_size: 64B}}
profiles:
  p: {{closed: 2x16}}
timing: {{warmup: 0s, duration: 60s, deadline: 10s}}
checkers: [hot-key]
scenarios:
  - {{name: s, target: shim, workload: w, profiles: [p]}}
gates:
  invariants: hot_key_violations == 0
"#
    );
    let (_dir, path) = spec_file(&spec);
    let run = run(&path, &[]);
    let r = run.results();
    let c = &r["cells"][0];
    let answered = c["stats"]["status_classes"]["200"].as_u64().unwrap_or(0);
    let read = std::process::Command::new(&python)
        .args([
            "-c",
            r#"import boto3, json, sys
t = boto3.resource("dynamodb", endpoint_url=sys.argv[1], region_name="us-east-1",
                   aws_access_key_id="x", aws_secret_access_key="x").Table("kept")
print(json.dumps({i["pk"]: [int(i["c"]), len(i["l"]), len(set(bytes(v) for v in i["l"]))] for i in t.scan()["Items"]}))"#,
            &format!("http://127.0.0.1:{port}"),
        ])
        .output()
        .unwrap();
    drop(moto);
    assert!(read.status.success(), "{}", String::from_utf8_lossy(&read.stderr));
    let items: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&read.stdout).unwrap();
    assert_eq!(items.len(), 8, "{items:?}");
    let classes = c["stats"]["status_classes"].as_object().unwrap();
    assert_eq!(classes.values().map(|n| n.as_u64().unwrap()).sum::<u64>(), 8 * 32, "every update answered");
    if answered < 8 * 32 {
        // moto itself failed some (a 500 under load): whether those applied
        // is unknown, so the key counts below prove nothing either way.
        eprintln!("moto answered {answered} of 256 updates 200 ({classes:?}): the comparison needs them all");
        assert_eq!(hot_key(c)["checked"], 8, "{}", hot_key(c));
        return;
    }
    // 32 writers a round, all answered 200: each key must hold 32 in both.
    let bad: Vec<&String> =
        items.iter().filter(|(_, v)| v[0] != 32 || v[1] != 32 || v[2] != 32).map(|(k, _)| k).collect();
    let check = hot_key(c);
    assert_eq!(check["checked"], 8, "{check}");
    match bad.is_empty() {
        true => assert_eq!(check["status"], "ok", "boto3 read every key whole, the checker said {check}"),
        false => {
            assert_eq!(check["status"], "violated", "boto3 read {bad:?} short: {items:?}");
            for w in check["witnesses"].as_array().unwrap() {
                let key = w.as_str().unwrap().split(':').next().unwrap().trim_start_matches("key ");
                assert!(bad.contains(&&format!("fl:{key}")), "{w} names a key boto3 read whole: {items:?}");
            }
        }
    }
    assert_eq!(run.code(), if bad.is_empty() { 0 } else { 1 }, "{}", run.stdout());
}

/// A table that exists without the index the spec names stops the run
/// before any cell, with what is wrong, and the table faultline did not
/// create is left as it was.
#[test]
fn a_table_that_lacks_the_specs_index_is_refused_before_any_cell() {
    let _load = shared();
    let (moto, port) = moto_server();
    let spec = |table: &str| {
        format!(
            r#"name: dynamo
targets:
  shim: {{kind: dynamodb, provider: external, uri: "http://127.0.0.1:{port}", ready_timeout: 30s,
          options: {{table: {{{table}}}}}}}
workloads:
  w: {{ops: {{set: 1}}, keys: {{count: 2, distribution: rounds}}}}
profiles:
  p: {{closed: 1x2}}
timing: {{warmup: 0s, duration: 30s}}
scenarios:
  - {{name: s, target: shim, workload: w, profiles: [p]}}
gates:
  ok: errors == 0
"#
        )
    };
    // A first run leaves a table without an index behind.
    let (_a, plain) = spec_file(&spec("name: shared, keep: true"));
    let first = run(&plain, &[]);
    assert_eq!(first.code(), 0, "{}\n{}", first.stdout(), first.stderr());
    let (_b, indexed) = spec_file(&spec("name: shared, index: {name: by-group}"));
    let second = run(&indexed, &[]);
    drop(moto);
    assert_eq!(second.code(), 2, "{}\n{}", second.stdout(), second.stderr());
    let r = second.results();
    assert_eq!(r["cells"][0]["status"], "skipped", "{}", r["cells"][0]);
    let errors = r["errors"].to_string();
    assert!(errors.contains("has no index `by-group`"), "{errors}");
}

/// Credentials the server refuses end the run at once, before any cell,
/// with the server's status and words and where the credentials came from:
/// waiting for readiness would not change the answer.
#[test]
fn credentials_the_server_refuses_are_a_clear_error_at_once() {
    let _load = shared();
    let (_moto, port) = moto_server_with(&[("INITIAL_NO_AUTH_ACTION_COUNT", "0")]);
    let refused = "ready_timeout: 300s, options: {credentials: {access_key_id: nobody, secret_access_key: wrong}}";
    let (_dir, path) = spec_file(&one_put_spec(port, refused));
    // moto takes a moment to listen; the refusal itself comes at once.
    let started = std::time::Instant::now();
    let run = run(&path, &[]);
    let took = started.elapsed();
    assert_eq!(run.code(), 2, "{}\n{}", run.stdout(), run.stderr());
    let r = run.results();
    assert_eq!(r["cells"][0]["status"], "skipped", "{}", r["cells"][0]);
    let errors = r["errors"].to_string();
    for needle in ["refused faultline", "403 InvalidClientTokenId", "security token", "options.credentials"] {
        assert!(errors.contains(needle), "{needle} missing: {errors}");
    }
    // Waiting for readiness would wait out the 300 s ready_timeout; this
    // limit, far under it, only a hang or such a wait reaches (it counts
    // moto's own start, which a busy machine makes slow).
    assert!(took < std::time::Duration::from_secs(150), "waited {took:?} for a refusal that does not heal");
}

/// moto in a container of faultline/moto (fixtures/images/build.sh moto,
/// built by scripts/test.sh): puts on fresh keys with the table's stream,
/// and nothing left behind. One writer: the image runs moto_server, whose
/// racing handlers the campaign test avoids with scripts/moto-serial.
#[test]
fn puts_run_against_moto_in_a_container_and_its_stream_is_read() {
    let _load = shared();
    let spec = r#"name: dynamo-docker
seed: 3
targets:
  shim:
    kind: dynamodb
    provider: docker
    image: faultline/moto:bookworm
    ready_timeout: 60s
    options: {table: {name: hot, index: {name: by-group}, stream: true}}
workloads:
  w: {ops: {set: 1}, keys: {count: 20, distribution: rounds}, value_size: 64B}
profiles:
  p: {closed: 1x1}
timing: {warmup: 0s, duration: 60s, deadline: 10s, hang_after: 5s}
checkers: [hot-key]
scenarios:
  - {name: puts, target: shim, workload: w, profiles: [p]}
gates:
  invariants: hot_key_violations == 0
  statuses: only(200, 503)
"#;
    let (_dir, path) = spec_file(spec);
    let run = run(&path, &[]);
    let r = run.results();
    let c = &r["cells"][0];
    let calls: u64 = classes(c).values().map(|n| n.as_u64().unwrap()).sum();
    assert_eq!(calls, 20, "{:?}", classes(c));
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout(), run.stderr());
    let check = hot_key(c);
    assert_eq!((check["status"].as_str(), check["checked"].as_u64()), (Some("ok"), Some(20)), "{check}");
    let answered = classes(c)["200"].as_u64().unwrap();
    let note = check["note"].as_str().unwrap_or_default();
    assert!(note.contains(&format!("stream: {answered} records")), "{note}");
    assert_eq!(left_behind(run.dir.as_ref().unwrap()), Vec::<String>::new());
}

/// A test CA and a server certificate it signed for 127.0.0.1, made with
/// openssl in `dir`: (CA file, certificate, key).
fn test_certificates(dir: &std::path::Path) -> (String, String, String) {
    let path = |name: &str| dir.join(name).to_string_lossy().into_owned();
    let openssl = |args: &[&str]| {
        let out = std::process::Command::new("openssl").args(args).current_dir(dir).output().expect("openssl runs");
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let days = ["-days", "2"];
    openssl(
        &[
            &["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem"][..],
            &days,
            &["-subj", "/CN=faultline test CA"],
        ]
        .concat(),
    );
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=localhost",
    ]);
    std::fs::write(dir.join("ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n").unwrap();
    openssl(
        &[
            &[
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                "server.pem",
                "-extfile",
                "ext",
            ][..],
            &days,
        ]
        .concat(),
    );
    (path("ca.pem"), path("server.pem"), path("server.key"))
}

/// moto behind a certificate of a test CA: reached with that CA as
/// `ca_file`, or with `insecure: true`; with neither, the system's roots
/// refuse it and the run says the certificate was not trusted.
#[test]
fn an_https_endpoint_is_reached_with_its_ca_or_insecure_and_refused_otherwise() {
    let _load = shared();
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = test_certificates(dir.path());
    let (_moto, port) = moto_server_with_args(&["-c", &cert, "-k", &key]);
    let spec = |tls: &str| {
        format!(
            r#"name: dynamo-tls
targets:
  shim: {{kind: dynamodb, provider: external, uri: "https://127.0.0.1:{port}", ready_timeout: 20s,
          options: {{table: {{name: tls-{n}}}, {tls}}}}}
workloads:
  w: {{ops: {{set: 1}}, keys: {{count: 8, distribution: rounds}}}}
profiles:
  p: {{closed: 1x4}}
timing: {{warmup: 0s, duration: 30s}}
checkers: [hot-key]
scenarios:
  - {{name: s, target: shim, workload: w, profiles: [p]}}
gates:
  ok: errors == 0 and hot_key_violations == 0
"#,
            n = tls.len()
        )
    };
    for tls in [format!("ca_file: {ca:?}"), "insecure: true".to_string()] {
        let (_d, path) = spec_file(&spec(&tls));
        let run = run(&path, &[]);
        assert_eq!(run.code(), 0, "{tls}: {}\n{}", run.stdout(), run.stderr());
        let calls = classes(&run.results()["cells"][0])["200"].as_u64();
        assert_eq!(calls, Some(32), "{tls}");
    }
    let (_d, path) = spec_file(&spec("region: us-east-1"));
    let run = run(&path, &[]);
    assert_eq!(run.code(), 2, "{}\n{}", run.stdout(), run.stderr());
    // One sentence with the cause and the fix, not the SDK's dump.
    let errors = run.results()["errors"].to_string();
    assert!(errors.contains("certificate not trusted") && errors.contains("options.ca_file"), "{errors}");
    assert!(errors.contains("options.insecure") && !errors.contains("DispatchFailure"), "{errors}");
    // No later probe can change an untrusted certificate: the first one ends the wait.
    assert!(errors.contains("refused faultline"), "{errors}");
    // Plain HTTP to the TLS endpoint: the error says to use https://.
    let (_d, path) = spec_file(&spec("region: us-east-1").replace("https://", "http://").replace("20s", "3s"));
    let plain = crate::support::run(&path, &[]);
    assert_eq!(plain.code(), 2, "{}\n{}", plain.stdout(), plain.stderr());
    let errors = plain.results()["errors"].to_string();
    assert!(errors.contains("use https://") && !errors.contains("DispatchFailure"), "{errors}");
}

fn teardown(state: &std::path::Path, args: &[&str]) -> (i32, String) {
    let out = faultline().arg("teardown").args(args).env("FAULTLINE_STATE_DIR", state).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

/// A SIGKILLed run's table on an external endpoint is in its run ledger:
/// `teardown --dry-run` lists it, the next run does not adopt it (it
/// deletes it and creates it afresh, saying so), and `teardown --run` with
/// the run directory's name removes it.
#[test]
fn a_killed_runs_table_is_listed_never_adopted_and_removed_by_teardown() {
    let _load = shared();
    let python = python_with_boto3().expect("boto3 comes with moto (scripts/install-deps.sh all)");
    let (moto, port) = moto_server();
    let state = tempfile::tempdir().unwrap();
    let spec = |duration: &str| {
        format!(
            r#"name: left
targets:
  shim: {{kind: dynamodb, provider: external, uri: "http://127.0.0.1:{port}", ready_timeout: 30s,
          options: {{table: {{name: left-behind}}}}}}
workloads:
  w: {{ops: {{set: 1}}}}
profiles:
  p: {{closed: 1x1}}
timing: {{warmup: 0s, duration: {duration}}}
scenarios:
  - {{name: s, target: shim, workload: w, profiles: [p]}}
gates:
  ok: errors == 0
"#
        )
    };
    let tables = || {
        let out = std::process::Command::new(&python)
            .args([
                "-c",
                "import boto3, sys; print(boto3.client('dynamodb', endpoint_url=sys.argv[1], region_name='us-east-1', \
                 aws_access_key_id='x', aws_secret_access_key='x').list_tables()['TableNames'])",
                &format!("http://127.0.0.1:{port}"),
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let (_a, long) = spec_file(&spec("120s"));
    let (_b, short) = spec_file(&spec("1s"));
    let out = tempfile::tempdir().unwrap();

    let first = killed_when(&long, state.path(), &out.path().join("1"), "created table `left-behind`");
    let first_id = first.file_name().unwrap().to_string_lossy().into_owned();
    let (code, listed) = teardown(state.path(), &["--dry-run", "--run", &first_id]);
    assert_eq!(code, 0, "{listed}");
    assert!(
        listed.contains(&format!("would remove dynamodb table `left-behind` at http://127.0.0.1:{port}")),
        "{listed}"
    );
    assert_eq!(tables(), "['left-behind']", "a dry run removes nothing");

    let next = std::process::Command::new(env!("CARGO_BIN_EXE_faultline"))
        .current_dir(repo())
        .arg("run")
        .arg(&short)
        .arg("--out")
        .arg(out.path().join("2"))
        .env("FAULTLINE_STATE_DIR", state.path())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&next.stderr);
    assert_eq!(next.status.code(), Some(0), "{said}");
    assert!(said.contains(&format!("deleted table `left-behind`, left by killed run {first_id}")), "{said}");
    assert!(!said.contains("used as it is"), "{said}");
    let (_, after) = teardown(state.path(), &["--dry-run", "--run", &first_id]);
    assert!(after.contains("nothing to remove"), "taken back, so no longer listed: {after}");
    assert_eq!(tables(), "[]", "the run deleted the table it created");

    let again = killed_when(&long, state.path(), &out.path().join("3"), "created table `left-behind`");
    let again_id = again.file_name().unwrap().to_string_lossy().into_owned();
    let (code, removed) = teardown(state.path(), &["--run", &again_id]);
    let left = tables();
    drop(moto);
    assert_eq!(code, 0, "{removed}");
    assert!(removed.contains("removed dynamodb table `left-behind`"), "{removed}");
    assert_eq!(left, "[]");
    assert_eq!(std::fs::read_dir(state.path()).unwrap().count(), 0, "every ledger is gone");
}

/// A table on a moto that faultline itself started goes with that server,
/// so a SIGKILLed run's ledger does not list it: `teardown` has nothing of
/// it to reach (the server is gone) and finishes cleanly.
#[test]
fn a_table_on_a_server_faultline_started_is_not_in_the_ledger() {
    let _load = shared();
    let state = tempfile::tempdir().unwrap();
    let (_spec_dir, spec) = spec_file(
        r#"name: own-server
targets:
  shim: {kind: dynamodb, provider: process, command: moto_server, ready_timeout: 30s,
         options: {table: {name: own-table}}}
workloads:
  w: {ops: {set: 1}}
profiles:
  p: {closed: 1x1}
timing: {warmup: 0s, duration: 120s}
scenarios:
  - {name: s, target: shim, workload: w, profiles: [p]}
gates:
  ok: errors == 0
"#,
    );
    let out = tempfile::tempdir().unwrap();
    let run = killed_when(&spec, state.path(), out.path(), "created table `own-table`");
    let id = run.file_name().unwrap().to_string_lossy().into_owned();
    let (code, listed) = teardown(state.path(), &["--dry-run", "--run", &id]);
    assert_eq!(code, 0, "{listed}");
    assert!(!listed.contains("dynamodb table"), "the table went with the server: {listed}");
    let (code, removed) = teardown(state.path(), &["--run", &id]);
    assert_eq!(code, 0, "{removed}");
    assert!(!removed.contains("dynamodb table"), "{removed}");
}
