//! Target kinds: how to reach, probe and drive one kind of database. A new
//! kind is one file implementing [`TargetDriver`] plus one line in [`driver`].

mod redis;
mod redis_failover;
mod redis_sentinel;
mod redis_topology;
pub mod topology;

use std::sync::Arc;

use tokio::net::TcpStream;

use crate::metrics::ErrorClass;
use crate::spec::{OpKind, TargetKind};
use crate::workload::{Op, Workload};

/// What a probe learned about a running server (for the report's provenance).
#[derive(Debug, Clone)]
pub struct ServerInfo {
    pub version: String,
}

#[async_trait::async_trait]
pub trait TargetDriver: Send + Sync {
    /// The binary a `process` provider starts when the spec names none.
    fn default_command(&self) -> &'static str;
    /// Arguments that make the server listen on `port` on loopback only.
    fn listen_args(&self, port: u16) -> Vec<String>;
    fn uri(&self, host: &str, port: u16) -> String;
    fn supports(&self, op: OpKind) -> bool;
    /// One round trip that succeeds only when the server can serve requests.
    async fn probe(&self, uri: &str) -> anyhow::Result<ServerInfo>;
    /// Opens one load connection.
    async fn connect(&self, uri: &str, workload: Arc<Workload>) -> anyhow::Result<Connection>;
    /// Reads the current values of `keys` (absent keys as None), for the
    /// checkers' final state.
    async fn read_values(&self, uri: &str, keys: &[Vec<u8>]) -> anyhow::Result<Vec<Option<Vec<u8>>>>;
}

/// A socket speaking a pipelined request/response protocol: replies come back
/// in request order, so one connection carries many ops in flight and the
/// engine batches them into single writes and reads.
pub struct Connection {
    pub stream: TcpStream,
    pub protocol: Box<dyn WireProtocol>,
}

pub trait WireProtocol: Send {
    /// Appends the request for `op` to `out`.
    fn encode(&mut self, op: &Op, out: &mut Vec<u8>);
    /// Reads one reply from the front of `input`: `Ok(None)` when it is not
    /// complete yet, else the bytes it took and the op's outcome. `Err` means
    /// the stream cannot be understood any more.
    fn decode(&mut self, input: &[u8]) -> Result<Option<Reply>, String>;
}

/// One reply read off the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// Bytes of the stream it took.
    pub len: usize,
    pub outcome: Result<(), ErrorClass>,
    /// What a read returned, for the history.
    pub value: ReplyValue,
    /// An error reply's message, as a range of the decoded input (kept as
    /// an example of its error class).
    pub message: Option<std::ops::Range<usize>>,
    /// The reply says this connection points at the wrong server (e.g. a
    /// replica that used to be the primary): the client drops it and dials
    /// again, which finds the current primary.
    pub wrong_server: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyValue {
    /// Not a value (a status, a count, an error).
    None,
    /// The key had no value.
    Nil,
    /// The value's bytes, as a range of the decoded input.
    Bytes(std::ops::Range<usize>),
}

pub fn driver(kind: TargetKind) -> Arc<dyn TargetDriver> {
    match kind {
        TargetKind::Redis => Arc::new(redis::RedisDriver),
    }
}
