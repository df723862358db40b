//! What a kind with items (DynamoDB) reads back for the hot-key checker: a
//! key's whole stored item, its index entries and how long they took to
//! agree, and its stream records. The kinds produce these and the checkers
//! read them; neither knows the other.

use std::time::Duration;

/// A key's whole stored item as a kind with items sees it (DynamoDB), for
/// the hot-key checker.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoredItem {
    /// The value the item carries (absent item: None).
    pub value: Option<Vec<u8>>,
    /// Why the item is not one write's whole item (an attribute written by
    /// another write), if it is not.
    pub torn: Option<String>,
    /// The value of each index entry for the key, when the table has an index.
    pub index_entries: Option<Vec<Option<Vec<u8>>>>,
    /// How long the index was given to agree with the item, and whether it
    /// agreed only on a later read, when the table has an index.
    pub index_settle: Option<IndexSettle>,
    /// The counter updates added to and the ids they appended, when the
    /// item has them.
    pub applied: Option<(i64, Vec<Vec<u8>>)>,
    /// The values of the items written together with the key (transactions,
    /// batches), in order.
    pub siblings: Vec<Option<Vec<u8>>>,
    /// The key's records in the table's stream, in stream order, when the
    /// table has one: each change's old and new item.
    pub stream: Option<Vec<StreamChange>>,
}

/// An index is updated after its table (on the service, eventually): a
/// key's entries are read again until they agree with its item or the
/// settle window ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IndexSettle {
    /// The window the entries were given (`table.index.settle`).
    pub window: Duration,
    /// The first read disagreed and a later one agreed, this long after the
    /// first (lag); None when the first read agreed or none did.
    pub late: Option<Duration>,
}

/// One stream record of a key: the item it replaced and the item it left,
/// as values (None: no item; empty: an item without a value attribute).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamChange {
    pub old: Option<Vec<u8>>,
    pub new: Option<Vec<u8>>,
}
