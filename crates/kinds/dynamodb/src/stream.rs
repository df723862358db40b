//! The table's stream (DynamoDB Streams, `NEW_AND_OLD_IMAGES`), read for the
//! hot-key checker: one record per committed change of an item, with the
//! item it replaced and the item it left, in the order the item changed.
//!
//! The reader keeps, per shard, the last sequence number it has read, so each
//! cell's check reads only the records written since the last one (the
//! records already there when the run began are passed over in `prepare`).
//! Shards are read parents first, as their records for one item follow that
//! order. A record may reach the stream a moment after its call was answered
//! (the service says "near real time"), and a page can come back empty
//! before later records: the keys whose last record does not yet leave their
//! stored item are read again for up to the table's `stream_settle` window.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use aws_sdk_dynamodbstreams::types::{AttributeValue, Shard, ShardIteratorType};
use aws_sdk_dynamodbstreams::Client;

use faultline_model::items::StreamChange;

/// Records per GetRecords call (the API's most).
const PAGE: i32 = 1000;
/// Pages read from one shard in one pass, so a stream that never ends (an
/// open shard the load still writes to) cannot hold the check forever.
const MOST_PAGES: usize = 100_000;

/// Where the reader is in one table's stream.
#[derive(Default)]
pub struct StreamCursor {
    /// The stream's ARN, learned when the table is prepared.
    pub arn: Option<String>,
    /// The last sequence number read, per shard.
    after: HashMap<String, String>,
}

/// The key's records read so far, by key name.
pub type Changes = HashMap<String, Vec<StreamChange>>;

impl StreamCursor {
    /// Reads every record written since the last read; keeps those of
    /// `wanted` keys (hash key attribute `hash_key`) in `changes`.
    pub async fn read(
        &mut self,
        client: &Client,
        hash_key: &str,
        wanted: &HashSet<&str>,
        changes: &mut Changes,
    ) -> anyhow::Result<usize> {
        let Some(arn) = self.arn.clone() else { anyhow::bail!("the table's stream was never found") };
        let mut read = 0;
        for shard in lineage(shards(client, &arn).await?) {
            let Some(id) = shard.shard_id() else { continue };
            let mut ask = client.get_shard_iterator().stream_arn(&arn).shard_id(id);
            ask = match self.after.get(id) {
                Some(seq) => ask.shard_iterator_type(ShardIteratorType::AfterSequenceNumber).sequence_number(seq),
                None => ask.shard_iterator_type(ShardIteratorType::TrimHorizon),
            };
            let out = ask
                .send()
                .await
                .map_err(|e| anyhow::anyhow!("GetShardIterator of shard {id}: {}", super::errors::explain(&e)))?;
            let mut iterator = out.shard_iterator().map(str::to_string);
            for _ in 0..MOST_PAGES {
                let Some(it) = iterator.take() else { break };
                let page = client
                    .get_records()
                    .shard_iterator(it)
                    .limit(PAGE)
                    .send()
                    .await
                    .map_err(|e| anyhow::anyhow!("GetRecords of shard {id}: {}", super::errors::explain(&e)))?;
                for record in page.records() {
                    let Some(change) = record.dynamodb() else { continue };
                    read += 1;
                    if let Some(seq) = change.sequence_number() {
                        self.after.insert(id.to_string(), seq.to_string());
                    }
                    let key = match change.keys().and_then(|k| k.get(hash_key)) {
                        Some(AttributeValue::S(key)) => key.as_str(),
                        _ => continue,
                    };
                    if wanted.contains(key) {
                        changes.entry(key.to_string()).or_default().push(StreamChange {
                            old: image_value(change.old_image()),
                            new: image_value(change.new_image()),
                        });
                    }
                }
                if page.records().is_empty() {
                    break;
                }
                iterator = page.next_shard_iterator().map(str::to_string);
            }
        }
        Ok(read)
    }

    /// Reads until every key's last record leaves the item `stored` says it
    /// holds, or `window` (`table.stream_settle`) has passed (then what was
    /// read stands, and the checker judges it).
    pub async fn settled(
        &mut self,
        client: &Client,
        hash_key: &str,
        stored: &HashMap<String, Option<Vec<u8>>>,
        window: Duration,
    ) -> anyhow::Result<Changes> {
        let wanted: HashSet<&str> = stored.keys().map(String::as_str).collect();
        let mut changes = Changes::new();
        let deadline = tokio::time::Instant::now() + window;
        loop {
            self.read(client, hash_key, &wanted, &mut changes).await?;
            let behind = stored.iter().any(|(key, value)| {
                let last = changes.get(key).and_then(|c| c.last()).and_then(|c| c.new.as_ref());
                last != value.as_ref()
            });
            if !behind || tokio::time::Instant::now() >= deadline {
                return Ok(changes);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Every shard of the stream.
async fn shards(client: &Client, arn: &str) -> anyhow::Result<Vec<Shard>> {
    let mut shards = Vec::new();
    let mut start: Option<String> = None;
    loop {
        let out = client
            .describe_stream()
            .stream_arn(arn)
            .set_exclusive_start_shard_id(start.take())
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("DescribeStream {arn}: {}", super::errors::explain(&e)))?;
        let Some(description) = out.stream_description() else { return Ok(shards) };
        shards.extend(description.shards().iter().cloned());
        match description.last_evaluated_shard_id() {
            Some(last) => start = Some(last.to_string()),
            None => return Ok(shards),
        }
    }
}

/// Shards ordered parents first: a shard whose parent is in the list comes
/// after it (the parent's records of an item precede the child's).
fn lineage(mut shards: Vec<Shard>) -> Vec<Shard> {
    let mut ordered: Vec<Shard> = Vec::with_capacity(shards.len());
    while !shards.is_empty() {
        let listed: HashSet<String> = shards.iter().filter_map(|s| s.shard_id().map(str::to_string)).collect();
        // Ready: no parent, or a parent not waiting (read, or trimmed away).
        let (ready, waiting): (Vec<Shard>, Vec<Shard>) =
            shards.into_iter().partition(|s| s.parent_shard_id().is_none_or(|p| !listed.contains(p)));
        if ready.is_empty() {
            // A cycle cannot happen in a real stream; read them as listed.
            ordered.extend(waiting);
            break;
        }
        ordered.extend(ready);
        shards = waiting;
    }
    ordered
}

/// The value an image holds: None for no image (the item did not exist),
/// empty bytes for an item without a value attribute.
fn image_value(image: Option<&HashMap<String, AttributeValue>>) -> Option<Vec<u8>> {
    let image = image.filter(|i| !i.is_empty())?;
    Some(match image.get("v") {
        Some(AttributeValue::B(b)) => b.as_ref().to_vec(),
        Some(AttributeValue::S(s)) => s.clone().into_bytes(),
        _ => Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(id: &str, parent: Option<&str>) -> Shard {
        Shard::builder().shard_id(id).set_parent_shard_id(parent.map(str::to_string)).build()
    }

    #[test]
    fn shards_are_read_parents_first() {
        let listed = vec![shard("c", Some("b")), shard("b", Some("a")), shard("a", None), shard("x", Some("gone"))];
        let ids: Vec<String> = lineage(listed).iter().map(|s| s.shard_id().unwrap().to_string()).collect();
        assert_eq!(ids, ["a", "x", "b", "c"]);
    }

    #[test]
    fn an_absent_image_is_no_item_and_one_without_a_value_is_foreign() {
        assert_eq!(image_value(None), None);
        assert_eq!(image_value(Some(&HashMap::new())), None);
        let foreign: HashMap<String, AttributeValue> = [("pk".to_string(), AttributeValue::S("k".into()))].into();
        assert_eq!(image_value(Some(&foreign)), Some(Vec::new()));
        let ours: HashMap<String, AttributeValue> = [("v".to_string(), AttributeValue::S("abc".into()))].into();
        assert_eq!(image_value(Some(&ours)), Some(b"abc".to_vec()));
    }

    /// A stream whose record of a key's last change shows up only on the
    /// 13th pass (about 2.4 s of re-reads in): read within a window that
    /// covers it, judged without it when the window is shorter.
    #[tokio::test]
    async fn a_record_that_reaches_the_stream_late_is_read_within_the_settle_window() {
        use std::sync::{Arc, Mutex};

        use serde_json::{json, Value};

        const LATE_PASS: usize = 13;
        let image = |v: &str| json!({"pk": {"S": "k1"}, "v": {"S": v}});
        let record = |seq: usize, old: Option<&str>, new: &str| {
            let mut change = json!({"Keys": {"pk": {"S": "k1"}}, "NewImage": image(new), "SequenceNumber": seq.to_string(), "StreamViewType": "NEW_AND_OLD_IMAGES"});
            if let Some(old) = old {
                change["OldImage"] = image(old);
            }
            json!({"eventID": seq.to_string(), "eventName": "MODIFY", "dynamodb": change})
        };
        let records = vec![record(1, None, "a"), record(2, Some("a"), "b")];
        let stored: HashMap<String, Option<Vec<u8>>> = [("k1".to_string(), Some(b"b".to_vec()))].into();

        for (window, passes, seen) in [(Duration::ZERO, 1, 1), (Duration::from_secs(60), LATE_PASS, 2)] {
            // Passes so far (DescribeStream starts each).
            let passes_made = Arc::new(Mutex::new(0usize));
            let made = Arc::clone(&passes_made);
            let records = records.clone();
            let uri = crate::scripted::serve(move |call, body| {
                let mut made = made.lock().unwrap();
                let after = |iterator: &str| iterator.trim_start_matches("after:").parse::<usize>().unwrap_or(0);
                match call {
                    "DescribeStream" => {
                        *made += 1;
                        json!({"StreamDescription": {"StreamArn": "arn:stream", "StreamStatus": "ENABLED", "StreamViewType": "NEW_AND_OLD_IMAGES", "Shards": [{"ShardId": "shard-1", "SequenceNumberRange": {"StartingSequenceNumber": "1"}}]}})
                    }
                    "GetShardIterator" => {
                        let seq = body["SequenceNumber"].as_str().unwrap_or("0");
                        json!({"ShardIterator": format!("after:{seq}")})
                    }
                    "GetRecords" => {
                        let from = after(body["ShardIterator"].as_str().unwrap_or_default());
                        let visible = if *made >= LATE_PASS { 2 } else { 1 };
                        let page: Vec<Value> = records[from.min(visible)..visible].to_vec();
                        json!({"Records": page, "NextShardIterator": format!("after:{}", from.max(visible))})
                    }
                    other => panic!("the reader made an unexpected call: {other}"),
                }
            })
            .await;
            let driver = crate::DynamoDriver::new(Default::default());
            let mut cursor = StreamCursor { arn: Some("arn:stream".into()), ..Default::default() };
            let changes = cursor.settled(&driver.streams_client(&uri).unwrap(), "pk", &stored, window).await.unwrap();
            assert_eq!(changes["k1"].len(), seen, "window {window:?}: {:?}", changes["k1"]);
            // It read until the last record came, and no longer.
            assert_eq!(*passes_made.lock().unwrap(), passes, "window {window:?}");
            if seen == 2 {
                assert_eq!(changes["k1"][1], StreamChange { old: Some(b"a".to_vec()), new: Some(b"b".to_vec()) });
            }
        }
    }
}
