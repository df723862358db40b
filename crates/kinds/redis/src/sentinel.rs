//! Finding a Redis primary through Sentinel: `redis+sentinel://` URIs name
//! Sentinels (`host:port`, comma-separated) and a master name, e.g.
//! `redis+sentinel://172.18.0.5:26379,172.18.0.6:26379/mymaster`. Every
//! resolution asks the Sentinels again, in order, with
//! `SENTINEL get-master-addr-by-name`, so a connection opened after a
//! failover goes to the new primary.

use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub const SCHEME: &str = "redis+sentinel://";
pub const DEFAULT_MASTER: &str = "mymaster";
pub const DEFAULT_PORT: u16 = 26379;

/// How long one Sentinel may take to connect and answer before the next one
/// is asked: short, because a paused or cut-off Sentinel never answers and a
/// reconnecting client waits for this in its reconnect loop.
const ASK_TIMEOUT: Duration = Duration::from_millis(500);

/// A parsed `redis+sentinel://` URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentinelUri {
    /// `host:port` of each Sentinel, in the order they are asked.
    pub sentinels: Vec<String>,
    pub master: String,
}

impl SentinelUri {
    /// None when `uri` is not a `redis+sentinel://` URI; an error when it is
    /// one but malformed.
    pub fn parse(uri: &str) -> Option<anyhow::Result<SentinelUri>> {
        let rest = uri.strip_prefix(SCHEME)?;
        Some(Self::parse_rest(rest).with_context(|| format!("invalid sentinel uri `{uri}`")))
    }

    fn parse_rest(rest: &str) -> anyhow::Result<SentinelUri> {
        let (hosts, master) = match rest.split_once('/') {
            Some((hosts, master)) => (hosts, master),
            None => (rest, ""),
        };
        if master.contains(['/', '?', '#', ',']) || master.contains(char::is_whitespace) {
            bail!("the master name `{master}` may not contain `/`, `?`, `#`, `,` or spaces");
        }
        let master = if master.is_empty() { DEFAULT_MASTER } else { master };
        if hosts.contains('@') {
            bail!("Sentinel credentials are not supported");
        }
        let mut sentinels = Vec::new();
        for entry in hosts.split(',') {
            let entry = entry.trim();
            // `host`, `host:port`, `[v6]`, `[v6]:port`.
            let (host, port) = match entry.rsplit_once(':') {
                Some((h, p)) if !p.contains(']') && (!h.contains(':') || h.ends_with(']')) => {
                    (h, p.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| anyhow!("bad port in `{entry}`"))?)
                }
                _ => (entry, DEFAULT_PORT),
            };
            if host.is_empty() || host == "[]" {
                bail!("a Sentinel address is empty: write host:port[,host:port…]/master");
            }
            sentinels.push(format!("{host}:{port}"));
        }
        Ok(SentinelUri { sentinels, master: master.to_string() })
    }

    /// Asks each Sentinel in turn for the master's address (`ip:port`) and
    /// connects to it; the first address whose server says (`ROLE`) it is a
    /// master wins, as the Sentinel client guidelines ask: a Sentinel that
    /// has not seen a failover yet names a server that is a replica now.
    /// Returns the address and the open connection, its `ROLE` reply read.
    /// The error lists what each Sentinel said.
    pub async fn connect_primary(&self) -> anyhow::Result<(String, TcpStream)> {
        let mut failures = Vec::new();
        for s in &self.sentinels {
            let addr = match tokio::time::timeout(ASK_TIMEOUT, ask(s, &self.master)).await {
                Ok(Ok(addr)) => addr,
                Ok(Err(e)) => {
                    failures.push(format!("{s}: {e:#}"));
                    continue;
                }
                Err(_) => {
                    failures.push(format!("{s}: no answer within {}ms", ASK_TIMEOUT.as_millis()));
                    continue;
                }
            };
            match tokio::time::timeout(PRIMARY_TIMEOUT, connect_if_master(&addr)).await {
                Ok(Ok(stream)) => return Ok((addr, stream)),
                Ok(Err(e)) => failures.push(format!("{s} named {addr}: {e:#}")),
                Err(_) => failures.push(format!(
                    "{s} named {addr}, which did not answer ROLE within {}ms",
                    PRIMARY_TIMEOUT.as_millis()
                )),
            }
        }
        bail!("no Sentinel named a primary of `{}`: {}", self.master, failures.join("; "))
    }
}

/// How long connecting to the named primary and its `ROLE` answer may take:
/// one named just before it was cut off must not stall a reconnect loop for
/// the kernel's SYN retries.
const PRIMARY_TIMEOUT: Duration = Duration::from_secs(1);

/// A connection to `addr` once its server says it is a master, with the
/// whole `ROLE` reply read (nothing of it is left for the next reader).
async fn connect_if_master(addr: &str) -> anyhow::Result<TcpStream> {
    let mut stream = TcpStream::connect(addr).await.context("cannot connect")?;
    stream.write_all(b"*1\r\n$4\r\nROLE\r\n").await?;
    let mut reply = Vec::with_capacity(256);
    let mut buf = [0u8; 1024];
    let len = loop {
        if let Some(len) = super::skip_reply(&reply, 0).map_err(|e| anyhow!("answered ROLE with {e}"))? {
            break len;
        }
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            bail!("closed the connection without answering ROLE");
        }
        reply.extend_from_slice(&buf[..n]);
        if reply.len() > 1 << 20 {
            bail!("answered ROLE with more than 1MiB");
        }
    };
    // Replies come only to requests, so nothing can follow ROLE's.
    if len != reply.len() {
        bail!("sent more than its ROLE reply");
    }
    match role_of(&reply) {
        Some(b"master") => Ok(stream),
        Some(role) => bail!("which says it is a {} now (ROLE)", String::from_utf8_lossy(role)),
        None => bail!("which answered ROLE with `{}`", String::from_utf8_lossy(&reply).trim_end()),
    }
}

/// The first element of a `ROLE` reply (`*3\r\n$6\r\nmaster\r\n…`).
fn role_of(reply: &[u8]) -> Option<&[u8]> {
    let rest = reply.strip_prefix(b"*")?;
    let rest = &rest[rest.windows(2).position(|w| w == b"\r\n")? + 2..];
    let rest = rest.strip_prefix(b"$")?;
    let header = rest.windows(2).position(|w| w == b"\r\n")?;
    let len: usize = std::str::from_utf8(&rest[..header]).ok()?.parse().ok()?;
    rest.get(header + 2..header + 2 + len)
}

/// `redis+sentinel://a:1,b:2/master`.
pub fn format_uri(sentinels: &[String], master: &str) -> String {
    format!("{SCHEME}{}/{master}", sentinels.join(","))
}

/// One `SENTINEL get-master-addr-by-name` round trip.
async fn ask(sentinel: &str, master: &str) -> anyhow::Result<String> {
    let mut stream = TcpStream::connect(sentinel).await.context("cannot connect")?;
    let mut request = Vec::with_capacity(64 + master.len());
    for (i, part) in ["SENTINEL", "get-master-addr-by-name", master].iter().enumerate() {
        if i == 0 {
            request.extend_from_slice(b"*3\r\n");
        }
        request.extend_from_slice(format!("${}\r\n{part}\r\n", part.len()).as_bytes());
    }
    stream.write_all(&request).await?;
    let mut reply = Vec::with_capacity(128);
    let mut buf = [0u8; 512];
    loop {
        if let Some(answer) = parse_master_reply(&reply)? {
            return answer.ok_or_else(|| anyhow!("does not know a master named `{master}`"));
        }
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            bail!("closed the connection without an answer");
        }
        reply.extend_from_slice(&buf[..n]);
        if reply.len() > 64 * 1024 {
            bail!("answered with more than 64KiB");
        }
    }
}

/// The reply to `get-master-addr-by-name`: `Ok(None)` while incomplete,
/// `Ok(Some(None))` for a nil (unknown master), else `ip:port`.
fn parse_master_reply(input: &[u8]) -> anyhow::Result<Option<Option<String>>> {
    let line = |from: usize| -> Option<(&[u8], usize)> {
        let end = input.get(from..)?.windows(2).position(|w| w == b"\r\n")? + from;
        Some((&input[from..end], end + 2))
    };
    let Some((first, mut pos)) = line(0) else { return Ok(None) };
    match first {
        [b'-', message @ ..] => bail!("error: {}", String::from_utf8_lossy(message)),
        b"*-1" | b"$-1" | b"_" => return Ok(Some(None)),
        b"*2" => {}
        other => bail!("unexpected answer `{}`", String::from_utf8_lossy(other)),
    }
    let mut parts = Vec::with_capacity(2);
    for _ in 0..2 {
        let Some((header, after)) = line(pos) else { return Ok(None) };
        let len: usize = header
            .strip_prefix(b"$")
            .and_then(|l| std::str::from_utf8(l).ok()?.parse().ok())
            .ok_or_else(|| anyhow!("unexpected element `{}`", String::from_utf8_lossy(header)))?;
        if input.len() < after + len + 2 {
            return Ok(None);
        }
        parts.push(String::from_utf8_lossy(&input[after..after + len]).into_owned());
        pos = after + len + 2;
    }
    let (host, port) = (&parts[0], &parts[1]);
    port.parse::<u16>().map_err(|_| anyhow!("answered with a bad port `{port}`"))?;
    Ok(Some(Some(if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") })))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(uri: &str) -> anyhow::Result<SentinelUri> {
        SentinelUri::parse(uri).expect("a sentinel uri")
    }

    #[test]
    fn parses_sentinel_uris() {
        assert!(SentinelUri::parse("redis://127.0.0.1:6379").is_none(), "plain redis URIs are left alone");
        let u = parse("redis+sentinel://172.18.0.5:26379,172.18.0.6:26380/kv").unwrap();
        assert_eq!(u.sentinels, ["172.18.0.5:26379", "172.18.0.6:26380"]);
        assert_eq!(u.master, "kv");
        let u = parse("redis+sentinel://s1,s2:1/").unwrap();
        assert_eq!(
            (u.sentinels.as_slice(), u.master.as_str()),
            (&["s1:26379".to_string(), "s2:1".into()][..], "mymaster")
        );
        assert_eq!(parse("redis+sentinel://[::1]:5,[::2]/m").unwrap().sentinels, ["[::1]:5", "[::2]:26379"]);
        assert_eq!(parse("redis+sentinel://h").unwrap().master, "mymaster");
        let u = SentinelUri { sentinels: vec!["a:1".into(), "b:2".into()], master: "kv".into() };
        assert_eq!(parse(&format_uri(&u.sentinels, &u.master)).unwrap(), u, "round trip");

        let err = |uri: &str| format!("{:#}", parse(uri).unwrap_err());
        assert!(err("redis+sentinel://h:0/m").contains("bad port in `h:0`"), "{}", err("redis+sentinel://h:0/m"));
        assert!(err("redis+sentinel://h:x/m").contains("bad port"));
        assert!(err("redis+sentinel://a,,b/m").contains("empty"));
        assert!(err("redis+sentinel:///m").contains("empty"));
        assert!(err("redis+sentinel://h/m/0").contains("may not contain"));
        assert!(err("redis+sentinel://u:p@h/m").contains("credentials"));
        assert!(err("redis+sentinel://h:x/m").contains("invalid sentinel uri `redis+sentinel://h:x/m`"));
    }

    #[test]
    fn reads_get_master_addr_by_name_replies() {
        let ok = |s: &str| Some(Some(s.to_string()));
        assert_eq!(parse_master_reply(b"*2\r\n$10\r\n172.18.0.2\r\n$4\r\n6379\r\n").unwrap(), ok("172.18.0.2:6379"));
        assert_eq!(parse_master_reply(b"*2\r\n$3\r\n::1\r\n$4\r\n6379\r\n").unwrap(), ok("[::1]:6379"));
        assert_eq!(parse_master_reply(b"*-1\r\n").unwrap(), Some(None));
        assert_eq!(parse_master_reply(b"_\r\n").unwrap(), Some(None));
        for partial in [&b""[..], b"*2\r", b"*2\r\n$10\r\n172.18", b"*2\r\n$10\r\n172.18.0.2\r\n$4\r\n63"] {
            assert_eq!(parse_master_reply(partial).unwrap(), None, "{}", String::from_utf8_lossy(partial));
        }
        let err = parse_master_reply(b"-ERR unknown command\r\n").unwrap_err().to_string();
        assert!(err.contains("ERR unknown command"), "{err}");
        assert!(parse_master_reply(b"+OK\r\n").is_err());
        assert!(parse_master_reply(b"*2\r\n$1\r\na\r\n$1\r\nx\r\n").unwrap_err().to_string().contains("bad port"));
    }

    /// A real redis-server (a Sentinel with `--sentinel`), killed on drop.
    struct Server {
        child: std::process::Child,
        _dir: tempfile::TempDir,
    }

    impl Server {
        fn start(port: u16, conf: &str, sentinel: bool) -> Server {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("redis.conf");
            std::fs::write(
                &path,
                format!("port {port}\nbind 127.0.0.1\nsave \"\"\ndir {}\n{conf}", dir.path().display()),
            )
            .unwrap();
            let mut cmd = std::process::Command::new("redis-server");
            cmd.arg(&path).stdout(std::process::Stdio::null());
            if sentinel {
                cmd.arg("--sentinel");
            }
            let server = Server { child: cmd.spawn().expect("redis-server is installed"), _dir: dir };
            let up = std::time::Instant::now();
            while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
                assert!(up.elapsed() < Duration::from_secs(10), "redis-server on {port} did not come up");
                std::thread::sleep(Duration::from_millis(20));
            }
            server
        }
    }

    impl Drop for Server {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    fn free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
    }

    /// Sentinels are asked in order; one that refuses the connection and one
    /// that never answers are skipped, and the real Sentinel after them names
    /// the real primary, whose connection is handed over ready for the load.
    #[test]
    fn asks_the_sentinels_in_order_and_skips_silent_ones() {
        let primary_port = free_port();
        let _primary = Server::start(primary_port, "", false);
        let sentinel_port = free_port();
        let _sentinel =
            Server::start(sentinel_port, &format!("sentinel monitor kv 127.0.0.1 {primary_port} 1\n"), true);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let refused = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let refused_addr = refused.local_addr().unwrap().to_string();
            drop(refused);
            // The kernel accepts its connections, but nothing ever answers.
            let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let uri = format_uri(
                &[refused_addr, silent.local_addr().unwrap().to_string(), format!("127.0.0.1:{sentinel_port}")],
                "kv",
            );
            let started = tokio::time::Instant::now();
            let (addr, mut stream) = SentinelUri::parse(&uri).unwrap().unwrap().connect_primary().await.unwrap();
            assert_eq!(addr, format!("127.0.0.1:{primary_port}"));
            // Skipped after its ASK_TIMEOUT, not waited on forever; how soon
            // after it is the machine's business, so the bound only catches
            // a hang.
            assert!(started.elapsed() < ASK_TIMEOUT * 20, "{:?}", started.elapsed());
            stream.write_all(b"PING\r\n").await.unwrap();
            let mut reply = [0u8; 7];
            stream.read_exact(&mut reply).await.unwrap();
            assert_eq!(&reply, b"+PONG\r\n");

            let none = format_uri(&["127.0.0.1:1".into()], "kv");
            let err = format!("{:#}", SentinelUri::parse(&none).unwrap().unwrap().connect_primary().await.unwrap_err());
            assert!(err.contains("no Sentinel named a primary of `kv`: 127.0.0.1:1: cannot connect"), "{err}");
            // What skipping the silent one looks like when it is alone: given
            // up at its ASK_TIMEOUT, and said so.
            let alone = format_uri(&[silent.local_addr().unwrap().to_string()], "kv");
            let err =
                format!("{:#}", SentinelUri::parse(&alone).unwrap().unwrap().connect_primary().await.unwrap_err());
            assert!(err.ends_with(": no answer within 500ms"), "{err}");
        });
    }

    #[test]
    fn reads_the_role_from_a_role_reply() {
        assert_eq!(role_of(b"*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n"), Some(&b"master"[..]));
        assert_eq!(role_of(b"*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:6379\r\n"), Some(&b"slave"[..]));
        assert_eq!(role_of(b"-ERR unknown command\r\n"), None);
        assert_eq!(role_of(b"*1\r\n$9\r\nmas"), None);
    }
}
