//! The workload's ops as MongoDB requests: `get` finds one document by
//! `_id`, `set` `$set`s its value (upserting), `insert` creates it, `incr`
//! `$inc`s a counter, `del` deletes it. Also the seed phase and the final
//! read the checkers compare against, and which member answered each read
//! when the cell judges reads that only the primary may answer.

use std::cell::Cell;
use std::time::Duration;

use futures::TryStreamExt;
use mongodb::bson::{doc, spec::BinarySubtype, Binary, Bson, Document};
use mongodb::event::{command::CommandEvent, EventHandler};
use mongodb::{Client, Collection};

use super::errors::classify;
use super::value_bytes;
use super::MongoOptions;
use faultline_kind::workload::{Op, Workload};
use faultline_kind::{ReadValue, RequestClient, Response};
use faultline_model::ops::OpKind;

/// Connections per client when the spec sets no `pool_size`: the seed's
/// driver default, above any profile's in-flight ops per client.
pub const DEFAULT_POOL: u32 = 100;

tokio::task_local! {
    /// The address of the member that answered the read the current task
    /// awaits, set by the command monitor of [`answered_by_monitor`].
    static ANSWERED_BY: Cell<Option<String>>;
}

/// The command monitor that tells each read which member answered it: the
/// address of the connection its last successful command ran on (a retried
/// read's retry, since only the attempt that succeeded reports success).
///
/// Why a task-local, not a `comment` carrying an op id mapped back from the
/// events: the driver (mongodb 3.9.1) runs an operation inside the future
/// its caller polls, spawning no task for it (`FindOne::execute` awaits
/// `find` and the cursor's first batch, action/find.rs:185-196;
/// `execute_operation_with_retry`, client/executor.rs:421, awaits
/// `execute_operation_on_connection` at :520), and emits the success event
/// in line, `self.emit_command_event(..).await` after the reply
/// (executor.rs:698-714), which calls an `EventHandler::Callback` in place
/// (client.rs:373-375; event.rs:132 `Self::Callback(cb) => (cb)(event)`;
/// only async callbacks and channels are spawned). So the callback runs while the
/// read's own future is polled and sees its task-local; the comment would
/// add a field to every read the server parses and a shared map to every
/// event. Events of commands outside a read (writes, a cursor's cleanup,
/// which the driver spawns) find no task-local and are dropped.
pub fn answered_by_monitor() -> EventHandler<CommandEvent> {
    EventHandler::callback(|event| {
        if let CommandEvent::Succeeded(e) = event {
            // Outside a read's scope there is nothing to tell.
            let _ = ANSWERED_BY.try_with(|a| a.set(Some(e.connection.address.to_string())));
        }
    })
}

pub struct MongoClient {
    /// Kept so the pool lives as long as the lane does.
    _client: Client,
    collection: Collection<Document>,
    workload: std::sync::Arc<Workload>,
    max_time: Option<Duration>,
    /// The client monitors its commands ([`answered_by_monitor`]): its
    /// reads say which member answered them.
    attributes_reads: bool,
}

impl MongoClient {
    pub fn new(
        client: Client,
        collection: Collection<Document>,
        workload: std::sync::Arc<Workload>,
        options: &MongoOptions,
        attributes_reads: bool,
    ) -> MongoClient {
        MongoClient { _client: client, collection, workload, max_time: options.max_time(), attributes_reads }
    }

    fn id(&self, op: &Op) -> String {
        let mut key = Vec::with_capacity(24);
        self.workload.put_key(op.kind, op.key, &mut key);
        String::from_utf8_lossy(&key).into_owned()
    }

    fn value(&self, op: &Op) -> Bson {
        let mut bytes = Vec::with_capacity(op.value_len as usize);
        self.workload.put_value(op, &mut bytes);
        Bson::Binary(Binary { subtype: BinarySubtype::Generic, bytes })
    }
}

#[async_trait::async_trait]
impl RequestClient for MongoClient {
    async fn execute(&self, op: &Op) -> Response {
        let id = self.id(op);
        let c = &self.collection;
        let done = match op.kind {
            OpKind::Get => {
                let found = c.find_one(doc! {"_id": &id}).projection(doc! {"v": 1}).max_time_opt(self.max_time).await;
                return match found {
                    Ok(Some(d)) => Ok(value_bytes(d.get("v")).map_or(ReadValue::None, ReadValue::Bytes)),
                    Ok(None) => Ok(ReadValue::Nil),
                    Err(e) => Err(classify(&e, false)),
                };
            }
            OpKind::Set => {
                c.update_one(doc! {"_id": &id}, doc! {"$set": {"v": self.value(op)}}).upsert(true).await.map(drop)
            }
            OpKind::Insert => c.insert_one(doc! {"_id": &id, "v": self.value(op)}).await.map(drop),
            OpKind::Incr => c.update_one(doc! {"_id": &id}, doc! {"$inc": {"n": 1i64}}).upsert(true).await.map(drop),
            OpKind::Del => c.delete_one(doc! {"_id": &id}).await.map(drop),
            // Refused by validation (`supports`); never sent if one got here.
            OpKind::Update | OpKind::Transact | OpKind::Batch | OpKind::Query | OpKind::Publish => {
                return Err(faultline_kind::DriverError {
                    class: faultline_model::stats::ErrorClass::Server,
                    applied: faultline_kind::Applied::No,
                    code: Some("client".into()),
                    message: format!("mongodb targets have no `{}` op", op.kind.as_str()),
                })
            }
        };
        done.map(|()| ReadValue::None).map_err(|e| classify(&e, true))
    }

    fn attributes_reads(&self) -> bool {
        self.attributes_reads
    }

    async fn execute_attributed(&self, op: &Op) -> (Response, Option<String>) {
        if op.kind != OpKind::Get {
            return (self.execute(op).await, None);
        }
        let read = async {
            let response = self.execute(op).await;
            let by = ANSWERED_BY.with(Cell::take).filter(|_| response.is_ok());
            (response, by)
        };
        ANSWERED_BY.scope(Cell::new(None), read).await
    }
}

/// Sets `max_time` only when the spec gives one.
trait MaxTimeOpt: Sized {
    fn max_time_opt(self, max_time: Option<Duration>) -> Self;
}

impl MaxTimeOpt for mongodb::action::FindOne<'_, Document> {
    fn max_time_opt(self, max_time: Option<Duration>) -> Self {
        match max_time {
            Some(t) => self.max_time(t),
            None => self,
        }
    }
}

/// Upserts keys `0..count` with the workload's value, 1,000 per batch, so a
/// campaign's reads find documents from its first op.
pub async fn seed(collection: &Collection<Document>, workload: &Workload, count: u64) -> anyhow::Result<String> {
    let started = std::time::Instant::now();
    let (min, _) = workload.value_size();
    for batch in (0..count).collect::<Vec<_>>().chunks(1000) {
        let ids: Vec<String> = batch
            .iter()
            .map(|k| {
                let mut key = Vec::new();
                workload.put_key(OpKind::Set, *k, &mut key);
                String::from_utf8_lossy(&key).into_owned()
            })
            .collect();
        // Replaces what an earlier run left, so every run starts alike.
        collection.delete_many(doc! {"_id": {"$in": &ids}}).await?;
        let docs = ids.iter().zip(batch).map(|(id, k)| {
            let op = Op { kind: OpKind::Set, key: *k, value_len: min, write_id: None, value: None, message: None };
            let mut bytes = Vec::new();
            workload.put_value(&op, &mut bytes);
            doc! {"_id": id, "v": Bson::Binary(Binary { subtype: BinarySubtype::Generic, bytes })}
        });
        collection.insert_many(docs).await?;
    }
    Ok(format!("seeded {count} documents in {:.1}s", started.elapsed().as_secs_f64()))
}

/// The `v` of each of `keys` (absent documents as None), 1,000 per query.
pub async fn read_values(collection: &Collection<Document>, keys: &[Vec<u8>]) -> anyhow::Result<Vec<Option<Vec<u8>>>> {
    let mut values = Vec::with_capacity(keys.len());
    for batch in keys.chunks(1000) {
        let ids: Vec<String> = batch.iter().map(|k| String::from_utf8_lossy(k).into_owned()).collect();
        let mut found: std::collections::HashMap<String, Vec<u8>> = std::collections::HashMap::new();
        let mut cursor = collection.find(doc! {"_id": {"$in": &ids}}).await?;
        while let Some(d) = cursor.try_next().await? {
            if let (Ok(id), Some(v)) = (d.get_str("_id"), value_bytes(d.get("v"))) {
                found.insert(id.to_string(), v);
            }
        }
        values.extend(ids.iter().map(|id| found.remove(id)));
    }
    Ok(values)
}
