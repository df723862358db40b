//! The options a `kind: etcd` target takes (under `options:`): how reads
//! are served — the one question the etcd failover campaign asks — and how
//! long a client may wait for a member before a call fails.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use faultline_model::units::Dur;

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EtcdOptions {
    /// How `get` is served: `linearizable` (default: the member confirms
    /// with a quorum that it has the latest state, so a member cut off from
    /// the majority cannot answer) or `serializable` (the member answers
    /// from its own state at once, which may be stale).
    #[serde(default)]
    pub read: ReadMode,
    /// How long a client may take to open its connection to a member
    /// before the call fails (default 2s).
    #[serde(default)]
    pub connect_timeout: Option<Dur>,
    /// Send etcd's "require leader" flag: a member that has no leader
    /// refuses at once (`no leader`) instead of holding the call until its
    /// deadline. Default false, as etcdctl's.
    #[serde(default)]
    pub require_leader: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReadMode {
    #[default]
    Linearizable,
    Serializable,
}

impl ReadMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ReadMode::Linearizable => "linearizable",
            ReadMode::Serializable => "serializable",
        }
    }
}

impl EtcdOptions {
    /// Combinations that cannot work, as (field, why).
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        match self.connect_timeout {
            Some(d) if d.0.is_zero() => Err(("connect_timeout", "must be longer than 0s, e.g. 2s".into())),
            _ => Ok(()),
        }
    }

    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout.map_or(Duration::from_secs(2), |d| d.0)
    }
}
