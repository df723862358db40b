//! Credentials never reach an artefact: each target kind runs with
//! credentials against a real server (redis-server with `requirepass`, moto
//! with a distinctive secret key, secantusd-rs with a URI carrying a user and
//! password), and every file the run wrote, the JUnit file, the step summary
//! and the console are searched for them.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::support::*;

/// A run with `--junit` and `$GITHUB_STEP_SUMMARY`, so every artefact exists.
struct Written {
    code: i32,
    console: String,
    out: tempfile::TempDir,
}

fn run_with_every_artefact(spec: &Path) -> Written {
    let out = tempfile::tempdir().unwrap();
    let output = faultline()
        .arg("run")
        .arg(spec)
        .arg("--out")
        .arg(out.path().join("runs"))
        .arg("--junit")
        .arg(out.path().join("junit.xml"))
        .env("GITHUB_STEP_SUMMARY", out.path().join("summary.md"))
        .output()
        .unwrap();
    let console = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    Written { code: output.status.code().unwrap(), console, out }
}

impl Written {
    fn run_dir(&self) -> PathBuf {
        run_dir(&self.out.path().join("runs")).expect("a run directory")
    }

    fn results(&self) -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(self.run_dir().join("results.json")).unwrap()).unwrap()
    }

    /// Every file under the output folder (the run directory, JUnit, the
    /// summary) and the console: none may hold `secret`. Returns how many
    /// files were searched.
    fn assert_nowhere(&self, secret: &str) -> usize {
        assert!(!self.console.contains(secret), "the console shows {secret}:\n{}", self.console);
        let mut files = Vec::new();
        walk(self.out.path(), &mut files);
        for file in &files {
            let bytes = std::fs::read(file).unwrap();
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "{} holds {secret}:\n{}",
                file.display(),
                String::from_utf8_lossy(&bytes).chars().take(3000).collect::<String>()
            );
        }
        for expected in ["results.json", "report.md", "spec.yaml", "run.log", "junit.xml", "summary.md"] {
            assert!(files.iter().any(|f| f.ends_with(expected)), "{expected} was not written: {files:?}");
        }
        files.len()
    }
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            walk(&path, files);
        } else {
            files.push(path);
        }
    }
}

/// A server the test runs, killed when dropped.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_listening(port: u16) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(std::time::Instant::now() < deadline, "nothing listens on {port}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn one_cell(target: &str, checkers: &str) -> String {
    format!(
        r#"name: secrets
targets:
  db: {target}
workloads:
  w: {{ops: {{get: 1, set: 1}}, keys: {{count: 50}}}}
profiles:
  p: {{closed: 1x2}}
timing: {{warmup: 0s, duration: 1s}}
checkers: [{checkers}]
scenarios:
  - {{name: s, target: db, workload: w, profiles: [p]}}
gates:
  ok: errors == 0
"#
    )
}

#[test]
fn a_redis_password_in_the_uri_and_the_servers_arguments_is_in_no_artefact() {
    let _load = shared();
    let password = "redis-Pw-7f3a9c21";
    let port = free_port();
    let _server = Server(
        Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--requirepass", password])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_listening(port);
    let target = format!(r#"{{kind: redis, provider: external, uri: "redis://:{password}@127.0.0.1:{port}/0"}}"#);
    let (_d, spec) = spec_file(&one_cell(&target, "lost-acknowledged-write"));
    let written = run_with_every_artefact(&spec);
    assert_eq!(written.code, 0, "{}", written.console);
    // The password was used: the load was served and the final read made.
    let r = written.results();
    assert!(r["cells"][0]["stats"]["ok"].as_u64().unwrap() > 10, "{}", r["cells"][0]["stats"]);
    assert_eq!(r["targets"][0]["uri"], format!("redis://:REDACTED@127.0.0.1:{port}/0"));
    assert!(written.assert_nowhere(password) >= 6);

    // A process target given the password as an argument: the spec copy, the
    // provenance of its command line and the report name it redacted. The
    // server refuses the unauthenticated probe, so the run is INCOMPLETE.
    let target = format!("{{kind: redis, provider: process, args: [--requirepass, {password}], ready_timeout: 2s}}");
    let (_d, spec) = spec_file(&one_cell(&target, ""));
    let written = run_with_every_artefact(&spec);
    assert_eq!(written.code, 2, "{}", written.console);
    written.assert_nowhere(password);
    let copy = std::fs::read_to_string(written.run_dir().join("spec.yaml")).unwrap();
    assert!(copy.contains("--requirepass, REDACTED"), "{copy}");
}

#[test]
fn a_dynamodb_secret_key_and_session_token_are_in_no_artefact() {
    let _load = shared();
    let (secret, token) = ("dynamo-Secret-5be1d0e9/+x", "dynamo-Token-0c44aa17");
    let target = format!(
        "{{kind: dynamodb, provider: process, ready_timeout: 30s, options: {{table: {{name: secret-test}}, \
         credentials: {{access_key_id: AKIDSECRETTEST, secret_access_key: \"{secret}\", session_token: {token}}}}}}}"
    );
    let (_d, spec) = spec_file(&one_cell(&target, "lost-acknowledged-write"));
    let written = run_with_every_artefact(&spec);
    assert_eq!(written.code, 0, "{}", written.console);
    assert!(written.results()["cells"][0]["stats"]["ok"].as_u64().unwrap() > 10);
    written.assert_nowhere(secret);
    written.assert_nowhere(token);
    // The access key id names who signed, and is no secret.
    let copy = std::fs::read_to_string(written.run_dir().join("spec.yaml")).unwrap();
    assert!(copy.contains("AKIDSECRETTEST") && copy.contains("secret_access_key: \"REDACTED\""), "{copy}");
}

#[test]
fn a_mongodb_uri_with_a_user_and_password_is_in_no_artefact() {
    let _load = shared();
    let password = "mongo-Pw-93ad11e4";
    let data = tempfile::tempdir().unwrap();
    let port = free_port();
    let _server = Server(
        Command::new("secantusd-rs")
            .args(["--port", &port.to_string(), "--storage-path"])
            .arg(data.path().join("db"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("secantusd-rs is installed (scripts/install-deps.sh all)"),
    );
    wait_listening(port);
    let target = format!(
        r#"{{kind: mongodb, provider: external, ready_timeout: 120s, uri: "mongodb://alice:{password}@127.0.0.1:{port}/?directConnection=true", options: {{database: fl_secret}}}}"#
    );
    let (_d, spec) = spec_file(&one_cell(&target, ""));
    let written = run_with_every_artefact(&spec);
    // secantusd-rs has no user alice: a refusal ends readiness at once (the
    // 120 s ready_timeout is never waited out) with the server's words.
    assert_eq!(written.code, 2, "{}", written.console);
    assert!(written.console.contains("refused the credentials"), "{}", written.console);
    written.assert_nowhere(password);
    let r = written.results();
    let shown = format!("{}{}", r["targets"], r["errors"]);
    assert!(shown.contains("mongodb://alice:REDACTED@"), "{shown}");
}
