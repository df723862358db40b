//! Target kinds: how to reach, probe and drive one kind of database. A new
//! kind is one file implementing [`TargetDriver`] plus one line in [`driver`].

mod redis;

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::time::Instant;

use crate::metrics::ErrorClass;
use crate::spec::{OpKind, TargetKind};
use crate::workload::{Op, Workload};

/// What a probe learned about a running server (for the report's provenance).
#[derive(Debug, Clone)]
pub struct ServerInfo {
    pub version: String,
}

/// Per-connection client settings that come from the spec.
#[derive(Debug, Clone, Copy)]
pub struct ClientSettings {
    /// Give up on an op at its deadline instead of waiting for the server.
    pub cancel_at_deadline: bool,
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
    /// A client connection for one load client.
    async fn connect(
        &self,
        uri: &str,
        settings: ClientSettings,
        workload: Arc<Workload>,
    ) -> anyhow::Result<Box<dyn Client>>;
}

/// One connection's worth of load; `execute` may be called with many ops in
/// flight at once.
pub trait Client: Send + Sync {
    fn execute<'a>(&'a self, op: Op, deadline: Instant) -> BoxFuture<'a, Result<(), ErrorClass>>;
}

pub fn driver(kind: TargetKind) -> Arc<dyn TargetDriver> {
    match kind {
        TargetKind::Redis => Arc::new(redis::RedisDriver),
    }
}
