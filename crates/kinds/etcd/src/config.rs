//! A member's Raft timing as it was started: etcd serves its own command
//! line at `/debug/vars` on the client port (Go's expvar), from which the
//! election timeout and heartbeat interval are read for the report's
//! provenance (etcd's defaults where the flags are absent; settings given
//! through the environment are not seen there). Read with [`http_get`].

use std::time::Duration;

use anyhow::Context;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The most of the answer read: the command line comes first, and memstats after it are large.
const MOST: u64 = 1 << 20;

/// etcd's own defaults, in milliseconds.
const DEFAULT_ELECTION_MS: u64 = 1000;
const DEFAULT_HEARTBEAT_MS: u64 = 100;

/// `election timeout 1000 ms, heartbeat 100 ms` of the member at `host_port`.
pub async fn raft_timing(host_port: &str, limit: Duration) -> anyhow::Result<String> {
    // The command line comes first: an answer cut at MOST still holds it.
    let (body, _) = http_get(host_port, "/debug/vars", MOST, limit).await?;
    let (election, heartbeat) = timing(&body).context("/debug/vars has no command line")?;
    Ok(format!("election timeout {election} ms, heartbeat {heartbeat} ms"))
}

/// The body of `path` on a member's client port, at most `most` bytes of
/// the answer, within `limit`, and whether that was the whole answer. One
/// plain HTTP/1.0 GET: a few admin requests per run, no HTTP client crate
/// needed for them.
pub async fn http_get(host_port: &str, path: &str, most: u64, limit: Duration) -> anyhow::Result<(String, bool)> {
    let read = async {
        let mut stream = tokio::net::TcpStream::connect(host_port).await?;
        stream.write_all(format!("GET {path} HTTP/1.0\r\nHost: {host_port}\r\n\r\n").as_bytes()).await?;
        let mut answer = Vec::new();
        stream.take(most).read_to_end(&mut answer).await?;
        anyhow::Ok(answer)
    };
    let answer = tokio::time::timeout(limit, read).await.context("no answer in time")??;
    let whole = (answer.len() as u64) < most;
    let text = String::from_utf8_lossy(&answer);
    let (head, body) = text.split_once("\r\n\r\n").context("not an HTTP answer")?;
    let status = head.lines().next().unwrap_or_default();
    anyhow::ensure!(status.split_whitespace().nth(1) == Some("200"), "GET {path}: {status}");
    Ok((body.to_string(), whole))
}

/// The election timeout and heartbeat (ms) in the `cmdline` of a
/// `/debug/vars` answer, which may be cut short after it.
fn timing(body: &str) -> Option<(u64, u64)> {
    let start = body.find("\"cmdline\":")? + "\"cmdline\":".len();
    let end = start + body[start..].find(']')? + 1;
    let args: Vec<String> = serde_json::from_str(body[start..end].trim()).ok()?;
    let flag = |name: &str, default: u64| {
        let long = format!("--{name}");
        let short = format!("-{name}");
        args.iter()
            .enumerate()
            .filter_map(|(i, a)| match a.split_once('=') {
                Some((f, v)) if f == long || f == short => v.parse().ok(),
                None if *a == long || *a == short => args.get(i + 1)?.parse().ok(),
                _ => None,
            })
            .next_back()
            .unwrap_or(default)
    };
    Some((flag("election-timeout", DEFAULT_ELECTION_MS), flag("heartbeat-interval", DEFAULT_HEARTBEAT_MS)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_gives_the_timing_and_the_last_flag_wins() {
        let body = r#"{
"cmdline": ["etcd","--name","m0","--election-timeout","1500","--heartbeat-interval=150","--election-timeout","2000"],
"memstats": {"Alloc": 1"#;
        assert_eq!(timing(body), Some((2000, 150)));
        assert_eq!(timing(r#"{"cmdline": ["etcd"]}"#), Some((DEFAULT_ELECTION_MS, DEFAULT_HEARTBEAT_MS)));
        assert_eq!(timing("{}"), None);
    }
}
