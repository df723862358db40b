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
