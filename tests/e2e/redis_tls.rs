//! Redis as production runs it: TLS (`rediss://`) and an ACL user, against
//! Debian's redis-server started with `--tls-port` and certificates this
//! test makes with `openssl` (a CA, and a server certificate it signed for
//! 127.0.0.1). The user may only GET, SET and what the probes and the final
//! read need; its INCRs are refused, and a refused command is an error
//! faultline classifies with the server's own words. A wrong password, or a
//! server certificate nobody vouched for, ends readiness at once; so does a
//! server that requires a client certificate when none is given.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::support::*;

/// A CA, and a server certificate (for 127.0.0.1) and a client certificate
/// it signed, in `dir`.
fn certificates(dir: &Path) {
    // Extensions make them X.509 v3 certificates, the only version rustls takes.
    std::fs::write(dir.join("san.ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
    for command in [
        "req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=faultline-test-CA -keyout ca.key -out ca.crt",
        "req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout server.key -out server.csr",
        "x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile san.ext -out server.crt",
        "req -newkey rsa:2048 -nodes -subj /CN=faultline -keyout client.key -out client.csr",
        "x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile client.ext -out client.crt",
    ] {
        let out = Command::new("openssl")
            .args(command.split_whitespace())
            .current_dir(dir)
            .output()
            .expect("openssl is installed (scripts/install-deps.sh)");
        assert!(out.status.success(), "openssl {command}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

/// redis-server with TLS only (no plain port) and the ACL user `bench`.
struct TlsRedis {
    port: u16,
    child: std::process::Child,
    dir: tempfile::TempDir,
}

impl TlsRedis {
    /// With `client_certificates`, the server requires a certificate its CA
    /// signed from every client (`tls-auth-clients yes`).
    fn start(client_certificates: bool) -> TlsRedis {
        let dir = tempfile::tempdir().unwrap();
        certificates(dir.path());
        let port = free_port();
        let child = Command::new("redis-server")
            .args(["--port", "0", "--tls-port", &port.to_string(), "--bind", "127.0.0.1", "--save", ""])
            .args(["--tls-cert-file", "server.crt", "--tls-key-file", "server.key", "--tls-ca-cert-file", "ca.crt"])
            .args(["--tls-auth-clients", if client_certificates { "yes" } else { "no" }, "--dir"])
            .arg(dir.path())
            // GET and SET for the load; PING and INFO for readiness, MGET
            // for the final read, CLIENT for the driver's own setup.
            .args(["--user", "bench", "on", ">bench-pw", "~*", "+get", "+set", "+mget", "+ping", "+info", "+client"])
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server is installed");
        let server = TlsRedis { port, child, dir };
        assert!(wait_until(std::time::Duration::from_secs(20), || std::net::TcpStream::connect(("127.0.0.1", port))
            .is_ok()));
        server
    }

    fn file(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    fn ca(&self) -> String {
        self.file("ca.crt")
    }
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const GET_SET: &str = "{get: 1, set: 1}";
const INCR_TOO: &str = "{get: 4, set: 4, incr: 1}";

/// One cell on the server; `ops` and `checkers` as YAML flow.
fn spec(uri: &str, options: &str, ready_timeout: &str, ops: &str, checkers: &str) -> String {
    format!(
        r#"name: redis-tls
targets:
  db: {{kind: redis, provider: external, uri: "{uri}", ready_timeout: {ready_timeout}, options: {options}}}
workloads:
  w: {{ops: {ops}, keys: {{count: 200}}}}
profiles:
  p: {{closed: 1x4}}
timing: {{warmup: 0s, duration: 2s}}
checkers: {checkers}
scenarios:
  - {{name: s, target: db, workload: w, profiles: [p]}}
gates:
  served: ops > 0
"#
    )
}

#[test]
fn a_campaign_over_tls_as_an_acl_user_is_served_and_its_refused_commands_are_classified() {
    let _load = shared();
    let server = TlsRedis::start(false);
    let uri = format!("rediss://bench:bench-pw@127.0.0.1:{}", server.port);
    let (_d, path) = spec_file(&spec(&uri, &format!("{{ca_file: \"{}\"}}", server.ca()), "20s", INCR_TOO, "[]"));
    let served = run(&path, &[]);
    assert_eq!(served.code(), 0, "{}", served.stderr());
    let cell = &served.results()["cells"][0];
    assert_eq!(cell["status"], "completed", "{cell}");
    // Gets and sets went over TLS as bench.
    for op in ["get", "set"] {
        assert!(cell["stats"]["per_op"][op]["ok"].as_u64().unwrap() > 0, "{op}: {}", cell["stats"]["per_op"]);
        assert_eq!(cell["stats"]["per_op"][op]["failed"], 0, "{op}: {}", cell["stats"]["per_op"]);
    }
    // Every INCR was refused, counted under the server's error code, with its words.
    let incr = &cell["stats"]["per_op"]["incr"];
    assert!(incr["failed"].as_u64().unwrap() > 0 && incr["ok"] == 0, "{incr}");
    let labels = cell["stats"]["error_labels"].as_array().unwrap();
    let noperm = labels.iter().find(|l| l["label"].as_str().unwrap().contains("NOPERM")).expect("a NOPERM label");
    assert_eq!(noperm["count"], incr["failed"], "{labels:?}");
    let example = noperm["examples"][0].as_str().unwrap();
    assert!(example.contains("has no permissions to run the 'incr' command"), "{example}");
}

#[test]
fn a_wrong_password_or_an_untrusted_certificate_ends_readiness_at_once() {
    let _load = shared();
    let server = TlsRedis::start(false);
    // The ready timeout is never waited out: the refusal is final.
    let uri = format!("rediss://bench:not-the-pw@127.0.0.1:{}", server.port);
    let (_d, path) = spec_file(&spec(&uri, &format!("{{ca_file: \"{}\"}}", server.ca()), "300s", GET_SET, "[]"));
    let wrong_password = run(&path, &[]);
    assert_eq!(wrong_password.code(), 2, "{}", wrong_password.stderr());
    let said = wrong_password.stderr();
    assert!(said.contains("refused faultline") && said.contains("WRONGPASS"), "{said}");

    // The system's roots do not vouch for the test CA.
    let uri = format!("rediss://bench:bench-pw@127.0.0.1:{}", server.port);
    let (_d, path) = spec_file(&spec(&uri, "{}", "300s", GET_SET, "[]"));
    let untrusted = run(&path, &[]);
    assert_eq!(untrusted.code(), 2, "{}", untrusted.stderr());
    let said = untrusted.stderr();
    assert!(said.contains("refused faultline") && said.contains("ca_file"), "{said}");

    // `insecure: true` accepts the certificate unchecked, and the campaign runs.
    let (_d, path) = spec_file(&spec(&uri, "{insecure: true}", "20s", GET_SET, "[lost-acknowledged-write]"));
    let insecure = run(&path, &[]);
    assert_eq!(insecure.code(), 0, "{}", insecure.stderr());
    let cell = &insecure.results()["cells"][0];
    assert!(cell["stats"]["per_op"]["set"]["ok"].as_u64().unwrap() > 0, "{cell}");
    // The checker's final read (MGET) went over TLS too, and judged the writes.
    let check = &cell["checks"][0];
    assert_eq!(check["status"], "ok", "{check}");
    assert!(check["checked"].as_u64().unwrap() > 0, "{check}");
}

#[test]
fn a_server_that_requires_a_client_certificate_gets_the_one_given_and_refuses_none_at_once() {
    let _load = shared();
    let server = TlsRedis::start(true);
    let uri = format!("rediss://bench:bench-pw@127.0.0.1:{}", server.port);
    let (_d, path) = spec_file(&spec(&uri, &format!("{{ca_file: \"{}\"}}", server.ca()), "300s", GET_SET, "[]"));
    let without = run(&path, &[]);
    assert_eq!(without.code(), 2, "{}", without.stderr());
    let said = without.stderr();
    assert!(said.contains("refused faultline") && said.contains("client certificate"), "{said}");

    let options = format!(
        "{{ca_file: \"{}\", cert_file: \"{}\", key_file: \"{}\"}}",
        server.ca(),
        server.file("client.crt"),
        server.file("client.key")
    );
    let (_d, path) = spec_file(&spec(&uri, &options, "20s", GET_SET, "[lost-acknowledged-write]"));
    let with = run(&path, &[]);
    assert_eq!(with.code(), 0, "{}", with.stderr());
    let cell = &with.results()["cells"][0];
    assert!(cell["stats"]["per_op"]["get"]["ok"].as_u64().unwrap() > 0, "{cell}");
    assert_eq!(cell["checks"][0]["status"], "ok", "{}", cell["checks"]);
}

/// The connection mistakes a user makes first, each said at once with what
/// to dial instead (the ready timeout is never waited out): `redis://` to a
/// TLS port, `rediss://` to a plain one, and a name the server's
/// certificate does not hold.
#[test]
fn a_wrong_scheme_or_name_says_what_to_dial_at_once() {
    let _load = shared();
    let server = TlsRedis::start(false);
    let options = format!("{{ca_file: \"{}\"}}", server.ca());
    let refused = |uri: &str, options: &str| {
        let (_d, path) = spec_file(&spec(uri, options, "300s", GET_SET, "[]"));
        let run = run(&path, &[]);
        assert_eq!(run.code(), 2, "{}", run.stderr());
        run.stderr()
    };
    let said = refused(&format!("redis://bench:bench-pw@127.0.0.1:{}", server.port), "{}");
    assert!(said.contains("speaks TLS, not plain RESP") && said.contains("use `rediss://"), "{said}");
    let said = refused(&format!("rediss://bench:bench-pw@localhost:{}", server.port), &options);
    assert!(said.contains("certificate is for 127.0.0.1, not `localhost`"), "{said}");
    assert!(said.contains("dial `127.0.0.1`"), "{said}");
    let plain_port = free_port();
    let mut plain = Command::new("redis-server")
        .args(["--port", &plain_port.to_string(), "--bind", "127.0.0.1", "--save", ""])
        .stdout(Stdio::null())
        .spawn()
        .expect("redis-server is installed");
    assert!(wait_until(std::time::Duration::from_secs(20), || std::net::TcpStream::connect(("127.0.0.1", plain_port))
        .is_ok()));
    let said = refused(&format!("rediss://127.0.0.1:{plain_port}"), &options);
    let _ = plain.kill();
    let _ = plain.wait();
    assert!(said.contains("answers plain RESP, not TLS") && said.contains("use `redis://127.0.0.1"), "{said}");
}
