//! The op kinds a workload sends and the target kinds a spec names: the
//! shared vocabulary of spec, history, metrics and results.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A target kind by the name a spec writes (`redis`, `mongodb`,
/// `dynamodb`): kinds register themselves with the CLI's catalog, which
/// says whether a name is one this build holds, so the vocabulary is not a
/// closed list here.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize, Serialize, JsonSchema)]
#[serde(transparent)]
pub struct TargetKind(String);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OpKind {
    Get,
    Set,
    Incr,
    Del,
    /// Creates the key's document; fails when it exists (MongoDB, DynamoDB).
    Insert,
    /// Changes the stored item in place (DynamoDB's UpdateItem: a counter
    /// added to, fields set, the op's id appended to a list).
    Update,
    /// Writes the key and its sibling items in one transaction (DynamoDB's
    /// TransactWriteItems).
    Transact,
    /// Writes the key and its sibling items in one batch (BatchWriteItem).
    Batch,
    /// Reads the key's entry back through the table's index (Query).
    Query,
    /// Publishes a numbered message on one of the workload's fan-out
    /// channels (Redis's PUBLISH); its subscribers count what arrives.
    Publish,
}

impl OpKind {
    /// In the order of their index: history records store it, so new kinds go last.
    pub const ALL: [OpKind; 10] = [
        OpKind::Get,
        OpKind::Set,
        OpKind::Incr,
        OpKind::Del,
        OpKind::Insert,
        OpKind::Update,
        OpKind::Transact,
        OpKind::Batch,
        OpKind::Query,
        OpKind::Publish,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            OpKind::Get => "get",
            OpKind::Set => "set",
            OpKind::Incr => "incr",
            OpKind::Del => "del",
            OpKind::Insert => "insert",
            OpKind::Update => "update",
            OpKind::Transact => "transact",
            OpKind::Batch => "batch",
            OpKind::Query => "query",
            OpKind::Publish => "publish",
        }
    }

    pub fn from_name(name: &str) -> Option<OpKind> {
        OpKind::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// Dense index for per-kind metric arrays.
    #[inline]
    pub fn index(self) -> usize {
        self as usize
    }

    /// Whether the op writes its own value, which reads can then observe.
    #[inline]
    pub fn writes_value(self) -> bool {
        matches!(self, OpKind::Set | OpKind::Insert | OpKind::Update | OpKind::Transact | OpKind::Batch)
    }
}

impl TargetKind {
    pub fn new(name: impl Into<String>) -> Self {
        TargetKind(name.into())
    }
    /// The name a spec writes.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for TargetKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
