//! Redis (and Redis-compatible servers) through the `redis` crate's
//! multiplexed connection, which pipelines every in-flight op of a client on
//! one socket.

use std::sync::Arc;

use anyhow::Context;
use futures::future::BoxFuture;
use futures::FutureExt;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Cmd, ErrorKind, RedisError, Value};
use tokio::time::Instant;

use super::{Client, ClientSettings, ServerInfo, TargetDriver};
use crate::metrics::ErrorClass;
use crate::spec::OpKind;
use crate::workload::{Op, Workload};

pub struct RedisDriver;

#[async_trait::async_trait]
impl TargetDriver for RedisDriver {
    fn default_command(&self) -> &'static str {
        "redis-server"
    }

    fn listen_args(&self, port: u16) -> Vec<String> {
        // No persistence by default: a benchmark should not measure a stray RDB save
        // unless the spec asks for it (its own args come after and win).
        [
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ]
        .map(String::from)
        .to_vec()
    }

    fn uri(&self, host: &str, port: u16) -> String {
        format!("redis://{host}:{port}")
    }

    fn supports(&self, op: OpKind) -> bool {
        matches!(op, OpKind::Get | OpKind::Set | OpKind::Incr | OpKind::Del)
    }

    async fn probe(&self, uri: &str) -> anyhow::Result<ServerInfo> {
        let mut conn = open(uri, Some(std::time::Duration::from_secs(2))).await?;
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query_async(&mut conn)
            .await?;
        let field = |name: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
        };
        let version = match (field("redis_version:"), field("valkey_version:")) {
            (_, Some(v)) => format!("valkey {v}"),
            (Some(v), None) => format!("redis {v}"),
            (None, None) => "unknown (INFO server had no version)".into(),
        };
        Ok(ServerInfo { version })
    }

    async fn connect(
        &self,
        uri: &str,
        settings: ClientSettings,
        workload: Arc<Workload>,
    ) -> anyhow::Result<Box<dyn Client>> {
        let conn = open(uri, None).await?;
        Ok(Box::new(RedisClient {
            conn,
            settings,
            workload,
        }))
    }
}

async fn open(
    uri: &str,
    response_timeout: Option<std::time::Duration>,
) -> anyhow::Result<MultiplexedConnection> {
    let client = redis::Client::open(uri).with_context(|| format!("invalid redis uri `{uri}`"))?;
    // The crate's default 500 ms response timeout would cut ops short of the
    // spec's deadline; the engine owns deadlines.
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(std::time::Duration::from_secs(5)))
        .set_response_timeout(response_timeout);
    client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .with_context(|| format!("cannot connect to {uri}"))
}

struct RedisClient {
    conn: MultiplexedConnection,
    settings: ClientSettings,
    workload: Arc<Workload>,
}

impl RedisClient {
    fn command(&self, op: &Op) -> Cmd {
        let w = &*self.workload;
        let mut number = itoa::Buffer::new();
        let number = number.format(op.key);
        let mut key = Vec::with_capacity(w.key_prefix.len() + 2 + number.len());
        key.extend_from_slice(w.key_prefix.as_bytes());
        if op.kind == OpKind::Incr {
            // Counters live in their own namespace: INCR on a key holding
            // random bytes would fail with a type error.
            key.extend_from_slice(b"n:");
        }
        key.extend_from_slice(number.as_bytes());
        let mut cmd = Cmd::new();
        match op.kind {
            OpKind::Get => cmd.arg("GET").arg(key),
            OpKind::Set => cmd.arg("SET").arg(key).arg(w.value(op)),
            OpKind::Incr => cmd.arg("INCR").arg(key),
            OpKind::Del => cmd.arg("DEL").arg(key),
        };
        cmd
    }
}

impl Client for RedisClient {
    fn execute<'a>(&'a self, op: Op, deadline: Instant) -> BoxFuture<'a, Result<(), ErrorClass>> {
        let cmd = self.command(&op);
        // A clone is a handle to the same pipelined socket.
        let mut conn = self.conn.clone();
        let cancel_at_deadline = self.settings.cancel_at_deadline;
        async move {
            let reply = conn.send_packed_command(&cmd);
            let reply = if cancel_at_deadline {
                match tokio::time::timeout_at(deadline, reply).await {
                    Ok(r) => r,
                    Err(_) => return Err(ErrorClass::Deadline),
                }
            } else {
                reply.await
            };
            match reply {
                Ok(Value::ServerError(_)) => Err(ErrorClass::Server),
                Ok(_) => Ok(()),
                Err(e) => Err(classify(&e)),
            }
        }
        .boxed()
    }
}

fn classify(e: &RedisError) -> ErrorClass {
    if e.is_timeout() {
        ErrorClass::Deadline
    } else if e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.kind() == ErrorKind::Io
    {
        ErrorClass::Connection
    } else {
        ErrorClass::Server
    }
}
