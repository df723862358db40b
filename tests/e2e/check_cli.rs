//! `faultline check` against every reference history, through the CLI: each
//! known verdict as an exit code, and the output and errors users see.

use crate::support::*;

fn check(model: &str, file: &str) -> (i32, String, String) {
    let out = faultline().args(["check", "--model", model, file]).output().unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn verdicts_map_to_exit_codes() {
    let expected = std::fs::read_to_string(repo().join("fixtures/histories/etcd/EXPECTED")).unwrap();
    let mut checked = 0;
    for line in expected.lines() {
        let (name, verdict) = line.split_once(char::is_whitespace).unwrap();
        let (code, stdout, _) = check("register", &format!("fixtures/histories/etcd/{name}"));
        let want = if verdict.trim() == "linearizable" { 0 } else { 1 };
        assert_eq!(code, want, "{name}: {stdout}");
        checked += 1;
    }
    assert_eq!(checked, 50, "fixtures/histories/etcd/EXPECTED lists every etcd history");
    let mut kv: Vec<_> = std::fs::read_dir(repo().join("fixtures/histories/kv"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with("-ok.txt") || n.ends_with("-bad.txt"))
        .collect();
    kv.sort();
    assert_eq!(kv.len(), 4, "{kv:?}");
    for name in kv {
        let (code, stdout, _) = check("kv", &format!("fixtures/histories/kv/{name}"));
        assert_eq!(code, if name.ends_with("-ok.txt") { 0 } else { 1 }, "{name}: {stdout}");
    }
    let (code, stdout, _) = check("kv", "fixtures/histories/kv/c10-bad.txt");
    assert_eq!(code, 1);
    assert!(stdout.contains("NOT linearizable") && stdout.contains("key: "), "{stdout}");
}

#[test]
fn unreadable_input_names_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.log");
    std::fs::write(&path, "INFO  jepsen.util - 3\t:invoke\t:read\tnil\nINFO  jepsen.util - 3\t:ok\t:frob\t7\n")
        .unwrap();
    let (code, _, stderr) = check("register", path.to_str().unwrap());
    assert_eq!(code, 3);
    assert!(stderr.contains("h.log:2:"), "{stderr}");
    assert_eq!(check("register", "/nonexistent").0, 3);
}

#[test]
fn an_exhausted_budget_is_unknown_not_a_guess() {
    let out = faultline()
        .args(["check", "--model", "register", "--budget", "1ns", "fixtures/histories/etcd/etcd_002.log"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains("unknown"));
}

/// Writes a partitioned kv history with `faultline history generate-kv`.
fn generate_kv(dir: &std::path::Path, name: &str, args: &[&str]) -> String {
    let path = dir.join(name).to_str().unwrap().to_string();
    let out = faultline().args(["history", "generate-kv", &path]).args(args).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    path
}

/// The number `text` has right after `marker` (thousands separators and a
/// decimal point allowed).
fn number_after(text: &str, marker: &str) -> f64 {
    let rest = &text[text.find(marker).unwrap_or_else(|| panic!("no {marker:?} in {text}")) + marker.len()..];
    let number: String = rest.chars().take_while(|c| c.is_ascii_digit() || *c == ',' || *c == '.').collect();
    number.replace(',', "").trim_end_matches('.').parse().unwrap_or_else(|_| panic!("{marker:?} in {text}"))
}

/// A limit on the test's own wait that only a hang reaches: how soon after
/// its budget a check ends is the machine's business (a process that is not
/// scheduled cannot stop on time), so the test asserts what faultline
/// decided and recorded instead.
const HANG: std::time::Duration = std::time::Duration::from_secs(30);

/// 50 clients over 20 keys, key "hard" intractable. The keys take turns of
/// 4,096 search steps, so a violation on k7 is the answer while "hard" has
/// had at most one turn more than k7: counted in the steps faultline
/// reports, which a slow machine does not change. Without a violation the
/// budget ends the check as unknown, naming the key, and faultline says
/// when it stopped.
#[test]
fn an_intractable_key_neither_hides_a_violation_nor_overruns_the_budget() {
    let _load = shared();
    let dir = tempfile::tempdir().unwrap();
    let bad = generate_kv(dir.path(), "bad.edn", &["--hard", "24", "--violate", "7"]);
    let (code, stdout, _) = check("kv", &bad);
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("key: k7") && stdout.contains("never-written"), "{stdout}");
    let k7 = number_after(&stdout, "found after ");
    let hard = number_after(&stdout, "key \"hard\" (25 ops) after ");
    assert!(hard > 0.0 && hard < k7 + 4096.0, "{stdout}");

    let hard = generate_kv(dir.path(), "hard.edn", &["--hard", "24"]);
    let started = std::time::Instant::now();
    let out = faultline().args(["check", "--model", "kv", "--budget", "1s", &hard]).output().unwrap();
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    assert!(stdout.contains("time budget of 1s ran out before deciding key \"hard\" (25 ops)"), "{stdout}");
    let stopped = number_after(&stdout, "; stopped after ");
    assert!(stopped <= took.as_secs_f64() && took < HANG, "took {took:?}: {stdout}");

    let out = faultline().args(["check", "--model", "kv", "--memory", "64MiB", &hard]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    assert!(stdout.contains("memory cap of 64 MiB reached: gave up key \"hard\""), "{stdout}");
}

/// `--budget` bounds reading the file too: on a history far too long to read
/// in it, the answer is unknown at the line the budget ended, part-way
/// through the file (a reader that ignored the budget would read it all and
/// leave the search to say the budget ran out).
#[test]
fn the_budget_covers_reading_the_file() {
    let _load = shared();
    let dir = tempfile::tempdir().unwrap();
    let long = generate_kv(dir.path(), "long.edn", &["--ops", "8000"]);
    let lines = std::fs::read_to_string(&long).unwrap().lines().count() as f64;
    let started = std::time::Instant::now();
    let out = faultline().args(["check", "--model", "kv", "--budget", "100ms", &long]).output().unwrap();
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    assert!(stdout.contains("ran out while reading the file"), "{stdout}");
    assert!(number_after(&stdout, "(line ") < lines, "stopped part-way through {lines} lines: {stdout}");
    assert!(number_after(&stdout, "; stopped after ") <= took.as_secs_f64() && took < HANG, "took {took:?}");
    let out = faultline().args(["check", "--model", "kv", "--memory", "1MiB", &long]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    assert!(stdout.contains("memory cap of 1 MiB reached while reading the file"), "{stdout}");
}

/// Input the checker could not read gets exit 3 and its line, never a verdict.
#[test]
fn unreadable_input_is_never_a_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let invoke = "{:process 0, :type :invoke, :f :get, :key \"1\", :value nil}\n";
    let mut random = String::new();
    let mut x: u64 = 7;
    while random.len() < 100_000 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        random.push(if (x >> 20).is_multiple_of(70) { '\n' } else { (b' ' + ((x >> 33) % 95) as u8) as char });
    }
    let cases = [
        ("empty", String::new(), ":1: the file is empty"),
        ("blank", "\n \n".to_string(), ":1: the file holds no operation event"),
        ("random", random, ":"),
        ("truncated", format!("{invoke}{{:process 0, :type :ok, :f :get, :key \"1\"}}\n"), ":2: missing :value"),
        ("cut", format!("{invoke}{{:process 0, :type :ok, :f :get, :key \"1\", :va"), ":2: missing `}`"),
        (
            "tagged",
            format!("{invoke}#foo {{:process 0, :type :ok, :f :get, :key \"1\", :value \"x\"}}\n"),
            ":2: a tagged",
        ),
    ];
    for (name, text, message) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let (code, stdout, stderr) = check("kv", path.to_str().unwrap());
        assert_eq!(code, 3, "{name}: {stdout}{stderr}");
        assert!(stdout.is_empty(), "{name}: {stdout}");
        assert!(stderr.contains(&format!("{name}{message}")), "{name}: {stderr}");
    }
}

/// A reader that goes away (`| head -1`) ends `check` quietly with its
/// verdict's exit code, not a panic.
/// Every printing command: `faultline … | head -1` ends quietly with the
/// command's own exit code.
#[test]
fn a_closed_stdout_is_not_a_panic() {
    let cases: [(&[&str], i32); 5] = [
        (&["check", "--model", "kv", "fixtures/histories/kv/c10-bad.txt"], 1),
        (&["run", "specs/kv-failover.yaml", "--dry-run"], 0),
        (&["validate", "specs/quickstart.yaml"], 0),
        (&["schema"], 0),
        (&["teardown", "--dry-run"], 0),
    ];
    for (args, code) in cases {
        let mut child = faultline()
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
        assert!(stderr.is_empty(), "{args:?}: {stderr}");
    }
}
