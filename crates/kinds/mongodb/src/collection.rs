//! The campaign's collection on an external MongoDB. What a run writes
//! there outlives it, so a collection the run creates (it was not there) is
//! written in the run ledger before it is created and dropped when the
//! target stops, unless `keep_collection`; `faultline teardown` drops one a
//! killed run left, and a later run does not adopt it (it drops it and
//! creates it afresh). A collection that was there before the run is used
//! as it is and left. A server faultline starts takes its collection with
//! its data directory or container, so nothing is listed for it.

use futures::future::BoxFuture;
use mongodb::bson::{doc, Document};
use mongodb::error::ErrorKind;
use mongodb::Client;

use super::{errors, MongoDriver, MongoOptions};
use faultline_kind::ledger::Resource;

/// MongoDB's code for a namespace that does not exist.
const NAMESPACE_NOT_FOUND: i32 = 26;

/// The target's collection at `uri`, as the run ledger lists it.
pub fn ledger_entry(uri: &str, options: &MongoOptions) -> Resource {
    Resource::MongodbCollection {
        uri: uri.to_string(),
        database: options.database.clone(),
        collection: options.collection.clone(),
    }
}

fn name(options: &MongoOptions) -> String {
    format!("{}.{}", options.database, options.collection)
}

/// Creates the collection unless it is there, listing it in the run ledger
/// first (so a SIGKILL in between still leaves it listed); says what it did.
pub async fn prepare(client: &Client, uri: &str, options: &MongoOptions) -> anyhow::Result<String> {
    let resource = ledger_entry(uri, options);
    if faultline_kind::ledger::lists(&resource) {
        return Ok(String::new()); // created by this run, for an earlier workload
    }
    let name = name(options);
    let database = client.database(&options.database);
    let listed = database
        .list_collection_names()
        .filter(doc! {"name": &options.collection})
        .await
        .map_err(|e| anyhow::anyhow!("listCollections in `{}`: {}", options.database, errors::explain(&e)))?;
    let mut taken_back = None;
    if listed.contains(&options.collection) {
        let (claimed, unsure) = faultline_kind::ledger::claimed_elsewhere(&resource);
        let Some((path, entry)) = claimed else {
            let unsure = if unsure.is_empty() { unsure } else { format!("; {unsure}") };
            return Ok(format!("collection `{name}` exists, used as it is (and left at the end){unsure}"));
        };
        // A killed run's collection holds that run's writes: not adopted.
        anyhow::ensure!(
            !faultline_kind::ledger::faultline_alive(entry.pid),
            "collection `{name}` belongs to run {}, whose faultline (pid {}) is still running: give this target another collection",
            entry.run,
            entry.pid
        );
        drop_collection(client, options).await?;
        faultline_kind::ledger::strike(&path, &resource)?;
        taken_back = Some(format!(
            "dropped collection `{name}`, left by killed run {} (`faultline teardown` lists such collections)",
            entry.run
        ));
    }
    let own = !options.keep_collection && faultline_kind::ledger::record(resource.clone())?;
    if let Err(e) = database.create_collection(&options.collection).await {
        let refused = anyhow::anyhow!("the server refused to create collection `{name}`: {}", errors::explain(&e));
        let unlisted = if own { faultline_kind::ledger::forget(&resource) } else { Ok(()) };
        return Err(match unlisted {
            Ok(()) => refused,
            Err(f) => anyhow::anyhow!("{refused:#}; and the run ledger still lists it: {f:#}"),
        });
    }
    let kept = if options.keep_collection { ", kept at the end (keep_collection)" } else { "" };
    let done = format!("created collection `{name}`{kept}");
    Ok(match taken_back {
        Some(note) => format!("{note}; {done}"),
        None => done,
    })
}

/// Drops the collection when this run created it (its ledger lists it);
/// says what it did.
pub async fn clean_up(client: &Client, uri: &str, options: &MongoOptions) -> anyhow::Result<String> {
    let resource = ledger_entry(uri, options);
    if !faultline_kind::ledger::lists(&resource) {
        return Ok(String::new());
    }
    drop_collection(client, options).await?;
    faultline_kind::ledger::forget(&resource)?;
    Ok(format!("dropped collection `{}`", name(options)))
}

/// Drops a collection as a run ledger lists it (`faultline teardown`):
/// the kind's [`faultline_kind::registry::Kind::remove_listed`].
pub fn drop_listed(resource: &Resource) -> BoxFuture<'_, anyhow::Result<String>> {
    Box::pin(async move {
        let Resource::MongodbCollection { uri, database, collection } = resource else {
            anyhow::bail!("{} is not a MongoDB collection", resource.describe())
        };
        let options =
            MongoOptions { database: database.clone(), collection: collection.clone(), ..MongoOptions::default() };
        let driver = MongoDriver { options };
        let client = driver.admin_client(uri).await?;
        let dropped = drop_collection(&client, &driver.options).await;
        client.shutdown().immediate(true).await;
        dropped.map(|()| format!("dropped collection `{}`", name(&driver.options)))
    })
}

/// Drops the collection; one already gone is no error.
async fn drop_collection(client: &Client, options: &MongoOptions) -> anyhow::Result<()> {
    match client.database(&options.database).collection::<Document>(&options.collection).drop().await {
        Err(e) if !matches!(*e.kind, ErrorKind::Command(ref c) if c.code == NAMESPACE_NOT_FOUND) => {
            Err(anyhow::anyhow!("drop `{}`: {}", name(options), errors::explain(&e)))
        }
        _ => Ok(()),
    }
}
