//! Redis and Redis-compatible servers. Probing uses the `redis` crate; the
//! load path speaks RESP directly (see [`Resp`]) because the crate's
//! multiplexed connection measured 0.22x redis-benchmark's throughput at
//! pipeline depth 16 (a channel hop, a boxed future and an allocated command
//! per op), which would make the load generator the bottleneck.
//!
//! `rediss://` URIs connect over TLS (see [`tls`]); a URI's user, password
//! and database apply to every connection, the load's included.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use anyhow::Context;
use redis::AsyncConnectionConfig;
use tokio::net::TcpStream;

mod failover;
pub mod options;
mod sentinel;
mod tls;
mod topology;

use faultline_kind::fanout::{PubSub, Pushed};
use faultline_kind::registry::{parse_options, Kind};
use faultline_kind::workload::{Op, Workload};
use faultline_kind::{
    Connection, PipelinedConnection, Refused, Reply, ReplyValue, ServerInfo, Stream, TargetDriver, WireProtocol,
};
use faultline_model::ops::OpKind;
use faultline_model::stats::ErrorClass;
use faultline_spec::KindCost;
pub use options::RedisOptions;
use sentinel::SentinelUri;
use tls::Tls;

/// The kind as the build registers it (the CLI's `kinds::KINDS`).
pub const KIND: Kind = Kind {
    name: "redis",
    driver: |options| {
        let options: RedisOptions = parse_options(options)?;
        options.check().map_err(|(field, e)| (field.to_string(), e))?;
        let tls = OnceLock::new();
        // Files named in the options are read now, so a missing CA is a
        // spec error at its field rather than a target that never gets ready.
        if options.tls_field().is_some() {
            let _ = tls.set(Tls::new(&options)?);
        }
        Ok(Arc::new(RedisDriver { options, tls }))
    },
    members: Some(|| Arc::new(topology::RedisTopology)),
    options: Some(|generator| generator.subschema_for::<RedisOptions>()),
    faults: Vec::new,
    remove_listed: None,
};

pub struct RedisDriver {
    options: RedisOptions,
    /// Built with the options when they set TLS, else at the first
    /// `rediss://` connection (the system's roots).
    tls: OnceLock<Tls>,
}

impl RedisDriver {
    /// The TLS of this target's `rediss://` connections.
    fn tls(&self) -> anyhow::Result<&Tls> {
        if let Some(tls) = self.tls.get() {
            return Ok(tls);
        }
        // Options that cannot make a config now will not later either.
        let made = Tls::new(&self.options).map_err(|(_, e)| anyhow::Error::new(Refused(format!("TLS: {e}"))))?;
        Ok(self.tls.get_or_init(|| made))
    }

    /// A RESP connection to the server `uri` names, authenticated and on
    /// its database; true when the Sentinels named the server.
    async fn dial(&self, uri: &str) -> anyhow::Result<(Stream, bool)> {
        let (info, host, port, tls) = match Target::parse(uri)? {
            Target::Sentinel(sentinel) => {
                // Asked again on every (re)connect: after a failover this is the new primary.
                let (_, stream) = sentinel.connect_primary().await?;
                stream.set_nodelay(true)?;
                return Ok((Stream::Tcp(stream), true));
            }
            Target::Plain(info) => match info.addr() {
                redis::ConnectionAddr::Tcp(host, port) => (info.clone(), host.clone(), *port, false),
                _ => unreachable!("Target::parse keeps only TCP addresses"),
            },
            Target::Tls { info, host, port } => (info, host, port, true),
        };
        let addr = format!("{host}:{port}");
        let tcp = TcpStream::connect(&addr).await.with_context(|| format!("cannot connect to {addr}"))?;
        // Small requests must leave at once, not wait for Nagle's timer.
        tcp.set_nodelay(true)?;
        let mut stream = match tls {
            true => Stream::Wrapped(Box::new(self.tls()?.wrap(tcp, &host).await?)),
            false => Stream::Tcp(tcp),
        };
        // The URI's credentials and database apply to the load too, so the
        // checkers' final read sees what the load wrote.
        let settings = info.redis_settings();
        let mut setup: Vec<Vec<&[u8]>> = Vec::new();
        let db = settings.db().to_string();
        match (settings.username(), settings.password()) {
            (Some(user), Some(pass)) => setup.push(vec![b"AUTH", user.as_bytes(), pass.as_bytes()]),
            (None, Some(pass)) => setup.push(vec![b"AUTH", pass.as_bytes()]),
            _ => {}
        }
        if settings.db() != 0 {
            setup.push(vec![b"SELECT", db.as_bytes()]);
        }
        for command in setup {
            handshake(&mut stream, &command).await.with_context(|| format!("setting up a connection to {addr}"))?;
        }
        Ok((stream, false))
    }

    /// One round trip that succeeds only when the server would serve the
    /// load ([`TargetDriver::ready`] without its diagnosis).
    async fn probe(&self, uri: &str) -> anyhow::Result<ServerInfo> {
        // A connection of the load's own first: a refusal of the URI's
        // credentials comes back in the server's words (the redis crate's
        // connection says only "AuthenticationFailed").
        match tokio::time::timeout(ADMIN_CONNECT_TIMEOUT, self.dial(uri)).await {
            Ok(dialed) => drop(dialed?),
            Err(_) => anyhow::bail!("no connection within {ADMIN_CONNECT_TIMEOUT:?}"),
        }
        let mut conn = self.admin_connection(uri).await.map_err(refusal)?;
        // INFO answers while a dataset loads, but commands get -LOADING: only
        // a PONG and `loading:0` mean the load would be served.
        let pong: Result<String, redis::RedisError> = redis::cmd("PING").query_async(&mut conn).await;
        match pong {
            Ok(p) if p == "PONG" => {}
            Ok(other) => anyhow::bail!("PING answered `{other}`, not PONG"),
            Err(e) if e.code() == Some("LOADING") => anyhow::bail!("still loading the dataset (PING: {e})"),
            Err(e) => return Err(refusal(anyhow::Error::new(e).context("PING"))),
        }
        let persistence: String =
            redis::cmd("INFO").arg("persistence").query_async(&mut conn).await.map_err(|e| refusal(e.into()))?;
        if let Some(progress) = still_loading(&persistence) {
            anyhow::bail!("still loading the dataset ({progress})");
        }
        let info: String =
            redis::cmd("INFO").arg("server").query_async(&mut conn).await.map_err(|e| refusal(e.into()))?;
        let field = |name: &str| info.lines().find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()));
        let version = match (field("redis_version:"), field("valkey_version:")) {
            (_, Some(v)) => format!("valkey {v}"),
            (Some(v), None) => format!("redis {v}"),
            (None, None) => "unknown (INFO server had no version)".into(),
        };
        Ok(ServerInfo { version })
    }

    /// A connection for probes and admin reads (not the load path); through
    /// the Sentinels for a `redis+sentinel://` URI, over TLS for `rediss://`.
    async fn admin_connection(&self, uri: &str) -> anyhow::Result<redis::aio::MultiplexedConnection> {
        match Target::parse(uri)? {
            Target::Sentinel(sentinel) => {
                let resolved = format!("redis://{}", sentinel.connect_primary().await?.0);
                admin_connection(&resolved).await
            }
            Target::Plain(_) => admin_connection(uri).await,
            Target::Tls { info, host, port } => {
                let connected = async {
                    let tcp = TcpStream::connect((host.as_str(), port)).await?;
                    let stream = self.tls()?.wrap(tcp, &host).await?;
                    let (conn, drive) = redis::aio::MultiplexedConnection::new_with_config(
                        info.redis_settings(),
                        stream,
                        admin_config(),
                    )
                    .await?;
                    tokio::spawn(drive);
                    anyhow::Ok(conn)
                };
                match tokio::time::timeout(ADMIN_CONNECT_TIMEOUT, connected).await {
                    Ok(done) => done.with_context(|| format!("cannot connect to {host}:{port}")),
                    Err(_) => anyhow::bail!(
                        "cannot connect to {host}:{port}: no TLS session within {ADMIN_CONNECT_TIMEOUT:?}"
                    ),
                }
            }
        }
    }
}

/// What a target URI names.
enum Target {
    /// `redis+sentinel://`: ask the Sentinels for the primary.
    Sentinel(SentinelUri),
    /// `redis://HOST:PORT`.
    Plain(redis::ConnectionInfo),
    /// `rediss://HOST:PORT`: the same, over TLS.
    Tls { info: redis::ConnectionInfo, host: String, port: u16 },
}

impl Target {
    fn parse(uri: &str) -> anyhow::Result<Target> {
        if let Some(sentinel) = SentinelUri::parse(uri) {
            return Ok(Target::Sentinel(sentinel?));
        }
        // The redis crate, built without its own TLS, reads `rediss://` as
        // the plain URI it otherwise is; TLS is this crate's.
        let (plain, tls) = match uri.strip_prefix("rediss://") {
            Some(rest) => (format!("redis://{rest}"), true),
            None => (uri.to_string(), false),
        };
        anyhow::ensure!(
            !(tls && plain.contains('#')),
            "`#` fragments (`#insecure`) are not read: write `options: {{insecure: true}}` on the target"
        );
        let info = redis::IntoConnectionInfo::into_connection_info(plain.as_str()).map_err(|e| {
            anyhow::anyhow!("is not a redis URI ({e}): write redis[s]://[[USER]:PASSWORD@]HOST:PORT[/DB] or redis+sentinel://HOST:PORT[,…]/MASTER")
        })?;
        let (host, port) = match info.addr() {
            redis::ConnectionAddr::Tcp(host, port) => (host.clone(), *port),
            _ => anyhow::bail!("only TCP redis URIs are supported: write redis://HOST:PORT or rediss://HOST:PORT"),
        };
        Ok(match tls {
            true => Target::Tls { info, host, port },
            false => Target::Plain(info),
        })
    }
}

/// How long an admin connection may take to be made, TLS handshake and
/// authentication included.
const ADMIN_CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

fn admin_config() -> AsyncConnectionConfig {
    AsyncConnectionConfig::new()
        .set_connection_timeout(Some(std::time::Duration::from_secs(2)))
        .set_response_timeout(Some(std::time::Duration::from_secs(10)))
}

impl faultline_spec::KindInfo for RedisDriver {
    fn default_command(&self) -> &'static str {
        "redis-server"
    }

    fn check_uri(&self, uri: &str) -> Result<(), String> {
        Target::parse(uri).map(|_| ()).map_err(|e| format!("{e:#}"))
    }

    fn check_options_for(&self, uri: Option<&str>) -> Result<(), (String, String)> {
        let Some(field) = self.options.tls_field() else { return Ok(()) };
        match uri.map(Target::parse) {
            Some(Ok(Target::Tls { .. })) => Ok(()),
            // A URI that does not parse has its own error, at `uri`.
            Some(Err(_)) => Ok(()),
            _ => Err((
                field.to_string(),
                "applies to an external target with a rediss:// URI only: this target connects without TLS".into(),
            )),
        }
    }

    fn supports(&self, op: OpKind) -> bool {
        matches!(op, OpKind::Get | OpKind::Set | OpKind::Incr | OpKind::Del | OpKind::Publish)
    }

    /// A lane's buffers and task; an op in flight is its request in the
    /// lane's books (measured: docs/spec.md#memory).
    fn cost(&self) -> KindCost {
        KindCost { connection: 32 << 10, slot: 256 }
    }
}

#[async_trait::async_trait]
impl TargetDriver for RedisDriver {
    fn listen_args(&self, port: u16, data_dir: &Path) -> Vec<String> {
        // No persistence by default: a benchmark should not measure a stray RDB save
        // unless the spec asks for it (its own args come after and win). What
        // it does persist lands in the target's own directory, never in the
        // user's working directory or another target's.
        let dir = data_dir.display().to_string();
        ["--port", &port.to_string(), "--dir", &dir, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
            .map(String::from)
            .to_vec()
    }

    fn uri(&self, host: &str, port: u16) -> String {
        format!("redis://{host}:{port}")
    }

    async fn ready(&self, uri: &str) -> anyhow::Result<ServerInfo> {
        let answered = self.probe(uri).await;
        // A URI of the wrong scheme fails in ways that look like a server
        // starting up (a plain server waits for the rest of a TLS hello;
        // a TLS port closes on plain bytes): the first bytes tell, so the
        // wait ends at once, saying which scheme to use.
        let Err(e) = &answered else { return answered };
        if e.downcast_ref::<Refused>().is_some() {
            return answered;
        }
        let wrong = match Target::parse(uri) {
            // Only a connection the server dropped mid-talk is asked again in
            // TLS: nothing listening yet, or a plain server still loading,
            // are the wait's to sit out (and a plain server would hold a TLS
            // hello unanswered).
            Ok(Target::Plain(info)) if dropped_mid_talk(e) => match info.addr() {
                redis::ConnectionAddr::Tcp(host, port) if tls::speaks_tls(host, *port).await => Some(format!(
                    "{host}:{port} speaks TLS, not plain RESP: use `rediss://{}` (with `ca_file`, or `insecure: true` for a test server)",
                    uri.strip_prefix("redis://").unwrap_or(uri)
                )),
                _ => None,
            },
            Ok(Target::Tls { host, port, .. }) if tls::speaks_plain_resp(&host, port).await => Some(format!(
                "{host}:{port} answers plain RESP, not TLS: use `redis://{}` (or the server's TLS port)",
                uri.strip_prefix("rediss://").unwrap_or(uri)
            )),
            _ => None,
        };
        match wrong {
            Some(why) => Err(anyhow::Error::new(Refused(why))),
            None => answered,
        }
    }

    async fn read_values(&self, uri: &str, keys: &[Vec<u8>]) -> anyhow::Result<Vec<Option<Vec<u8>>>> {
        let mut conn = self.admin_connection(uri).await?;
        let mut values = Vec::with_capacity(keys.len());
        for batch in keys.chunks(1000) {
            let got: Vec<Option<Vec<u8>>> = redis::cmd("MGET").arg(batch).query_async(&mut conn).await?;
            values.extend(got);
        }
        Ok(values)
    }

    async fn connect(&self, uri: &str, workload: Arc<Workload>) -> anyhow::Result<Connection> {
        let (stream, follow_primary) = self.dial(uri).await?;
        Ok(load_connection(stream, workload, follow_primary))
    }

    fn pubsub(&self) -> Option<&dyn PubSub> {
        Some(self)
    }

    async fn served(&self, uri: &str) -> Option<anyhow::Result<faultline_kind::Served>> {
        Some(
            async {
                let mut conn = self.admin_connection(uri).await?;
                let server: String = redis::cmd("INFO").arg("server").query_async(&mut conn).await?;
                let stats: String = redis::cmd("INFO").arg("commandstats").query_async(&mut conn).await?;
                let run_id = server.lines().find_map(|l| l.strip_prefix("run_id:")).map(str::trim);
                Ok(faultline_kind::Served {
                    server_id: run_id.context("INFO server has no run_id")?.to_string(),
                    source: "INFO commandstats",
                    calls: command_calls(&stats),
                })
            }
            .await,
        )
    }
}

#[async_trait::async_trait]
impl PubSub for RedisDriver {
    async fn subscribe(&self, uri: &str, channels: &[Vec<u8>]) -> anyhow::Result<(Stream, Vec<u8>)> {
        let (mut stream, _) = self.dial(uri).await?;
        let mut request = format!("*{}\r\n", channels.len() + 1).into_bytes();
        put_bulk(&mut request, b"SUBSCRIBE");
        for channel in channels {
            put_bulk(&mut request, channel);
        }
        let said = |e| tls::io_error(e, "SUBSCRIBE");
        stream.write_all(&request).await.map_err(said)?;
        // One confirmation per channel, in order; messages may follow them.
        let (mut input, mut at, mut confirmed) = (Vec::new(), 0, 0);
        let mut chunk = [0u8; 4096];
        while confirmed < channels.len() {
            match decode_push(&input[at..]).map_err(|e| anyhow::anyhow!(e))? {
                Some(pushed) if input[at] == b'-' => {
                    let words = String::from_utf8_lossy(&input[at + 1..at + pushed.len - 2]).into_owned();
                    anyhow::bail!("SUBSCRIBE refused: {words}");
                }
                Some(pushed) => {
                    confirmed +=
                        usize::from(pushed.message.is_none() && input[at..].starts_with(b"*3\r\n$9\r\nsubscribe"));
                    at += pushed.len;
                }
                None => {
                    let n = stream.read(&mut chunk).await.map_err(said)?;
                    anyhow::ensure!(n > 0, "the server closed the connection before confirming SUBSCRIBE");
                    input.extend_from_slice(&chunk[..n]);
                }
            }
        }
        Ok((stream, input.split_off(at)))
    }

    fn decode_push(&self, input: &[u8]) -> Result<Option<Pushed>, String> {
        decode_push(input)
    }
}

/// The first item a subscribed RESP2 connection was pushed: a published
/// message is `*3` of `message`, the channel and the payload.
fn decode_push(input: &[u8]) -> Result<Option<Pushed>, String> {
    if input.is_empty() {
        return Ok(None);
    }
    let Some((len, _)) = reply_extent(input, 0)? else { return Ok(None) };
    const MESSAGE: &[u8] = b"*3\r\n$7\r\nmessage\r\n";
    if !input.starts_with(MESSAGE) {
        return Ok(Some(Pushed { len, message: None }));
    }
    // The two bulk strings after `message`: where each one's bytes lie.
    let bulk = |at: usize| -> Result<(std::ops::Range<usize>, usize), String> {
        let Some((end, body)) = reply_extent(input, at)? else { return Err("a cut message inside a whole one".into()) };
        if input[at] != b'$' || end < body + 2 {
            return Err("a published message whose parts are not bulk strings".into());
        }
        Ok((body..end - 2, end))
    };
    let (channel, next) = bulk(MESSAGE.len())?;
    let (payload, _) = bulk(next)?;
    Ok(Some(Pushed { len, message: Some((channel, payload)) }))
}

/// A readiness failure that waiting will not mend: the server refused the
/// URI's credentials (`WRONGPASS`, `NOAUTH`) or the user may not run the
/// probe's commands (`NOPERM`), so readiness gives up at once with the
/// server's words.
fn refusal(e: anyhow::Error) -> anyhow::Error {
    let refused = e.chain().filter_map(|c| c.downcast_ref::<redis::RedisError>()).any(|r| {
        r.kind() == redis::ErrorKind::AuthenticationFailed
            || matches!(r.code(), Some("WRONGPASS" | "NOAUTH" | "NOPERM"))
    });
    match refused {
        true => anyhow::Error::new(Refused(format!(
            "the server refused the credentials or the probe's commands (PING, INFO; grant them with +ping +info): {e:#}"
        ))),
        false => e,
    }
}

/// Whether the server accepted the connection and then failed it in a way
/// a wrong scheme could explain: not refused (nothing listening yet), not a
/// plain server's own words (still loading), not a timeout.
fn dropped_mid_talk(e: &anyhow::Error) -> bool {
    let said = format!("{e:#}");
    let waiting = said.contains("still loading") || said.contains("no connection within");
    let refused = e.chain().any(|cause| {
        cause.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
            || cause.downcast_ref::<redis::RedisError>().is_some_and(|r| r.is_connection_refusal() || r.is_timeout())
    });
    !waiting && !refused && !said.contains("Connection refused")
}

/// Sends one command on a fresh load connection and requires a non-error reply.
async fn handshake(stream: &mut Stream, args: &[&[u8]]) -> anyhow::Result<()> {
    let mut request = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        put_bulk(&mut request, arg);
    }
    let said = |e| tls::io_error(e, &format!("{} on a new connection", String::from_utf8_lossy(args[0])));
    stream.write_all(&request).await.map_err(said)?;
    let mut reply = Vec::new();
    let mut chunk = [0u8; 512];
    let end = loop {
        if let Some(end) = skip_reply(&reply, 0).map_err(|e| anyhow::anyhow!(e))? {
            break end;
        }
        let n = stream.read(&mut chunk).await.map_err(said)?;
        anyhow::ensure!(n > 0, "the server closed the connection");
        reply.extend_from_slice(&chunk[..n]);
    };
    if reply[0] != b'-' {
        return Ok(());
    }
    let words = String::from_utf8_lossy(&reply[1..end]).trim().to_string();
    let said = format!("{} refused: {words}", String::from_utf8_lossy(args[0]));
    // Credentials the server rejects will be rejected again: final.
    match ["WRONGPASS", "NOAUTH", "NOPERM"].iter().any(|code| words.starts_with(code)) {
        true => Err(anyhow::Error::new(Refused(said))),
        false => Err(anyhow::anyhow!(said)),
    }
}

/// RESP over `stream`; `follow_primary` when the Sentinels named its server.
fn load_connection(stream: Stream, workload: Arc<Workload>, follow_primary: bool) -> Connection {
    let protocol = Box::new(Resp { workload, scratch: Vec::with_capacity(256), follow_primary });
    Connection::Pipelined(PipelinedConnection { stream, protocol })
}

/// How far a load has got, if `INFO persistence` says the server is still
/// loading a dataset (`loading:1`). A server without the field (a
/// Redis-compatible one) is taken at its PONG.
fn still_loading(persistence: &str) -> Option<String> {
    let field = |name: &str| persistence.lines().find_map(|l| l.strip_prefix(name).map(str::trim));
    let loading = field("loading:").is_some_and(|v| v != "0");
    loading.then(|| match field("loading_loaded_perc:") {
        Some(perc) => format!("INFO persistence: loading:1, {perc}% loaded"),
        None => "INFO persistence: loading:1".to_string(),
    })
}

/// A plain `redis://` connection for probes and admin reads (not the load path).
async fn admin_connection(uri: &str) -> anyhow::Result<redis::aio::MultiplexedConnection> {
    let client = redis::Client::open(uri).with_context(|| format!("invalid redis uri `{uri}`"))?;
    client
        .get_multiplexed_async_connection_with_config(&admin_config())
        .await
        .with_context(|| format!("cannot connect to {uri}"))
}

/// RESP2 requests and replies: just enough to send the op kinds and tell a
/// reply's outcome.
struct Resp {
    workload: Arc<Workload>,
    scratch: Vec<u8>,
    /// The connection went to the primary the Sentinels named: an error that
    /// says the server is not (or not yet) a usable primary marks the reply
    /// [`Reply::wrong_server`], so the client asks the Sentinels again.
    /// Plain `redis://` connections have one fixed address to go back to,
    /// so there their errors stay plain server errors.
    follow_primary: bool,
}

/// Errors from a server that cannot be the primary now: `READONLY` (a
/// replica, e.g. the old primary after a failover, refusing a write),
/// `MASTERDOWN` (a replica whose link is down, refusing to serve stale data)
/// and `LOADING` (a server loading a dataset, e.g. a demoted primary doing
/// its full resync from the new one). Not `NOREPLICAS` and the like: those
/// come from the primary itself, and asking the Sentinels again would
/// only lead back to it.
fn not_the_primary(error: &[u8]) -> bool {
    [&b"-READONLY"[..], b"-MASTERDOWN", b"-LOADING"]
        .iter()
        .any(|code| error.starts_with(code) && matches!(error.get(code.len()), Some(b' ' | b'\r')))
}

/// The calls `INFO commandstats` counts of the commands the load sends
/// (`cmdstat_get:calls=12,usec=…`), by the op kind that sends each.
fn command_calls(info: &str) -> Vec<(OpKind, u64)> {
    let of = |command: &str| match command {
        "get" => Some(OpKind::Get),
        "set" => Some(OpKind::Set),
        "incr" => Some(OpKind::Incr),
        "del" => Some(OpKind::Del),
        "publish" => Some(OpKind::Publish),
        _ => None,
    };
    info.lines()
        .filter_map(|line| {
            let (command, fields) = line.trim().strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = fields.split(',').find_map(|f| f.strip_prefix("calls="))?.parse().ok()?;
            Some((of(command)?, calls))
        })
        .collect()
}

fn put_bulk(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'$');
    out.extend_from_slice(itoa::Buffer::new().format(bytes.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

impl WireProtocol for Resp {
    fn encode(&mut self, op: &Op, out: &mut Vec<u8>) {
        let w = &*self.workload;
        // The array header and command name are fixed per kind: one copy.
        out.extend_from_slice(match op.kind {
            OpKind::Get => b"*2\r\n$3\r\nGET\r\n",
            OpKind::Set => b"*3\r\n$3\r\nSET\r\n",
            OpKind::Incr => b"*2\r\n$4\r\nINCR\r\n",
            OpKind::Del => b"*2\r\n$3\r\nDEL\r\n",
            OpKind::Publish => {
                // PUBLISH channel payload, the payload stamped as it goes out.
                out.extend_from_slice(b"*3\r\n$7\r\nPUBLISH\r\n");
                put_bulk(out, w.channel(op));
                self.scratch.clear();
                w.put_message(op, faultline_kind::fanout::stamp_now(), &mut self.scratch);
                put_bulk(out, &self.scratch);
                return;
            }
            OpKind::Insert | OpKind::Update | OpKind::Transact | OpKind::Batch | OpKind::Query => {
                unreachable!("validation refuses ops redis targets do not support")
            }
        });
        self.scratch.clear();
        w.put_key(op.kind, op.key, &mut self.scratch);
        put_bulk(out, &self.scratch);
        if op.kind == OpKind::Set {
            self.scratch.clear();
            w.put_value(op, &mut self.scratch);
            put_bulk(out, &self.scratch);
        }
    }

    fn decode(&mut self, input: &[u8]) -> Result<Option<Reply>, String> {
        let Some(first) = input.first() else { return Ok(None) };
        let Some((len, body)) = reply_extent(input, 0)? else { return Ok(None) };
        let (outcome, value) = match first {
            b'-' => (Err(ErrorClass::Server), ReplyValue::None),
            b'$' if input[1] == b'-' => (Ok(()), ReplyValue::Nil),
            // A bulk string: its bytes sit between the length line and the final CRLF.
            b'$' => (Ok(()), ReplyValue::Bytes(body..len - 2)),
            b':' => (Ok(()), ReplyValue::Count(parse_int(&input[1..body - 2])?)),
            _ => (Ok(()), ReplyValue::None),
        };
        let wrong_server = self.follow_primary && *first == b'-' && not_the_primary(&input[..len]);
        // An error is one line: `-CODE message\r\n`.
        let message = (*first == b'-').then(|| 1..len - 2);
        Ok(Some(Reply { len, outcome, value, message, wrong_server }))
    }
}

/// The position just past the reply starting at `at`, or None if incomplete.
pub(crate) fn skip_reply(input: &[u8], at: usize) -> Result<Option<usize>, String> {
    Ok(reply_extent(input, at)?.map(|(end, _)| end))
}

/// The reply starting at `at`, if complete: the position just past it, and
/// where its first line ends (past the CRLF), which is where a bulk
/// string's bytes begin.
fn reply_extent(input: &[u8], at: usize) -> Result<Option<(usize, usize)>, String> {
    let Some(line_end) = find_crlf(input, at + 1) else { return Ok(None) };
    let after_line = line_end + 2;
    let end = match input[at] {
        b'+' | b'-' | b':' => Some(after_line),
        b'$' => match parse_int(&input[at + 1..line_end])? {
            len if len < 0 => Some(after_line),
            len => Some(after_line + len as usize + 2).filter(|end| input.len() >= *end),
        },
        b'*' => {
            let count = parse_int(&input[at + 1..line_end])?;
            let mut pos = after_line;
            for _ in 0..count.max(0) {
                if pos >= input.len() {
                    return Ok(None);
                }
                match skip_reply(input, pos)? {
                    Some(next) => pos = next,
                    None => return Ok(None),
                }
            }
            Some(pos)
        }
        other => return Err(format!("unexpected RESP reply type byte 0x{other:02x}")),
    };
    Ok(end.map(|end| (end, after_line)))
}

/// Where the next CRLF from `from` starts.
fn find_crlf(input: &[u8], from: usize) -> Option<usize> {
    let rest = input.get(from..)?;
    rest.iter().zip(rest.iter().skip(1)).position(|pair| pair == (&b'\r', &b'\n')).map(|i| from + i)
}

/// A RESP length: an optional minus sign and decimal digits.
fn parse_int(digits: &[u8]) -> Result<i64, String> {
    let bad = || format!("bad RESP length `{}`", String::from_utf8_lossy(digits));
    let (negative, magnitude) = match digits {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, digits),
    };
    if magnitude.is_empty() || magnitude.len() > 18 {
        return Err(bad());
    }
    let mut n: i64 = 0;
    for &d in magnitude {
        if !d.is_ascii_digit() {
            return Err(bad());
        }
        n = n * 10 + i64::from(d - b'0');
    }
    Ok(if negative { -n } else { n })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resp() -> Resp {
        let spec: faultline_spec::WorkloadSpec =
            serde_yaml_ng::from_str("ops: {set: 1}\nvalue_size: 3B\nkeys: {prefix: 'k:'}").unwrap();
        Resp { workload: Arc::new(Workload::new(&spec, 1, 0)), scratch: Vec::new(), follow_primary: false }
    }

    #[test]
    fn commandstats_gives_the_calls_of_the_loads_commands() {
        let info =
            "# Commandstats\r\ncmdstat_get:calls=1200,usec=900,usec_per_call=0.75,rejected_calls=0,failed_calls=0\r\n\
                    cmdstat_set:calls=800,usec=700,usec_per_call=0.88,rejected_calls=2,failed_calls=1\r\n\
                    cmdstat_info:calls=3,usec=100,usec_per_call=33.3,rejected_calls=0,failed_calls=0\r\n";
        assert_eq!(command_calls(info), vec![(OpKind::Get, 1200), (OpKind::Set, 800)]);
    }

    #[test]
    fn encodes_commands_as_resp_arrays() {
        let mut out = Vec::new();
        let mut r = resp();
        r.encode(
            &Op { kind: OpKind::Get, key: 42, value_len: 3, write_id: None, value: None, message: None },
            &mut out,
        );
        r.encode(
            &Op { kind: OpKind::Incr, key: 7, value_len: 3, write_id: None, value: None, message: None },
            &mut out,
        );
        assert_eq!(out, b"*2\r\n$3\r\nGET\r\n$4\r\nk:42\r\n*2\r\n$4\r\nINCR\r\n$5\r\nk:n:7\r\n");
        out.clear();
        r.encode(&Op { kind: OpKind::Set, key: 1, value_len: 3, write_id: None, value: None, message: None }, &mut out);
        assert!(out.starts_with(b"*3\r\n$3\r\nSET\r\n$3\r\nk:1\r\n$3\r\n"), "{}", String::from_utf8_lossy(&out));
    }

    #[test]
    fn decodes_each_reply_type_and_waits_for_complete_ones() {
        let mut r = resp();
        let ok = |len, value| Some(Reply { len, outcome: Ok(()), value, message: None, wrong_server: false });
        let cases: [(&[u8], Option<Reply>); 8] = [
            (b"+OK\r\n", ok(5, ReplyValue::None)),
            (
                b"-ERR wrong\r\n",
                Some(Reply {
                    len: 12,
                    outcome: Err(ErrorClass::Server),
                    value: ReplyValue::None,
                    message: Some(1..10),
                    wrong_server: false,
                }),
            ),
            (b":12\r\n", ok(5, ReplyValue::Count(12))),
            (b"$-1\r\n", ok(5, ReplyValue::Nil)),
            (b"$3\r\nabc\r\n+OK", ok(9, ReplyValue::Bytes(4..7))),
            (b"$3\r\nab", None),
            (b"*2\r\n$1\r\na\r\n:1\r\n", ok(15, ReplyValue::None)),
            (b"*2\r\n$1\r\na\r\n", None),
        ];
        for (input, want) in cases {
            assert_eq!(r.decode(input).unwrap(), want, "{}", String::from_utf8_lossy(input));
        }
        assert!(r.decode(b"?junk\r\n").is_err());
        // Lengths are decimal, optionally negative, and fit an i64.
        for bad in [&b"$1a\r\nx\r\n"[..], b"$\r\n", b"$--1\r\n", b"*+2\r\n", b"$1234567890123456789\r\n"] {
            assert!(r.decode(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
        assert_eq!(r.decode(b"*-1\r\n").unwrap(), ok(5, ReplyValue::None), "a nil array");
        let line = r.decode(b"-ERR a\rb\r\n+OK\r\n").unwrap().unwrap();
        assert_eq!((line.len, line.message), (10, Some(1..8)), "a lone CR does not end a line");
    }

    #[test]
    fn publishes_numbered_messages_and_cuts_them_out_of_the_pushed_stream() {
        let spec: faultline_spec::WorkloadSpec = serde_yaml_ng::from_str(
            "ops: {publish: 1}\nkeys: {prefix: 'k:'}\nfanout: {channels: 2, subscribers: 2, message_size: 40B}",
        )
        .unwrap();
        let workload = Arc::new(Workload::new(&spec, 1, 0xabc));
        let mut r = Resp { workload: Arc::clone(&workload), scratch: Vec::new(), follow_primary: false };
        let mut ops = workload.stream(3, 4, 1, 0, None);
        let mut out = Vec::new();
        let op = ops.next_op().unwrap();
        r.encode(&op, &mut out);
        let text = String::from_utf8_lossy(&out).into_owned();
        assert!(
            text.starts_with("*3\r\n$7\r\nPUBLISH\r\n$19\r\nk:fanout:00000abc:1\r\n$40\r\nF000300000000"),
            "{text}"
        );
        // The server pushes it to a subscriber as `message`, channel, payload.
        let payload = &out[out.len() - 42..out.len() - 2];
        let mut pushed = b"*3\r\n$7\r\nmessage\r\n$19\r\nk:fanout:00000abc:1\r\n$40\r\n".to_vec();
        pushed.extend_from_slice(payload);
        pushed.extend_from_slice(b"\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\nc\r\n:1\r\n");
        let first = decode_push(&pushed).unwrap().unwrap();
        let (channel, body) = first.message.clone().unwrap();
        assert_eq!(&pushed[channel], b"k:fanout:00000abc:1");
        let (id, _) = faultline_kind::fanout::parse_payload(&pushed[body]).unwrap();
        assert_eq!((id.lane, id.seq), (3, 0));
        let rest = &pushed[first.len..];
        assert_eq!(decode_push(rest).unwrap(), Some(Pushed { len: rest.len(), message: None }), "a confirmation");
        assert_eq!(decode_push(&pushed[..first.len - 1]).unwrap(), None, "incomplete");
        assert_eq!(r.decode(b":3\r\n").unwrap().unwrap().value, ReplyValue::Count(3), "PUBLISH's receivers");
    }

    #[test]
    fn errors_from_a_server_that_is_not_the_primary_ask_for_a_reroute() {
        let flagged = |r: &mut Resp, input: &[u8]| {
            let reply = r.decode(input).unwrap().unwrap();
            assert_eq!((reply.len, reply.outcome), (input.len(), Err(ErrorClass::Server)), "a server error either way");
            reply.wrong_server
        };
        let mut plain = resp();
        let mut sentinel = Resp { follow_primary: true, ..resp() };
        for error in [
            &b"-READONLY You can't write against a read only replica.\r\n"[..],
            b"-MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.\r\n",
            b"-LOADING Redis is loading the dataset in memory\r\n",
        ] {
            assert!(flagged(&mut sentinel, error), "{}", String::from_utf8_lossy(error));
            // A fixed redis:// address has nowhere else to go: a plain server error.
            assert!(!flagged(&mut plain, error), "{}", String::from_utf8_lossy(error));
        }
        for error in [
            &b"-ERR wrong number of arguments\r\n"[..],
            b"-NOREPLICAS Not enough good replicas to write.\r\n",
            b"-OOM command not allowed when used memory > 'maxmemory'.\r\n",
            b"-READONLYISH not a real code\r\n",
            b"-ERR READONLY in the message is not the code\r\n",
        ] {
            assert!(!flagged(&mut sentinel, error), "{}", String::from_utf8_lossy(error));
        }
        // Only the first reply of the input counts, and values never reroute.
        let r = sentinel.decode(b"+OK\r\n-READONLY x\r\n").unwrap().unwrap();
        assert!(!r.wrong_server && r.len == 5);
        assert!(!sentinel.decode(b"$8\r\nREADONLY\r\n").unwrap().unwrap().wrong_server);
        assert_eq!(sentinel.decode(b"-READONLY You can't wr").unwrap(), None, "incomplete");
    }

    #[test]
    fn uris_name_plain_tls_and_sentinel_targets() {
        let Target::Tls { info, host, port } = Target::parse("rediss://bench:pw@127.0.0.1:6380/2").unwrap() else {
            panic!("not read as TLS");
        };
        assert_eq!((host.as_str(), port), ("127.0.0.1", 6380));
        let settings = info.redis_settings();
        assert_eq!((settings.username(), settings.password(), settings.db()), (Some("bench"), Some("pw"), 2));
        assert!(matches!(Target::parse("redis://db.example:7000").unwrap(), Target::Plain(_)));
        assert!(matches!(Target::parse("redis+sentinel://127.0.0.1:26379/mymaster").unwrap(), Target::Sentinel(_)));
        let insecure = Target::parse("rediss://127.0.0.1:6380/#insecure").err().unwrap().to_string();
        assert!(insecure.contains("options: {insecure: true}"), "{insecure}");
        assert!(Target::parse("redis+unix:///tmp/redis.sock").is_err());
        let said = faultline_spec::KindInfo::check_uri(
            &RedisDriver { options: RedisOptions::default(), tls: OnceLock::new() },
            "http://x:1",
        )
        .unwrap_err();
        assert!(said.contains("write redis[s]://"), "{said}");
    }

    #[test]
    fn tls_options_that_cannot_work_name_their_field() {
        let both = RedisOptions { insecure: true, ca_file: Some("ca.pem".into()), ..Default::default() };
        assert_eq!(both.check().unwrap_err().0, "insecure");
        let half = RedisOptions { key_file: Some("k.pem".into()), ..Default::default() };
        assert_eq!(half.check().unwrap_err(), ("key_file", "needs its certificate in `cert_file`".to_string()));
        let missing = RedisOptions { ca_file: Some("/nonexistent/ca.pem".into()), ..Default::default() };
        let (field, said) = Tls::new(&missing).err().unwrap();
        assert_eq!(field, "ca_file");
        assert!(said.starts_with("cannot read /nonexistent/ca.pem"), "{said}");
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let none = RedisOptions { ca_file: Some(empty.display().to_string()), ..Default::default() };
        let (field, said) = Tls::new(&none).err().unwrap();
        assert_eq!((field.as_str(), said.ends_with("holds no PEM certificate")), ("ca_file", true), "{said}");
        assert!(Tls::new(&RedisOptions { insecure: true, ..Default::default() }).is_ok());
    }
}
