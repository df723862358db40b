//! etcd, a real Raft cluster, driven through its v3 gRPC API (the
//! `etcd-client` crate). Every load client holds a connection to each
//! member of the target's URI and sends its ops to them in turn, passing
//! over a member whose connection failed, as etcd's own client balances
//! its endpoints; so when a member is cut off from the others but still
//! reachable, a share of every client's ops reaches it and sees what it
//! serves (a failure's example names the member it came from).
//!
//! A key of the workload is an etcd key (the workload's prefix and number)
//! holding the workload's tagged value, so the history checkers judge etcd
//! histories unchanged. Reads are linearizable (a quorum confirms the
//! member is current) or serializable (the member's own state), as the
//! target's `read` option says: the question the etcd failover campaign asks.
//!
//! Why the gRPC client and not etcd's JSON gateway: the gateway answers one
//! request per HTTP/1.1 exchange with base64 bodies, and has no way to pin
//! or attribute a call beyond the address dialled; the gRPC client
//! multiplexes a member's calls over one HTTP/2 connection and is what
//! etcd's own clients use. Its cost (tonic and prost, `protoc` at build
//! time) is measured in docs/performance.md.

mod config;
mod endpoints;
mod errors;
mod leader;
mod ops;
pub mod options;
mod served;
mod topology;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use faultline_kind::fault::{Applied, KindFaults, Server};
use faultline_kind::registry::{parse_options, Kind};
use faultline_kind::workload::Workload;
use faultline_kind::{Connection, ServerInfo, TargetDriver};
use faultline_model::ops::OpKind;
use faultline_spec::fault::Fields;
use faultline_spec::KindCost;
pub use options::{EtcdOptions, ReadMode};
use topology::EtcdTopology;

/// The kind as the build registers it (the CLI's `kinds::KINDS`).
pub const KIND: Kind = Kind {
    name: "etcd",
    driver: |options| {
        let options: EtcdOptions = parse_options(options)?;
        options.check().map_err(|(field, e)| (field.to_string(), e))?;
        Ok(Arc::new(EtcdDriver { options }))
    },
    members: Some(|| Arc::new(EtcdTopology)),
    options: Some(|generator| generator.subschema_for::<EtcdOptions>()),
    faults: leader::declared,
    remove_listed: None,
};

/// How long an admin call (probe, final read) may take.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(10);
/// The key readiness writes, proving a quorum accepts writes.
const READY_KEY: &str = "faultline-ready";

#[derive(Clone)]
pub struct EtcdDriver {
    pub options: EtcdOptions,
}

impl EtcdDriver {
    fn endpoints_of(uri: &str) -> anyhow::Result<Vec<String>> {
        endpoints::parse(uri).map_err(|e| anyhow::anyhow!("`{uri}` {e}"))
    }

    /// A probe of one member: it knows a leader, and a write through it
    /// commits (a quorum is there).
    async fn probe(&self, member: &str) -> anyhow::Result<ServerInfo> {
        let mut client = endpoints::client(member, &self.options).await?;
        let status = client.status().await.map_err(|e| anyhow::anyhow!("status: {}", errors::explain(&e)))?;
        anyhow::ensure!(status.leader() != 0, "the member knows no leader yet (raft term {})", status.raft_term());
        client
            .put(READY_KEY, "1", None)
            .await
            .map_err(|e| anyhow::anyhow!("a write through the member did not commit: {}", errors::explain(&e)))?;
        let listed = client.member_list().await.map_err(|e| anyhow::anyhow!("member list: {}", errors::explain(&e)))?;
        let timing = config::raft_timing(member, Duration::from_secs(2))
            .await
            .unwrap_or_else(|e| format!("Raft timing not readable: {e:#}"));
        Ok(ServerInfo {
            version: format!(
                "etcd {}, a cluster of {} member(s), {timing}, raft term {}",
                status.version(),
                listed.members().len(),
                status.raft_term()
            ),
        })
    }
}

impl faultline_spec::KindInfo for EtcdDriver {
    fn default_command(&self) -> &'static str {
        "etcd"
    }

    fn check_uri(&self, uri: &str) -> Result<(), String> {
        endpoints::parse(uri).map(drop)
    }

    fn supports(&self, op: OpKind) -> bool {
        matches!(op, OpKind::Get | OpKind::Set | OpKind::Del | OpKind::Insert)
    }

    /// A client is an HTTP/2 connection per member, about 110 KiB each,
    /// taken for three members; an op in flight is a gRPC call of about
    /// 10 KiB (measured: docs/spec.md#memory).
    fn cost(&self) -> KindCost {
        KindCost { connection: 3 * (128 << 10), slot: 10 << 10 }
    }
}

#[async_trait::async_trait]
impl TargetDriver for EtcdDriver {
    fn read_rule(&self) -> Option<faultline_kind::ReadRule> {
        // Any member may answer either kind of read: a linearizable one
        // confirms with the leader first.
        Some(faultline_kind::ReadRule { read_concern: self.options.read.as_str().into(), requires_primary: false })
    }

    fn has_roles(&self) -> bool {
        true
    }

    /// The URI's members, as each load client names the one that answered.
    fn members(&self, uri: &str) -> Vec<String> {
        Self::endpoints_of(uri).unwrap_or_default()
    }

    /// One member on loopback: its client port `port`, its peers' port a
    /// unix socket in its working directory (`data_dir`), as no other
    /// member exists to reach it.
    fn listen_args(&self, port: u16, data_dir: &Path) -> Vec<String> {
        let client = format!("http://127.0.0.1:{port}");
        let peer = format!("unix://peer:{port}");
        [
            "--name",
            "default",
            "--data-dir",
            &data_dir.join("member").display().to_string(),
            "--listen-client-urls",
            &client,
            "--advertise-client-urls",
            &client,
            "--listen-peer-urls",
            &peer,
            "--initial-advertise-peer-urls",
            &peer,
            "--initial-cluster",
            &format!("default={peer}"),
        ]
        .into_iter()
        .chain(topology::LOG_TO_STDERR)
        .map(String::from)
        .collect()
    }

    fn uri(&self, host: &str, port: u16) -> String {
        endpoints::member_uri(&format!("{host}:{port}"))
    }

    /// Every member of `uri` answers with a leader and takes a write.
    async fn ready(&self, uri: &str) -> anyhow::Result<ServerInfo> {
        let mut info = None;
        for member in Self::endpoints_of(uri)? {
            let probed = tokio::time::timeout(ADMIN_TIMEOUT, self.probe(&member))
                .await
                .map_err(|_| anyhow::anyhow!("{member}: no answer within {ADMIN_TIMEOUT:?}"))?
                .map_err(|e| e.context(member.clone()))?;
            info.get_or_insert(probed);
        }
        info.ok_or_else(|| anyhow::anyhow!("`{uri}` names no member"))
    }

    async fn connect(&self, uri: &str, workload: Arc<Workload>) -> anyhow::Result<Connection> {
        let mut members = Vec::new();
        for address in Self::endpoints_of(uri)? {
            let client = endpoints::client(&address, &self.options).await?;
            members.push(ops::Member { address, kv: client.kv_client(), maintenance: client.maintenance_client() });
        }
        // Every member asked at once: a paused one costs one wait, not one each.
        let asks = members.iter().map(|m| {
            let mut maintenance = m.maintenance.clone();
            async move { tokio::time::timeout(ADMIN_TIMEOUT, maintenance.status()).await }
        });
        let answered = futures::future::join_all(asks).await;
        // Fails here, before the clock starts, when no member is there.
        if !answered.iter().any(|a| matches!(a, Ok(Ok(_)))) {
            let said: Vec<String> = members
                .iter()
                .zip(&answered)
                .map(|(m, a)| match a {
                    Ok(Err(e)) => format!("{}: {}", m.address, errors::explain(e)),
                    _ => format!("{}: no answer within {ADMIN_TIMEOUT:?}", m.address),
                })
                .collect();
            anyhow::bail!("no member answered: {}", said.join("; "));
        }
        let serializable = self.options.read == ReadMode::Serializable;
        Ok(Connection::Requests(Arc::new(ops::EtcdClient::new(members, workload, serializable))))
    }

    /// Linearizable reads, through the first member that answers them.
    async fn read_values(&self, uri: &str, keys: &[Vec<u8>]) -> anyhow::Result<Vec<Option<Vec<u8>>>> {
        let mut failed = Vec::new();
        for member in Self::endpoints_of(uri)? {
            let read = async {
                let client = endpoints::client(&member, &self.options).await?;
                ops::read_values(&mut client.kv_client(), keys).await
            };
            match tokio::time::timeout(faultline_kind::FINAL_READ_BUDGET / 2, read).await {
                Ok(Ok(values)) => return Ok(values),
                Ok(Err(e)) => failed.push(format!("{member}: {e:#}")),
                Err(_) => failed.push(format!("{member}: no answer in time")),
            }
        }
        anyhow::bail!("no member answered the final read: {}", failed.join("; "))
    }

    fn kind_faults(&self) -> Option<&dyn KindFaults> {
        Some(self)
    }

    /// Each member's gRPC call counters, summed (served.rs).
    async fn served(&self, uri: &str) -> Option<anyhow::Result<faultline_kind::Served>> {
        Some(match Self::endpoints_of(uri) {
            Ok(members) => served::served(&members, ADMIN_TIMEOUT).await,
            Err(e) => Err(e),
        })
    }
}

/// Leadership transfer through etcd's own API ([`leader::FAULTS`]).
#[async_trait::async_trait]
impl KindFaults for EtcdDriver {
    async fn apply(&self, action: &str, fields: &Fields, servers: &[Server]) -> anyhow::Result<Applied> {
        let on = leader::Members { driver: self.clone(), servers: servers.to_vec() };
        faultline_kind::fault::apply(leader::FAULTS, "etcd", action, fields, &on).await
    }
}
