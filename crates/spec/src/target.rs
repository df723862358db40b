//! A target as a spec writes it: the kind of database, the provider that
//! brings it up (a process faultline starts, a server someone else runs,
//! containers) and the provider's settings. Apart from the rest of the
//! spec's schema (model.rs) because a fault checks where it is aimed
//! against it (fault.rs), and the schema holds the faults.

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use faultline_model::ops::TargetKind;
use faultline_model::units::{Dur, Size};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// faultline starts a local binary on a free loopback port and stops it at the end.
    Process,
    /// A server someone else runs, reached by `uri`.
    External,
    /// faultline runs the target's members (and companions) as containers on
    /// a network of the run's own, and removes them at the end.
    Docker,
}

impl ProviderKind {
    /// As a spec writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Process => "process",
            ProviderKind::External => "external",
            ProviderKind::Docker => "docker",
        }
    }
}

/// A database to drive. Fields beyond `kind` and `provider` depend on the provider.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TargetSpec {
    pub kind: TargetKind,
    pub provider: ProviderKind,
    /// process, docker: the program to start (default: the kind's server, e.g. `redis-server`).
    #[serde(default)]
    pub command: Option<String>,
    /// process, docker: arguments; `{port}` is replaced with the port. Without
    /// `{port}` faultline puts the kind's own port (and, for docker members,
    /// replication) arguments first.
    #[serde(default)]
    pub args: Vec<String>,
    /// external: where the server is, e.g. `redis://127.0.0.1:6379`.
    #[serde(default)]
    pub uri: Option<String>,
    /// How long to wait for the target to answer before giving up.
    #[serde(default = "default_ready_timeout")]
    pub ready_timeout: Dur,
    /// process: run its data on faultline's fault filesystem (FUSE) even
    /// when no disk fault names it, e.g. to measure what the layer costs
    /// (a target a disk fault names runs on it anyway).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fault_filesystem: bool,
    /// Whether the client cancels an op at its deadline (like a driver's
    /// cancellation token). `false` leaves it to the server, so the hang
    /// watchdog sees what the server really does.
    #[serde(default = "default_true")]
    pub cancel_at_deadline: bool,
    /// docker: the image to run; it must already be on this machine.
    #[serde(default)]
    pub image: Option<String>,
    /// docker: how many server containers (default 1). Redis and MongoDB
    /// start member 0 as the primary, the others as its replicas; etcd's
    /// members elect their leader.
    #[serde(default)]
    pub members: Option<u32>,
    /// docker: the port the server listens on inside its container (default:
    /// the kind's, 6379 for redis).
    #[serde(default)]
    pub port: Option<u16>,
    /// docker: environment variables of every member.
    #[serde(default)]
    pub env: IndexMap<String, String>,
    /// docker: memory limit per member container.
    #[serde(default)]
    pub memory: Option<Size>,
    /// docker: CPU limit per member container, e.g. 0.5.
    #[serde(default)]
    pub cpus: Option<f64>,
    /// docker: tmpfs mounts, `PATH` or `PATH:OPTIONS` (e.g. `/data:size=64m`).
    #[serde(default)]
    pub tmpfs: Vec<String>,
    /// docker: when a member counts as ready, besides answering the kind's probe.
    #[serde(default)]
    pub ready: Option<crate::docker::ReadySpec>,
    /// docker: groups of extra containers, e.g. `sentinels: {count: 3, …}`.
    #[serde(default)]
    pub companions: IndexMap<String, crate::docker::CompanionSpec>,
    /// docker: reach the primary through a companion group of Sentinels
    /// (asked again on every connect, so clients follow a failover) instead
    /// of member 0's fixed address.
    #[serde(default)]
    pub discovery: Option<crate::docker::DiscoverySpec>,
    /// The kind's own options (e.g. mongodb: `read_concern`, `write_concern`);
    /// `faultline schema` and docs/targets.md list each kind's.
    #[serde(default)]
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub options: Option<serde_json::Value>,
}

fn default_ready_timeout() -> Dur {
    Dur(std::time::Duration::from_secs(15))
}

fn default_true() -> bool {
    true
}
