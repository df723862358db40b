//! The options a `kind: dynamodb` target takes (under `options:`, on the
//! target and overlaid by a scenario's): where and as whom to sign requests,
//! the SDK's retries and timeouts, and the table the campaign creates. Typed
//! so a misspelt field or a bad billing mode is a located spec error.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use faultline_model::units::Dur;

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DynamoOptions {
    /// The region requests are signed for (default `us-east-1`, or
    /// `AWS_REGION` when set).
    #[serde(default)]
    pub region: Option<String>,
    /// Static credentials. Default: `AWS_ACCESS_KEY_ID` /
    /// `AWS_SECRET_ACCESS_KEY` / `AWS_SESSION_TOKEN` from the environment,
    /// else `faultline` / `faultline` (test servers such as moto accept any).
    #[serde(default)]
    pub credentials: Option<CredentialsSpec>,
    /// The SDK's own retries: `off` (default, the seed's "client retries
    /// off": every shed call is counted), or a mode with attempts.
    #[serde(default)]
    pub retries: RetrySpec,
    /// How long the SDK waits for a connection (default 3s).
    #[serde(default = "default_connect_timeout")]
    pub connect_timeout: Dur,
    /// How long the SDK waits for a response once sent (default: none, so
    /// the engine's deadline and hang watchdog decide).
    #[serde(default)]
    pub read_timeout: Option<Dur>,
    /// A PEM file of the CA that signed an `https://` endpoint's certificate
    /// (self-signed test servers); the system's roots otherwise.
    #[serde(default)]
    pub ca_file: Option<String>,
    /// Accept any certificate an `https://` endpoint shows (self-signed test
    /// servers whose CA you do not have). The handshake is still signed by
    /// the certificate's key; who issued it and for which name is not
    /// checked. Default false.
    #[serde(default)]
    pub insecure: bool,
    /// Where DynamoDB Streams answers, when not at the target's endpoint
    /// (the service: `https://streams.dynamodb.<region>.amazonaws.com`).
    /// Read only with `table.stream: true`.
    #[serde(default)]
    pub streams_endpoint: Option<String>,
    /// Reads (`get`, the checker's final read) are strongly consistent
    /// (default true).
    #[serde(default = "default_true")]
    pub consistent_reads: bool,
    /// Items `transact` and `batch` write besides the key itself, each with
    /// the same value (default 1).
    #[serde(default = "default_siblings")]
    pub siblings: u32,
    /// Each put of a `transact` carries `attribute_not_exists(key)`: the
    /// first transaction on a key creates its items and every later one is
    /// cancelled (TransactionCanceledException, ConditionalCheckFailed)
    /// (default false: unconditional puts).
    #[serde(default)]
    pub transact_create_only: bool,
    #[serde(default)]
    pub table: TableSpec,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CredentialsSpec {
    pub access_key_id: String,
    pub secret_access_key: String,
    #[serde(default)]
    pub session_token: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum RetrySpec {
    /// One attempt per call.
    #[default]
    Off,
    /// The SDK's standard retry mode with this many attempts in all.
    Standard { max_attempts: u32 },
    /// The adaptive mode (client-side rate limiting) with this many attempts.
    Adaptive { max_attempts: u32 },
}

/// The table the load uses: created before the first cell, as here, and
/// deleted at teardown unless `keep`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TableSpec {
    /// Default `faultline`.
    #[serde(default = "default_table")]
    pub name: String,
    /// The string hash key attribute (default `pk`).
    #[serde(default = "default_hash_key")]
    pub hash_key: String,
    /// A global secondary index on the item's group (`gk`, hash) and writer
    /// (`gr`, range): every put moves the key's index entry to its writer, so
    /// an entry left behind is seen as a second entry.
    #[serde(default)]
    pub index: Option<IndexSpec>,
    /// A stream of new and old images on the table: the hot-key checker
    /// reads each key's records and holds them against the calls (one
    /// record per committed write, chained by their images).
    #[serde(default)]
    pub stream: bool,
    /// How long, after the load, the stream is read again until every
    /// key's last record leaves its stored item (default 10s). Records
    /// reach the stream after their call is answered (the service: "near
    /// real time"); a key still behind when the window ends is judged on
    /// what was read, so a window shorter than the stream's lag reads lag
    /// as missing records.
    #[serde(default = "default_stream_settle")]
    pub stream_settle: Dur,
    #[serde(default)]
    pub billing: BillingSpec,
    /// Create the table (default true); false uses one that exists, with
    /// the same key and index.
    #[serde(default = "default_true")]
    pub create: bool,
    /// Leave the table (and its items) at teardown (default false).
    #[serde(default)]
    pub keep: bool,
    /// How long creating the table may take until it and its index are
    /// ACTIVE (default 60s).
    #[serde(default = "default_active_timeout")]
    pub active_timeout: Dur,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IndexSpec {
    /// Default `by-group`.
    #[serde(default = "default_index")]
    pub name: String,
    #[serde(default)]
    pub projection: Projection,
    /// How long, after the load, a key's index entries are read again
    /// until they agree with its item (default 30s). The index is updated
    /// after the table (on the service, asynchronously: usually within a
    /// second, seconds behind a burst of writes); an entry that agrees
    /// within the window is lag, one still wrong when it ends a violation.
    #[serde(default = "default_index_settle")]
    pub settle: Dur,
}

/// Longest settle window (index or stream) a spec may ask: every cell with
/// an entry or a record still wrong waits it out.
pub const MAX_SETTLE: std::time::Duration = std::time::Duration::from_secs(600);

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Projection {
    /// Every attribute (default): the checker compares whole entries.
    #[default]
    All,
    /// The keys only: the checker compares the entry's writer.
    KeysOnly,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum BillingSpec {
    #[default]
    PayPerRequest,
    Provisioned {
        read: u32,
        write: u32,
    },
}

fn default_connect_timeout() -> Dur {
    Dur(std::time::Duration::from_secs(3))
}

fn default_active_timeout() -> Dur {
    Dur(std::time::Duration::from_secs(60))
}

fn default_index_settle() -> Dur {
    Dur(std::time::Duration::from_secs(30))
}

fn default_stream_settle() -> Dur {
    Dur(std::time::Duration::from_secs(10))
}

fn default_true() -> bool {
    true
}

fn default_siblings() -> u32 {
    1
}

fn default_table() -> String {
    "faultline".into()
}

fn default_hash_key() -> String {
    "pk".into()
}

fn default_index() -> String {
    "by-group".into()
}

impl Default for TableSpec {
    fn default() -> Self {
        serde_json::from_value(serde_json::json!({})).expect("every field has a default")
    }
}

/// Attribute names the items carry besides the hash key.
pub const RESERVED_ATTRIBUTES: [&str; 7] = ["v", "w", "s", "gk", "gr", "c", "l"];

impl DynamoOptions {
    /// Checks what the types cannot: returns the field and the problem.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        let t = &self.table;
        let name_ok = (3..=255).contains(&t.name.len())
            && t.name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
        if !name_ok {
            return Err((
                "table.name",
                format!("`{}` is not a DynamoDB table name: 3 to 255 of a-z A-Z 0-9 _ - .", t.name),
            ));
        }
        if t.hash_key.is_empty() || t.hash_key.len() > 255 {
            return Err(("table.hash_key", "must be 1 to 255 bytes".into()));
        }
        if RESERVED_ATTRIBUTES.contains(&t.hash_key.as_str()) {
            return Err((
                "table.hash_key",
                format!(
                    "`{}` is an attribute every item carries ({}): name the key otherwise",
                    t.hash_key,
                    RESERVED_ATTRIBUTES.join(", ")
                ),
            ));
        }
        if let Some(i) = &t.index {
            if i.name.len() < 3 || !i.name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
            {
                return Err(("table.index.name", format!("`{}` is not a DynamoDB index name", i.name)));
            }
            if i.settle.0 > MAX_SETTLE {
                return Err((
                    "table.index.settle",
                    "must be at most 10m: a cell whose index entry stays wrong waits the whole window".into(),
                ));
            }
        }
        if t.stream_settle.0 > MAX_SETTLE {
            return Err((
                "table.stream_settle",
                "must be at most 10m: a cell whose stream stays behind its items waits the whole window".into(),
            ));
        }
        if let BillingSpec::Provisioned { read, write } = t.billing {
            if read == 0 || write == 0 {
                return Err(("table.billing.provisioned", "read and write capacity must be at least 1".into()));
            }
        }
        match self.retries {
            RetrySpec::Standard { max_attempts } | RetrySpec::Adaptive { max_attempts }
                if !(1..=100).contains(&max_attempts) =>
            {
                return Err(("retries.max_attempts", "must be 1 to 100".into()))
            }
            _ => {}
        }
        if !(1..=24).contains(&self.siblings) {
            return Err(("siblings", "must be 1 to 24 (a batch writes at most 25 items)".into()));
        }
        if self.insecure && self.ca_file.is_some() {
            return Err((
                "insecure",
                "accepts any certificate, so ca_file would not be used: keep one of the two".into(),
            ));
        }
        if self.connect_timeout.0.is_zero() {
            return Err(("connect_timeout", "must be above 0s".into()));
        }
        Ok(())
    }
}

impl Default for DynamoOptions {
    fn default() -> Self {
        serde_json::from_value(serde_json::json!({})).expect("every field has a default")
    }
}
