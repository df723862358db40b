//! The workload's ops as DynamoDB calls, and the items they write.
//!
//! An item is `{<hash_key>: "<prefix><n>", v: <value>, w: writer, s: seq,
//! gk: "g:<key>", gr: "w<writer>"}`: the value names its write (the history's
//! tagged value), `w`/`s` name it again so an item mixed from two writes is
//! seen, and the index key (`gk = "g:<key>"` hash, `gr = "w<writer>.<seq>"`
//! range) moves the key's index entry with every write. Updates also add 1 to `c` and append their
//! value's header to `l`.
//!
//! - `set`: PutItem, unconditional, ReturnValues ALL_OLD: the answer is the
//!   item it replaced (the hot-key checker's chain).
//! - `insert`: PutItem with `attribute_not_exists(key)`: a
//!   ConditionalCheckFailedException when the item exists.
//! - `get`: GetItem, consistent unless the options say otherwise.
//! - `update`: UpdateItem (SET the item's fields, ADD `c`, list_append `l`),
//!   ReturnValues ALL_NEW.
//! - `del`: DeleteItem, ReturnValues ALL_OLD.
//! - `transact`: TransactWriteItems putting the key and its siblings.
//! - `batch`: BatchWriteItem putting the key and its siblings; unprocessed
//!   items are a failure that may have been partly applied.
//! - `query`: Query on the index for the key's group.

use std::collections::HashMap;
use std::sync::Arc;

use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{AttributeValue, Put, PutRequest, ReturnValue, TransactWriteItem, WriteRequest};
use aws_sdk_dynamodb::Client;

use super::errors::classify;
use super::options::DynamoOptions;
use faultline_kind::workload::{Op, Workload};
use faultline_kind::{Applied, DriverError, ReadValue, RequestClient, Response};
use faultline_model::ops::OpKind;
use faultline_model::stats::ErrorClass;
use faultline_model::value::VALUE_HEADER_MAX;

pub type Item = HashMap<String, AttributeValue>;

/// How the items of one target are named and built.
pub struct Items {
    pub table: String,
    pub hash_key: String,
    pub index: Option<String>,
    pub siblings: u32,
    pub transact_create_only: bool,
    pub workload: Arc<Workload>,
}

impl Items {
    pub fn new(options: &DynamoOptions, workload: Arc<Workload>) -> Items {
        Items {
            table: options.table.name.clone(),
            hash_key: options.table.hash_key.clone(),
            index: options.table.index.as_ref().map(|i| i.name.clone()),
            siblings: options.siblings,
            transact_create_only: options.transact_create_only,
            workload,
        }
    }

    pub fn key_name(&self, op: &Op) -> String {
        let mut key = Vec::with_capacity(24);
        self.workload.put_key(op.kind, op.key, &mut key);
        String::from_utf8_lossy(&key).into_owned()
    }

    pub fn key(&self, name: &str) -> Item {
        [(self.hash_key.clone(), AttributeValue::S(name.to_string()))].into_iter().collect()
    }

    /// The `i`-th sibling of key `name` (1-based), written with it by
    /// `transact` and `batch`.
    pub fn sibling(name: &str, i: u32) -> String {
        format!("{name}#{i}")
    }

    fn value(&self, op: &Op) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(op.value_len as usize);
        self.workload.put_value(op, &mut bytes);
        bytes
    }

    /// The whole item `op` writes under `name`.
    pub fn item(&self, op: &Op, name: &str) -> Item {
        let mut item = self.key(name);
        item.insert("v".into(), AttributeValue::B(Blob::new(self.value(op))));
        let (writer, seq) = op.write_id.map_or((0, 0), |id| (id.writer, id.seq));
        item.insert("w".into(), AttributeValue::N(writer.to_string()));
        item.insert("s".into(), AttributeValue::N(seq.to_string()));
        item.insert("gk".into(), AttributeValue::S(format!("g:{name}")));
        item.insert("gr".into(), AttributeValue::S(format!("w{writer}.{seq}")));
        item
    }
}

/// An item's value attribute.
pub fn value_of(item: &Item) -> Option<Vec<u8>> {
    match item.get("v")? {
        AttributeValue::B(b) => Some(b.as_ref().to_vec()),
        AttributeValue::S(s) => Some(s.clone().into_bytes()),
        _ => None,
    }
}

/// What an answer's item (an old image, a read) holds: none (or an empty
/// map) is no item; an item without a value attribute is nothing this
/// campaign wrote, kept as empty bytes so the history holds it as foreign.
fn read(item: Option<&Item>) -> ReadValue {
    match item {
        None => ReadValue::Nil,
        Some(i) if i.is_empty() => ReadValue::Nil,
        Some(i) => ReadValue::Bytes(value_of(i).unwrap_or_default()),
    }
}

/// One load client: an SDK client of its own (its own connection pool).
pub struct DynamoClient {
    pub client: Client,
    pub items: Items,
    pub consistent_reads: bool,
}

#[async_trait::async_trait]
impl RequestClient for DynamoClient {
    async fn execute(&self, op: &Op) -> Response {
        let name = self.items.key_name(op);
        let c = &self.client;
        let table = &self.items.table;
        match op.kind {
            OpKind::Set => c
                .put_item()
                .table_name(table)
                .set_item(Some(self.items.item(op, &name)))
                .return_values(ReturnValue::AllOld)
                .send()
                .await
                .map(|out| read(out.attributes()))
                .map_err(|e| classify(&e, true)),
            OpKind::Insert => c
                .put_item()
                .table_name(table)
                .set_item(Some(self.items.item(op, &name)))
                .condition_expression("attribute_not_exists(#k)")
                .expression_attribute_names("#k", &self.items.hash_key)
                .return_values(ReturnValue::AllOld)
                .send()
                .await
                .map(|out| read(out.attributes()))
                .map_err(|e| classify(&e, true)),
            OpKind::Get => c
                .get_item()
                .table_name(table)
                .set_key(Some(self.items.key(&name)))
                .consistent_read(self.consistent_reads)
                .send()
                .await
                .map(|out| read(out.item()))
                .map_err(|e| classify(&e, false)),
            OpKind::Del => c
                .delete_item()
                .table_name(table)
                .set_key(Some(self.items.key(&name)))
                .return_values(ReturnValue::AllOld)
                .send()
                .await
                .map(|out| read(out.attributes()))
                .map_err(|e| classify(&e, true)),
            OpKind::Update => self.update(op, &name).await,
            OpKind::Transact => self.transact(op, &name).await,
            OpKind::Batch => self.batch(op, &name).await,
            OpKind::Query => self.query(&name).await,
            OpKind::Incr => Err(DriverError {
                class: ErrorClass::Server,
                applied: Applied::No,
                code: Some("client".into()),
                message: "dynamodb targets count with `update`".into(),
            }),
            // Refused by validation (`supports`); never sent if one got here.
            OpKind::Publish => Err(DriverError {
                class: ErrorClass::Server,
                applied: Applied::No,
                code: Some("client".into()),
                message: "dynamodb targets have no `publish` op".into(),
            }),
        }
    }
}

impl DynamoClient {
    async fn update(&self, op: &Op, name: &str) -> Response {
        let item = self.items.item(op, name);
        let mut value = self.items.value(op);
        // The list holds each update's header only: enough to name it.
        value.truncate(VALUE_HEADER_MAX.min(value.len()));
        let mut names = HashMap::new();
        let mut values = HashMap::new();
        let mut sets = Vec::new();
        for field in ["v", "w", "s", "gk", "gr"] {
            names.insert(format!("#{field}"), field.to_string());
            values.insert(format!(":{field}"), item[field].clone());
            sets.push(format!("#{field} = :{field}"));
        }
        names.insert("#l".into(), "l".into());
        names.insert("#c".into(), "c".into());
        values.insert(":me".into(), AttributeValue::L(vec![AttributeValue::B(Blob::new(value))]));
        values.insert(":empty".into(), AttributeValue::L(vec![]));
        values.insert(":one".into(), AttributeValue::N("1".into()));
        let expression =
            format!("SET {}, #l = list_append(if_not_exists(#l, :empty), :me) ADD #c :one", sets.join(", "));
        self.client
            .update_item()
            .table_name(&self.items.table)
            .set_key(Some(self.items.key(name)))
            .update_expression(expression)
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values))
            .return_values(ReturnValue::AllNew)
            .send()
            .await
            .map(|_| ReadValue::None)
            .map_err(|e| classify(&e, true))
    }

    /// The key's item and its siblings', all with this op's value.
    fn group(&self, op: &Op, name: &str) -> Vec<Item> {
        let mut items = vec![self.items.item(op, name)];
        items.extend((1..=self.items.siblings).map(|i| self.items.item(op, &Items::sibling(name, i))));
        items
    }

    async fn transact(&self, op: &Op, name: &str) -> Response {
        let mut writes = Vec::new();
        for item in self.group(op, name) {
            let mut put = Put::builder().table_name(&self.items.table).set_item(Some(item));
            if self.items.transact_create_only {
                put = put
                    .condition_expression("attribute_not_exists(#k)")
                    .expression_attribute_names("#k", &self.items.hash_key);
            }
            let put = put.build().map_err(built)?;
            writes.push(TransactWriteItem::builder().put(put).build());
        }
        let sent = self.client.transact_write_items().set_transact_items(Some(writes)).send().await;
        match sent {
            Ok(_) => Ok(ReadValue::None),
            Err(e) => {
                let mut failure = classify(&e, true);
                // Why each item was refused, in the message.
                if let Some(TransactWriteItemsError::TransactionCanceledException(t)) = e.as_service_error() {
                    let reasons: Vec<&str> =
                        t.cancellation_reasons().iter().map(|r| r.code().unwrap_or("None")).collect();
                    failure.message = format!("{} (reasons: {})", failure.message, reasons.join(", "));
                }
                Err(failure)
            }
        }
    }

    async fn batch(&self, op: &Op, name: &str) -> Response {
        let mut requests = Vec::new();
        for item in self.group(op, name) {
            let put = PutRequest::builder().set_item(Some(item)).build().map_err(built)?;
            requests.push(WriteRequest::builder().put_request(put).build());
        }
        let out = self
            .client
            .batch_write_item()
            .request_items(&self.items.table, requests)
            .send()
            .await
            .map_err(|e| classify(&e, true))?;
        let unprocessed: usize = out.unprocessed_items().map_or(0, |m| m.values().map(Vec::len).sum());
        match unprocessed {
            0 => Ok(ReadValue::None),
            n => Err(DriverError {
                class: ErrorClass::Server,
                applied: Applied::Maybe,
                code: Some("UnprocessedItems".into()),
                message: format!("{n} of {} items unprocessed", 1 + self.items.siblings),
            }),
        }
    }

    async fn query(&self, name: &str) -> Response {
        let index = self.items.index.as_deref().unwrap_or_default();
        self.client
            .query()
            .table_name(&self.items.table)
            .index_name(index)
            .key_condition_expression("#g = :g")
            .expression_attribute_names("#g", "gk")
            .expression_attribute_values(":g", AttributeValue::S(format!("g:{name}")))
            .send()
            .await
            .map(|out| read(out.items().first()))
            .map_err(|e| classify(&e, false))
    }
}

/// A request the SDK's builders refused (a missing required field): never sent.
fn built(e: aws_sdk_dynamodb::error::BuildError) -> DriverError {
    DriverError { class: ErrorClass::Server, applied: Applied::No, code: Some("client".into()), message: e.to_string() }
}
