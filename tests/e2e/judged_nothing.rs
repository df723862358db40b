//! A check that judged nothing is not a pass: a workload of writes alone
//! gives stale-read and linearizability no read to judge, and a gate on
//! their violations is INCOMPLETE, on every target kind (the checkers are
//! kind-independent). `validate` and `run` warn about such a spec first.
//! And the DynamoDB index settle window is a table option, whose lag has
//! gates of its own.

use crate::support::*;

/// A spec of one scenario on `target` (a flow mapping) with `ops`, the two
/// read checkers and gates on their violations.
fn read_checkers_spec(target: &str, ops: &str) -> String {
    format!(
        "name: judged\ntargets:\n  db: {target}\nworkloads:\n  w: {{ops: {ops}, keys: {{count: 20}}, value_size: 64B}}\n\
         profiles:\n  p: {{closed: 1x2}}\ntiming: {{warmup: 0s, duration: 1s}}\n\
         checkers: [linearizability, stale-read-after-ack]\n\
         scenarios:\n  - {{name: s, target: db, workload: w, profiles: [p]}}\n\
         gates:\n  fresh: stale_reads == 0\n  linear: linearizability_violations == 0\n"
    )
}

const TARGETS: [(&str, &str); 3] = [
    ("redis", "{kind: redis, provider: process}"),
    ("mongodb", "{kind: mongodb, provider: process, ready_timeout: 30s, options: {database: fl_judged}}"),
    ("dynamodb", "{kind: dynamodb, provider: process, ready_timeout: 30s, options: {table: {name: fl-judged}}}"),
];

#[test]
fn read_checkers_on_a_workload_of_writes_alone_are_incomplete_on_every_kind() {
    let _load = shared();
    for (kind, target) in TARGETS {
        let (_d, spec) = spec_file(&read_checkers_spec(target, "{set: 1}"));
        // validate warns, located, and still says ok.
        let checked = faultline().arg("validate").arg(&spec).output().unwrap();
        let stderr = String::from_utf8_lossy(&checked.stderr);
        assert_eq!(checked.status.code(), Some(0), "{kind}: {stderr}");
        let file = spec.display().to_string();
        for checker in ["linearizability", "stale-read-after-ack"] {
            assert!(
                stderr.lines().any(|l| l.starts_with(&format!("warning: {file}:"))
                    && l.contains(&format!("`{checker}` will judge nothing"))
                    && l.contains("sends no get")),
                "{kind}: {stderr}"
            );
        }
        let run = run(&spec, &[]);
        assert_eq!(run.code(), 2, "{kind}: {}\n{}", run.stdout(), run.stderr());
        assert!(run.stderr().contains("will judge nothing"), "{kind}: {}", run.stderr());
        let r = run.results();
        assert_eq!(r["verdict"], "INCOMPLETE", "{kind}");
        let cell = &r["cells"][0];
        assert_eq!(cell["status"], "completed", "{kind}: {}", cell["error"]);
        assert!(cell["stats"]["ok"].as_u64().unwrap() > 0, "{kind}: writes were answered");
        for check in cell["checks"].as_array().unwrap() {
            assert_eq!(
                (check["checked"].as_u64(), check["violations"].as_u64()),
                (Some(0), Some(0)),
                "{kind}: {check}"
            );
            assert!(check["judged"].as_str().unwrap().contains("reads"), "{kind}: {check}");
        }
        for (gate, says) in [
            ("fresh", "the stale-read-after-ack checker judged 0 reads after an acknowledged write"),
            ("linear", "the linearizability checker judged 0 reads of written keys"),
        ] {
            let g = r["gates"].as_array().unwrap().iter().find(|g| g["name"] == gate).unwrap();
            assert_eq!(g["result"], "incomplete", "{kind}: {g}");
            assert!(g["evidence"].as_str().unwrap().contains(says), "{kind}: {g}");
        }
        assert!(run.report().contains("NOTHING JUDGED"), "{kind}: {}", run.report());
    }
}

/// The control: reads and writes on one key space are judged, and pass.
#[test]
fn read_checkers_with_reads_and_writes_judge_them_and_pass() {
    let _load = shared();
    let (_d, spec) = spec_file(&read_checkers_spec(TARGETS[0].1, "{get: 1, set: 1}"));
    let checked = faultline().arg("validate").arg(&spec).output().unwrap();
    assert!(!String::from_utf8_lossy(&checked.stderr).contains("warning"), "{checked:?}");
    let run = run(&spec, &[]);
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout(), run.stderr());
    for check in run.results()["cells"][0]["checks"].as_array().unwrap() {
        assert_eq!(check["status"], "ok", "{check}");
        assert!(check["checked"].as_u64().unwrap() > 10, "{check}");
    }
}

/// `table.index.settle` sets how long the index is given to agree with the
/// items (moto's index is synchronous, so nothing lags there): the window
/// is recorded, lag has its own gates, and a window beyond 10 minutes is a
/// located spec error.
#[test]
fn the_index_settle_window_is_a_table_option_and_lag_has_its_own_gates() {
    let _load = shared();
    let spec_text = |settle: &str| {
        format!(
            "name: settle\ntargets:\n  shim: {{kind: dynamodb, provider: process, ready_timeout: 30s,\n\
             \x20   options: {{table: {{name: fl-settle, index: {{name: by-group, settle: {settle}}}}}}}}}\n\
             workloads:\n  w: {{ops: {{set: 1}}, keys: {{count: 20}}, value_size: 64B}}\n\
             profiles:\n  p: {{closed: 1x2}}\ntiming: {{warmup: 0s, duration: 1s}}\ncheckers: [hot-key]\n\
             scenarios:\n  - {{name: s, target: shim, workload: w, profiles: [p]}}\n\
             gates:\n  held: hot_key_violations == 0\n  caught-up: index_lag < 5s and index_lagged == 0\n"
        )
    };
    let (_d, spec) = spec_file(&spec_text("11m"));
    let refused = faultline().arg("validate").arg(&spec).output().unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("table.index.settle") && stderr.contains("at most 10m"), "{stderr}");
    let located = stderr.split(&format!("{}:", spec.display())).nth(1).unwrap_or_default();
    assert!(located.starts_with(|c: char| c.is_ascii_digit()), "located in the file: {stderr}");

    let (_d, spec) = spec_file(&spec_text("7s"));
    let run = run(&spec, &[]);
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout(), run.stderr());
    let r = run.results();
    let check = &r["cells"][0]["checks"][0];
    assert_eq!(check["checker"], "hot-key");
    let index = &check["index"];
    assert_eq!(index["window_ms"].as_f64(), Some(7000.0), "{check}");
    assert_eq!((index["settled_late"].as_u64(), index["still_wrong"].as_u64()), (Some(0), Some(0)), "{check}");
    assert_eq!(index["entries"], check["checked"], "{check}");
    assert!(check["note"].as_str().unwrap().contains("none lagged"), "{check}");
    for g in r["gates"].as_array().unwrap() {
        assert_eq!(g["result"], "pass", "{g}");
    }
}
