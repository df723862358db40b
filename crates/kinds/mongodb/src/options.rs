//! The options a `kind: mongodb` target takes (under `options:`, on the
//! target and overlaid by a scenario's), typed so a wrong read concern or a
//! misspelt field is a located spec error, and mapped here onto the
//! official driver's own option types.

use std::time::Duration;

use mongodb::options::{
    Acknowledgment, ClientOptions, ReadConcern, ReadPreference, ReadPreferenceOptions, SelectionCriteria, WriteConcern,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use faultline_model::units::Dur;

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MongoOptions {
    /// The database the load uses (default `faultline`).
    #[serde(default = "default_database")]
    pub database: String,
    /// The collection the load uses (default `kv`).
    #[serde(default = "default_collection")]
    pub collection: String,
    /// Read concern of every read (default: the server's, `local`).
    #[serde(default)]
    pub read_concern: Option<ReadConcernLevel>,
    /// Write concern of every write (default: the server's).
    #[serde(default)]
    pub write_concern: Option<WriteConcernSpec>,
    /// Which member reads go to (default `primary`).
    #[serde(default)]
    pub read_preference: ReadPreferenceMode,
    /// The server gives up on a read after this long (`maxTimeMS`); the
    /// engine's deadline bounds the whole op, server selection and pool
    /// waits included, whatever this says.
    #[serde(default)]
    pub max_time: Option<Dur>,
    /// Talk to the one server in the URI, not the replica set it belongs to.
    #[serde(default)]
    pub direct_connection: Option<bool>,
    /// Connections per client (default 100, the driver's own: above any
    /// profile's in-flight ops per client, so a client never waits for its
    /// own pool).
    #[serde(default)]
    pub pool_size: Option<u32>,
    /// The driver retries a read once after a retryable error (default true,
    /// as the driver does).
    #[serde(default = "default_true")]
    pub retry_reads: bool,
    /// The driver retries a write once after a retryable error (default true).
    #[serde(default = "default_true")]
    pub retry_writes: bool,
    /// How long the driver looks for a suitable server (default 30s, the
    /// driver's); the op's deadline still bounds it.
    #[serde(default)]
    pub server_selection_timeout: Option<Dur>,
    /// Documents inserted before the first cell, keys `0..seed_documents`
    /// of the workload's key space, so reads find data from the start.
    #[serde(default)]
    pub seed_documents: u64,
    /// On an external server, leave the collection the run created when
    /// it ends (default false: dropped, and listed in the run ledger until
    /// then, so `faultline teardown` drops it after a killed run).
    #[serde(default)]
    pub keep_collection: bool,
}

fn default_database() -> String {
    "faultline".into()
}

fn default_collection() -> String {
    "kv".into()
}

fn default_true() -> bool {
    true
}

impl Default for MongoOptions {
    fn default() -> Self {
        serde_json::from_value(serde_json::json!({})).expect("every field has a default")
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReadConcernLevel {
    Local,
    Available,
    Majority,
    Linearizable,
    Snapshot,
}

/// `w`, `j` and `wtimeout`, as MongoDB names them.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteConcernSpec {
    /// `majority`, or how many members must acknowledge (1 or more).
    #[serde(default)]
    pub w: Option<WriteAcknowledgment>,
    /// Acknowledged only once in the journal.
    #[serde(default)]
    pub j: Option<bool>,
    /// How long the server waits for the acknowledgements.
    #[serde(default)]
    pub wtimeout: Option<Dur>,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum WriteAcknowledgment {
    Nodes(u32),
    Tag(String),
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReadPreferenceMode {
    #[default]
    Primary,
    PrimaryPreferred,
    Secondary,
    SecondaryPreferred,
    Nearest,
}

impl MongoOptions {
    /// Checks what the types cannot: returns the field and the problem.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if let Some(WriteAcknowledgment::Tag(tag)) = self.write_concern.as_ref().and_then(|w| w.w.as_ref()) {
            if tag != "majority" {
                return Err(("write_concern.w", format!("is `{tag}`: use `majority` or a number of members")));
            }
        }
        if self.database.is_empty() || self.database.contains(['/', '\\', '.', ' ', '"', '$']) {
            return Err(("database", format!("`{}` is not a valid MongoDB database name", self.database)));
        }
        if self.collection.is_empty() || self.collection.starts_with("system.") || self.collection.contains('$') {
            return Err(("collection", format!("`{}` is not a valid collection name", self.collection)));
        }
        if self.pool_size == Some(0) {
            return Err(("pool_size", "must be at least 1".into()));
        }
        Ok(())
    }

    /// Whether writes are acknowledged at all (`w: 0` is not).
    pub fn acknowledged_writes(&self) -> bool {
        !matches!(self.write_concern.as_ref().and_then(|w| w.w.as_ref()), Some(WriteAcknowledgment::Nodes(0)))
    }

    pub fn read_concern(&self) -> Option<ReadConcern> {
        self.read_concern.map(|level| match level {
            ReadConcernLevel::Local => ReadConcern::local(),
            ReadConcernLevel::Available => ReadConcern::available(),
            ReadConcernLevel::Majority => ReadConcern::majority(),
            ReadConcernLevel::Linearizable => ReadConcern::linearizable(),
            ReadConcernLevel::Snapshot => ReadConcern::snapshot(),
        })
    }

    pub fn write_concern(&self) -> Option<WriteConcern> {
        let spec = self.write_concern.as_ref()?;
        let w = spec.w.as_ref().map(|w| match w {
            WriteAcknowledgment::Nodes(n) => Acknowledgment::Nodes(*n),
            WriteAcknowledgment::Tag(_) => Acknowledgment::Majority,
        });
        Some(WriteConcern::builder().w(w).journal(spec.j).w_timeout(spec.wtimeout.map(|d| d.0)).build())
    }

    pub fn selection_criteria(&self) -> SelectionCriteria {
        let options: Option<ReadPreferenceOptions> = None;
        SelectionCriteria::ReadPreference(match self.read_preference {
            ReadPreferenceMode::Primary => ReadPreference::Primary,
            ReadPreferenceMode::PrimaryPreferred => ReadPreference::PrimaryPreferred { options },
            ReadPreferenceMode::Secondary => ReadPreference::Secondary { options },
            ReadPreferenceMode::SecondaryPreferred => ReadPreference::SecondaryPreferred { options },
            ReadPreferenceMode::Nearest => ReadPreference::Nearest { options },
        })
    }

    pub fn max_time(&self) -> Option<Duration> {
        self.max_time.map(|d| d.0)
    }

    /// The driver's client options for one load client with `in_flight` ops.
    pub fn apply(&self, client: &mut ClientOptions, in_flight: u32) {
        client.app_name = Some("faultline".into());
        if let Some(direct) = self.direct_connection {
            client.direct_connection = Some(direct);
        }
        client.max_pool_size = Some(self.pool_size.unwrap_or(in_flight.max(1)));
        client.retry_reads = Some(self.retry_reads);
        client.retry_writes = Some(self.retry_writes);
        if let Some(t) = self.server_selection_timeout {
            client.server_selection_timeout = Some(t.0);
        }
    }
}
