//! The target-kind interface: what a kind implements to be driven by the
//! engine ([`TargetDriver`], its connections and replies), how its members
//! run as one target ([`topology`]), what it declares to be registered
//! ([`registry::Kind`]), the ops it is given ([`workload`]) and the run
//! ledger it lists what it creates in ([`ledger`]). The kinds themselves
//! (Redis, MongoDB, DynamoDB) and the list of those a build holds live
//! above this crate and depend on it; so do the engine, the providers and
//! teardown, which reach a kind only through what is here. No database
//! driver is built for it.

pub mod cause;
pub mod fanout;
pub mod fault;
pub mod ledger;
pub mod registry;
#[cfg(feature = "tls")]
pub mod tls;
pub mod topology;
pub mod workload;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use faultline_model::items::StoredItem;
use faultline_model::stats::ErrorClass;
use faultline_spec::KindInfo;
use workload::{Op, Workload};

/// A probe's answer from a server that refuses faultline (its credentials):
/// waiting will not change it, so readiness gives up at once.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// How long the engine gives a cell's final read of its keys before the
/// checkers are left unknown; a kind that waits for something to settle
/// adds its window ([`StoredItems::budget`]).
pub const FINAL_READ_BUDGET: Duration = Duration::from_secs(60);

/// What a probe learned about a running server (for the report's provenance).
#[derive(Debug, Clone)]
pub struct ServerInfo {
    pub version: String,
}

/// The server's own count of the calls it has served since it started,
/// by op kind: what the coordinator of a run on agents holds the ops they
/// claim against ([`TargetDriver::served`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Served {
    /// Names this run of the server (Redis's `run_id`): counters of two
    /// different runs cannot be subtracted.
    pub server_id: String,
    /// Where the counts come from, e.g. `INFO commandstats`.
    pub source: &'static str,
    pub calls: Vec<(faultline_model::ops::OpKind, u64)>,
}

/// The read concern a cell's reads go out under, where the kind has one.
#[derive(Debug, Clone)]
pub struct ReadRule {
    /// As the kind names it, e.g. `linearizable`.
    pub read_concern: String,
    /// Only the primary may answer (MongoDB's linearizable reads).
    pub requires_primary: bool,
}

#[async_trait::async_trait]
/// A kind's driver: what validation asks of the kind ([`KindInfo`]) and
/// how to start, reach, load and read a server of it.
pub trait TargetDriver: KindInfo {
    /// The read concern reads are sent under; None for kinds without one.
    fn read_rule(&self) -> Option<ReadRule> {
        None
    }
    /// Whether the role of a single server (no docker members) can be asked
    /// (MongoDB's `hello`), so cells with faults, or whose reads only the
    /// primary may answer, sample it.
    fn has_roles(&self) -> bool {
        false
    }
    /// Arguments that make the server listen on `port` on loopback only and
    /// keep its files in `data_dir` (the target's own, under the run's).
    fn listen_args(&self, port: u16, data_dir: &Path) -> Vec<String>;
    fn uri(&self, host: &str, port: u16) -> String;
    /// One round trip that succeeds only when the server can serve requests.
    async fn ready(&self, uri: &str) -> anyhow::Result<ServerInfo>;
    /// Opens one load connection.
    async fn connect(&self, uri: &str, workload: Arc<Workload>) -> anyhow::Result<Connection>;
    /// Reads the current values of `keys` (absent keys as None), for the
    /// checkers' final state.
    async fn read_values(&self, uri: &str, keys: &[Vec<u8>]) -> anyhow::Result<Vec<Option<Vec<u8>>>>;
    /// Sets the target up for a workload before its first cell (e.g. seeds
    /// documents); says what it did.
    async fn prepare(&self, uri: &str, workload: &Workload) -> anyhow::Result<String> {
        let _ = (uri, workload);
        Ok(String::new())
    }
    /// Removes what [`Self::prepare`] made that must not outlive the run
    /// (e.g. a table), called when the target stops; says what it did.
    async fn clean_up(&self, uri: &str) -> anyhow::Result<String> {
        let _ = uri;
        Ok(String::new())
    }
    /// Reading whole stored items with their index entries, for kinds that
    /// return old images (DynamoDB); None for the others.
    fn stored_items(&self) -> Option<&dyn StoredItems> {
        None
    }
    /// Faults the kind applies itself through its own API (MongoDB's
    /// step-down), those its registration lists ([`registry::Kind::faults`]);
    /// None for kinds without any.
    fn kind_faults(&self) -> Option<&dyn fault::KindFaults> {
        None
    }
    /// Publish/subscribe, for fan-out workloads (Redis); None for kinds
    /// without it (validation refuses `publish` on them).
    fn pubsub(&self) -> Option<&dyn fanout::PubSub> {
        None
    }
    /// The members a client of `uri` may be answered by, as its
    /// [`RequestClient::execute_attributed`] names them, in an order every
    /// process derives alike from the URI (a history's records count them);
    /// none for kinds whose clients do not say who answered.
    fn members(&self, uri: &str) -> Vec<String> {
        let _ = uri;
        Vec::new()
    }
    /// The server's own call counters (Redis's `INFO commandstats`); None
    /// for kinds whose servers keep none that faultline reads.
    async fn served(&self, uri: &str) -> Option<anyhow::Result<Served>> {
        let _ = uri;
        None
    }
}

/// A capability: the whole stored items of keys, for the hot-key checker.
#[async_trait::async_trait]
pub trait StoredItems: Send + Sync {
    /// The whole stored items of `keys`, read as strongly as the server
    /// offers, with their index entries.
    async fn read(&self, uri: &str, keys: &[Vec<u8>]) -> anyhow::Result<Vec<StoredItem>>;
    /// How long [`Self::read`] may take, waits for an index or a stream to
    /// catch up included.
    fn budget(&self) -> Duration {
        FINAL_READ_BUDGET
    }
}

/// How the engine drives a target's load: the executor follows the variant.
pub enum Connection {
    /// A socket speaking a protocol faultline encodes itself (Redis's RESP).
    Pipelined(PipelinedConnection),
    /// An official driver: every op is its own request future over the
    /// driver's own connection pool (MongoDB, the AWS SDK).
    Requests(Arc<dyn RequestClient>),
}

/// A socket speaking a pipelined request/response protocol: replies come back
/// in request order, so one connection carries many ops in flight and the
/// engine batches them into single writes and reads.
pub struct PipelinedConnection {
    pub stream: Stream,
    pub protocol: Box<dyn WireProtocol>,
}

/// A load connection's byte stream: a plain socket, or any other stream a
/// kind wraps around one (TLS). The executor reads and writes it from one
/// task, in turn, so it is never split.
pub enum Stream {
    Tcp(TcpStream),
    Wrapped(Box<dyn ByteStream>),
}

/// What a wrapped stream must be: tokio's reader and writer, movable
/// between the runtime's threads.
pub trait ByteStream: AsyncRead + AsyncWrite + Send + Unpin {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin> ByteStream for T {}

impl Stream {
    /// Reads what has arrived into `buf`; 0 means the peer closed.
    pub async fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf).await,
            Stream::Wrapped(s) => s.read(buf).await,
        }
    }

    /// Writes all of `buf` and, for a wrapped stream, flushes it (a TLS
    /// stream may hold back records until it is flushed).
    pub async fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.write_all(buf).await,
            Stream::Wrapped(s) => {
                s.write_all(buf).await?;
                s.flush().await
            }
        }
    }
}

/// A driver that runs one op per call. The engine owns time: it drops the
/// future at the op's deadline, or counts a hang when it runs on past the
/// watchdog, so `execute` needs no timeout of its own.
#[async_trait::async_trait]
pub trait RequestClient: Send + Sync {
    async fn execute(&self, op: &Op) -> Response;
    /// Whether this client tells which member answered its ops: one that
    /// chooses the member itself (etcd's), or a driver that can ask, in a
    /// cell whose reads only the primary may answer
    /// ([`ReadRule::requires_primary`]). Lanes of other clients call
    /// [`Self::execute`] alone, so the common path pays nothing for it.
    fn attributes_reads(&self) -> bool {
        false
    }
    /// As [`Self::execute`], and the `host:port` of the member that answered
    /// it (None when unknown); called only when [`Self::attributes_reads`].
    async fn execute_attributed(&self, op: &Op) -> (Response, Option<String>) {
        (self.execute(op).await, None)
    }
}

/// What one request ended with: a value read (or an image a write
/// returned), or a failure the driver classified.
pub type Response = Result<ReadValue, DriverError>;

/// What a read returned, for the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadValue {
    /// Not a value (a write's acknowledgement, a count).
    None,
    /// The key had no value.
    Nil,
    Bytes(Vec<u8>),
}

/// A failed request as its driver understood it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverError {
    pub class: ErrorClass,
    /// Whether it may still have taken effect (checkers treat such a write
    /// as Jepsen does: it may or may not have happened).
    pub applied: Applied,
    /// The driver's name for the failure, counted as its own label
    /// (`NotWritablePrimary`, `ServerSelectionTimeout`).
    pub code: Option<String>,
    /// Its own words, kept as an example.
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// Definitely not applied: the server refused it before acting.
    No,
    /// May have been applied: a timeout or broken connection after it was
    /// sent, a write-concern error.
    Maybe,
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
    /// A count the server answered with (PUBLISH's receivers).
    Count(i64),
}
