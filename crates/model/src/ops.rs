//! The op kinds a workload sends and the target kinds a spec names: the
//! shared vocabulary of spec, history, metrics and results.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TargetKind {
    Redis,
    Mongodb,
    /// The DynamoDB API (the service, DynamoDB Local, moto, a shim).
    Dynamodb,
}

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
}

impl OpKind {
    /// In the order of their index: history records store it, so new kinds go last.
    pub const ALL: [OpKind; 9] = [
        OpKind::Get,
        OpKind::Set,
        OpKind::Incr,
        OpKind::Del,
        OpKind::Insert,
        OpKind::Update,
        OpKind::Transact,
        OpKind::Batch,
        OpKind::Query,
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
        }
    }

    pub fn from_name(name: &str) -> Option<OpKind> {
        OpKind::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// Dense index for per-kind metric arrays.
    pub fn index(self) -> usize {
        self as usize
    }

    /// Whether the op writes its own value, which reads can then observe.
    pub fn writes_value(self) -> bool {
        matches!(self, OpKind::Set | OpKind::Insert | OpKind::Update | OpKind::Transact | OpKind::Batch)
    }
}

impl TargetKind {
    /// The name a spec writes (`redis`, `mongodb`, `dynamodb`).
    pub fn as_str(self) -> &'static str {
        match self {
            TargetKind::Redis => "redis",
            TargetKind::Mongodb => "mongodb",
            TargetKind::Dynamodb => "dynamodb",
        }
    }
}
