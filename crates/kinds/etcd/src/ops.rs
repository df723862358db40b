//! The workload's ops as etcd requests, each on a member in turn: `get` a range read
//! of the key (linearizable or serializable, as the target's `read`
//! option says), `set` a put, `del` a delete, and `insert` a transaction
//! that puts the key only if it has never been created (its create
//! revision is 0), etcd's compare-and-set. Values are the workload's tagged
//! bytes, so the history checkers judge etcd histories unchanged. Also the
//! final read the checkers compare against.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Compare, CompareOp, GetOptions, KvClient, MaintenanceClient, Txn, TxnOp};

use super::errors::classify;
use faultline_kind::workload::{Op, Workload};
use faultline_kind::{Applied, DriverError, ReadValue, RequestClient, Response};
use faultline_model::ops::OpKind;
use faultline_model::stats::ErrorClass;

/// One member as a load client reaches it.
pub struct Member {
    /// `host:port`, named in the examples of its failures.
    pub address: String,
    pub kv: KvClient,
    /// Asks the member's status while it is passed over.
    pub maintenance: MaintenanceClient,
}

/// A load client: a connection to every member of the target's URI, used
/// in turn op by op, as etcd's own client balances its endpoints. A member
/// whose connection failed is passed over until it answers a status probe
/// again (asked every [`PROBE_EVERY`] in the background), as that client's
/// balancer leaves an endpoint in transient failure out of its turns; one
/// that accepts calls and never answers them (cut off from its peers, no
/// quorum) keeps its turn, as it does there.
pub struct EtcdClient {
    members: Arc<[Member]>,
    /// Member i is passed over.
    down: Arc<[AtomicBool]>,
    next: AtomicUsize,
    workload: Arc<Workload>,
    serializable: bool,
}

/// How often a passed-over member is asked whether it is back.
const PROBE_EVERY: Duration = Duration::from_millis(200);

impl EtcdClient {
    pub fn new(members: Vec<Member>, workload: Arc<Workload>, serializable: bool) -> EtcdClient {
        let down = members.iter().map(|_| AtomicBool::new(false)).collect();
        EtcdClient { members: members.into(), down, next: AtomicUsize::new(0), workload, serializable }
    }

    /// The next member in turn that is not passed over (or the next one,
    /// when all are).
    fn pick(&self) -> usize {
        let n = self.members.len();
        let first = self.next.fetch_add(1, Ordering::Relaxed);
        (0..n).map(|i| (first + i) % n).find(|&i| !self.down[i].load(Ordering::Relaxed)).unwrap_or(first % n)
    }

    /// Passes member `i` over until a status probe finds it back; the probe
    /// ends with the client.
    fn pass_over(&self, i: usize) {
        if self.down[i].swap(true, Ordering::Relaxed) {
            return;
        }
        let down = Arc::downgrade(&self.down);
        let mut maintenance = self.members[i].maintenance.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(PROBE_EVERY).await;
                let Some(down) = down.upgrade() else { return };
                if let Ok(Ok(_)) = tokio::time::timeout(PROBE_EVERY * 5, maintenance.status()).await {
                    down[i].store(false, Ordering::Relaxed);
                    return;
                }
            }
        });
    }

    fn key(&self, op: &Op) -> Vec<u8> {
        let mut key = Vec::with_capacity(24);
        self.workload.put_key(op.kind, op.key, &mut key);
        key
    }

    fn value(&self, op: &Op) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(op.value_len as usize);
        self.workload.put_value(op, &mut bytes);
        bytes
    }

    /// `op` on member `i`.
    async fn execute_on(&self, i: usize, op: &Op) -> Response {
        // A clone shares the member's one HTTP/2 connection.
        let mut kv = self.members[i].kv.clone();
        let key = self.key(op);
        let response = match op.kind {
            OpKind::Get => {
                let options = GetOptions::new();
                let options = if self.serializable { options.with_serializable() } else { options };
                match kv.get(key, Some(options)).await {
                    Ok(found) => {
                        Ok(found.kvs().first().map_or(ReadValue::Nil, |kv| ReadValue::Bytes(kv.value().to_vec())))
                    }
                    Err(e) => Err(classify(&e, false)),
                }
            }
            OpKind::Set => {
                kv.put(key, self.value(op), None).await.map(|_| ReadValue::None).map_err(|e| classify(&e, true))
            }
            OpKind::Del => kv.delete(key, None).await.map(|_| ReadValue::None).map_err(|e| classify(&e, true)),
            OpKind::Insert => {
                let txn = Txn::new()
                    .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
                    .and_then([TxnOp::put(key, self.value(op), None)]);
                match kv.txn(txn).await {
                    Ok(done) if done.succeeded() => Ok(ReadValue::None),
                    Ok(_) => Err(DriverError {
                        class: ErrorClass::Server,
                        applied: Applied::No,
                        code: Some("key exists".into()),
                        message: "the key was created before: the transaction's compare failed".into(),
                    }),
                    Err(e) => Err(classify(&e, true)),
                }
            }
            // Refused by validation (`supports`); never sent if one got here.
            OpKind::Incr | OpKind::Update | OpKind::Transact | OpKind::Batch | OpKind::Query | OpKind::Publish => {
                Err(DriverError {
                    class: ErrorClass::Server,
                    applied: Applied::No,
                    code: Some("client".into()),
                    message: format!("etcd targets have no `{}` op", op.kind.as_str()),
                })
            }
        };
        response.map_err(|mut e| {
            if e.class == ErrorClass::Connection {
                self.pass_over(i);
            }
            // The example names the member that failed it.
            e.message = format!("{}: {}", self.members[i].address, e.message);
            e
        })
    }
}

#[async_trait::async_trait]
impl RequestClient for EtcdClient {
    async fn execute(&self, op: &Op) -> Response {
        self.execute_on(self.pick(), op).await
    }

    /// Which member answered is known for every op (the client chose it):
    /// a stale read's witness names it.
    fn attributes_reads(&self) -> bool {
        true
    }

    async fn execute_attributed(&self, op: &Op) -> (Response, Option<String>) {
        let i = self.pick();
        (self.execute_on(i, op).await, Some(self.members[i].address.clone()))
    }
}

/// The values of `keys` (absent keys as None), each read linearizably.
pub async fn read_values(kv: &mut KvClient, keys: &[Vec<u8>]) -> anyhow::Result<Vec<Option<Vec<u8>>>> {
    let mut values = Vec::with_capacity(keys.len());
    // 128 reads per transaction: one round trip each, within etcd's
    // default limit of 128 operations per transaction.
    for batch in keys.chunks(128) {
        let reads: Vec<TxnOp> = batch.iter().map(|k| TxnOp::get(k.clone(), None)).collect();
        let done = kv.txn(Txn::new().and_then(reads)).await.map_err(|e| anyhow::anyhow!(super::errors::explain(&e)))?;
        for response in done.op_responses() {
            let etcd_client::TxnOpResponse::Get(found) = response else {
                anyhow::bail!("a read in the final transaction came back as another kind of response")
            };
            values.push(found.kvs().first().map(|kv| kv.value().to_vec()));
        }
    }
    anyhow::ensure!(values.len() == keys.len(), "the final read returned {} of {} keys", values.len(), keys.len());
    Ok(values)
}
