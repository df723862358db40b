//! The DynamoDB API (the service, DynamoDB Local, moto, a shim over another
//! store), driven through the official AWS SDK for Rust. Every load client
//! is an SDK client of its own, with the SDK's retries off unless the spec
//! turns a mode on (a shed call is counted, not hidden), signed with static
//! credentials for the target's endpoint. Its ops are request futures run
//! by the engine's request/response executor; the engine owns deadlines.
//!
//! The SDK is built lean: no `aws-config` (no credential chain, no IMDS),
//! the smithy HTTP client on hyper with rustls on ring (already built for
//! the MongoDB driver), tokio for sleeps.

mod errors;
mod insecure;
mod ops;
pub mod options;
#[cfg(test)]
mod scripted;
mod stream;
mod table;

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use anyhow::Context;
use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes};
use aws_sdk_dynamodb::Client;
use aws_smithy_http_client::tls;
use futures::future::BoxFuture;

use faultline_kind::ledger::{DynamoAccess, Resource};
use faultline_kind::registry::{parse_options, Kind};
use faultline_kind::workload::Workload;
use faultline_kind::{Connection, ServerInfo, StoredItems, TargetDriver};
use faultline_model::items::IndexSettle;
use faultline_model::items::StoredItem;
use faultline_model::ops::OpKind;
use faultline_model::value::{parse_header, ValueId};
use faultline_spec::KindCost;
use ops::{value_of, DynamoClient, Item, Items};
pub use options::DynamoOptions;
use options::{Projection, RetrySpec};
use stream::StreamCursor;

/// The kind as the build registers it (the CLI's `kinds::KINDS`).
pub const KIND: Kind = Kind {
    name: "dynamodb",
    driver: |options| {
        let options: DynamoOptions = parse_options(options)?;
        options.check().map_err(|(field, e)| (field.to_string(), e))?;
        Ok(Arc::new(DynamoDriver::new(options)))
    },
    members: Some(|| Arc::new(DynamoTopology)),
    options: Some(|generator| generator.subschema_for::<DynamoOptions>()),
    faults: Vec::new,
    remove_listed: Some(DynamoDriver::delete_listed_table),
};

pub struct DynamoDriver {
    pub options: DynamoOptions,
    /// Whether this run created the table, so teardown deletes only its own.
    created: AtomicBool,
}

/// The settings both SDK clients (tables, streams) are built from.
struct SdkSettings {
    region: Region,
    credentials: Credentials,
    retry: RetryConfig,
    timeouts: TimeoutConfig,
    http: aws_sdk_dynamodb::config::SharedHttpClient,
}

impl DynamoDriver {
    pub fn new(options: DynamoOptions) -> DynamoDriver {
        DynamoDriver { options, created: AtomicBool::new(false) }
    }

    /// Where the checker is in the stream of this target's table at `uri`.
    /// Each cell builds a driver of its own (a scenario may overlay
    /// options), while the table and its stream outlive them all: the
    /// cursor is kept per endpoint and table for the whole run.
    fn stream_cursor(&self, uri: &str) -> Arc<tokio::sync::Mutex<StreamCursor>> {
        static CURSORS: OnceLock<Mutex<HashMap<String, Arc<tokio::sync::Mutex<StreamCursor>>>>> = OnceLock::new();
        let mut cursors = CURSORS.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(cursors.entry(format!("{uri} {}", self.options.table.name)).or_default())
    }

    /// What every SDK client of this target shares: where, as whom, with
    /// the spec's retries, timeouts and TLS.
    fn sdk(&self) -> anyhow::Result<SdkSettings> {
        let o = &self.options;
        let region = o.region.clone().or_else(|| std::env::var("AWS_REGION").ok()).unwrap_or("us-east-1".into());
        let credentials = match &o.credentials {
            Some(c) => Credentials::new(&c.access_key_id, &c.secret_access_key, c.session_token.clone(), None, "spec"),
            None => match (std::env::var("AWS_ACCESS_KEY_ID"), std::env::var("AWS_SECRET_ACCESS_KEY")) {
                (Ok(id), Ok(secret)) => {
                    Credentials::new(id, secret, std::env::var("AWS_SESSION_TOKEN").ok(), None, "environment")
                }
                _ => Credentials::new("faultline", "faultline", None, None, "test"),
            },
        };
        let retry = match o.retries {
            RetrySpec::Off => RetryConfig::disabled(),
            RetrySpec::Standard { max_attempts } => RetryConfig::standard().with_max_attempts(max_attempts),
            RetrySpec::Adaptive { max_attempts } => RetryConfig::adaptive().with_max_attempts(max_attempts),
        };
        let mut timeouts = TimeoutConfig::builder();
        timeouts.set_connect_timeout(Some(o.connect_timeout.0)).set_read_timeout(o.read_timeout.map(|d| d.0));
        let http = match o.insecure {
            true => insecure::http_client(),
            false => {
                let mut trust = tls::TrustStore::default();
                if let Some(path) = &o.ca_file {
                    let pem =
                        faultline_model::input_file::read(Path::new(path), faultline_model::input_file::MAX_TEXT_BYTES)
                            .with_context(|| format!("cannot read ca_file {path}"))?;
                    trust = trust.with_pem_certificate(pem.as_slice());
                }
                aws_smithy_http_client::Builder::new()
                    .tls_provider(tls::Provider::Rustls(tls::rustls_provider::CryptoMode::Ring))
                    .tls_context(tls::TlsContext::builder().with_trust_store(trust).build().context("TLS settings")?)
                    .build_https()
            }
        };
        Ok(SdkSettings { region: Region::new(region), credentials, retry, timeouts: timeouts.build(), http })
    }

    /// This target's table at `endpoint`, as the run ledger lists it.
    fn ledger_entry(&self, endpoint: &str) -> Resource {
        let o = &self.options;
        let credentials = o.credentials.as_ref();
        Resource::DynamodbTable {
            endpoint: endpoint.to_string(),
            table: o.table.name.clone(),
            access: DynamoAccess {
                region: o.region.clone(),
                access_key_id: credentials.map(|c| c.access_key_id.clone()),
                secret_access_key: credentials.map(|c| c.secret_access_key.clone()),
                session_token: credentials.and_then(|c| c.session_token.clone()),
                insecure: o.insecure,
                ca_file: o.ca_file.clone(),
            },
        }
    }

    /// A table a killed run created (its ledger lists it) is not adopted:
    /// it holds that run's writes. Deleted, to be created afresh, with a
    /// note saying so; while that run's faultline is alive, refused.
    async fn take_back_a_killed_runs_table(
        &self,
        client: &Client,
        resource: &Resource,
    ) -> anyhow::Result<Option<String>> {
        let (claimed, unsure) = faultline_kind::ledger::claimed_elsewhere(resource);
        let Some((path, entry)) = claimed else { return Ok((!unsure.is_empty()).then_some(unsure)) };
        let name = &self.options.table.name;
        anyhow::ensure!(
            !faultline_kind::ledger::faultline_alive(entry.pid),
            "table `{name}` belongs to run {}, whose faultline (pid {}) is still running: give this target another table.name",
            entry.run,
            entry.pid
        );
        anyhow::ensure!(
            self.options.table.create,
            "table `{name}` was left by killed run {} and table.create is false, so faultline would not create it afresh: `faultline teardown --run {}` removes it",
            entry.run,
            entry.run
        );
        table::delete(client, name).await?;
        table::wait_gone(client, name, self.options.table.active_timeout.0).await?;
        faultline_kind::ledger::strike(&path, resource)?;
        Ok(Some(format!(
            "deleted table `{name}`, left by killed run {} (`faultline teardown` lists such tables)",
            entry.run
        )))
    }

    /// Deletes a table as a run ledger lists it (`faultline teardown`):
    /// the kind's [`faultline_kind::registry::Kind::remove_listed`].
    fn delete_listed_table(resource: &Resource) -> BoxFuture<'_, anyhow::Result<String>> {
        Box::pin(async move {
            let Resource::DynamodbTable { endpoint, table, access } = resource else {
                anyhow::bail!("{} is not a DynamoDB table", resource.describe())
            };
            let options = DynamoOptions {
                region: access.region.clone(),
                credentials: match (&access.access_key_id, &access.secret_access_key) {
                    (Some(id), Some(secret)) => Some(options::CredentialsSpec {
                        access_key_id: id.clone(),
                        secret_access_key: secret.clone(),
                        session_token: access.session_token.clone(),
                    }),
                    _ => None,
                },
                insecure: access.insecure,
                ca_file: access.ca_file.clone(),
                ..DynamoOptions::default()
            };
            table::delete(&DynamoDriver::new(options).client(endpoint)?, table).await
        })
    }

    /// An SDK client for `endpoint`.
    fn client(&self, endpoint: &str) -> anyhow::Result<Client> {
        let s = self.sdk()?;
        let config = aws_sdk_dynamodb::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(s.region)
            .endpoint_url(endpoint)
            .credentials_provider(s.credentials)
            .retry_config(s.retry)
            .timeout_config(s.timeouts)
            .http_client(s.http)
            .build();
        Ok(Client::from_conf(config))
    }

    /// A DynamoDB Streams client: at `streams_endpoint`, else the table's
    /// own endpoint (as DynamoDB Local and moto serve both).
    fn streams_client(&self, endpoint: &str) -> anyhow::Result<aws_sdk_dynamodbstreams::Client> {
        let s = self.sdk()?;
        let config = aws_sdk_dynamodbstreams::Config::builder()
            .behavior_version(aws_sdk_dynamodbstreams::config::BehaviorVersion::latest())
            .region(s.region)
            .endpoint_url(self.options.streams_endpoint.as_deref().unwrap_or(endpoint))
            .credentials_provider(s.credentials)
            .retry_config(s.retry)
            .timeout_config(s.timeouts)
            .http_client(s.http)
            .build();
        Ok(aws_sdk_dynamodbstreams::Client::from_conf(config))
    }

    /// The items of `names`, read consistently, 100 per BatchGetItem.
    async fn get_items(&self, client: &Client, names: &[String]) -> anyhow::Result<HashMap<String, Item>> {
        let t = &self.options.table;
        let mut found = HashMap::new();
        for chunk in names.chunks(100) {
            let mut keys: Vec<Item> = chunk
                .iter()
                .map(|n| [(t.hash_key.clone(), AttributeValue::S(n.clone()))].into_iter().collect())
                .collect();
            // Unprocessed keys come back to be asked again.
            for _ in 0..20 {
                if keys.is_empty() {
                    break;
                }
                let ask = KeysAndAttributes::builder()
                    .set_keys(Some(std::mem::take(&mut keys)))
                    .consistent_read(self.options.consistent_reads)
                    .build()?;
                let out = client
                    .batch_get_item()
                    .request_items(&t.name, ask)
                    .send()
                    .await
                    .map_err(|e| anyhow::anyhow!("BatchGetItem: {}", errors::explain(&e)))?;
                for item in out.responses().and_then(|r| r.get(&t.name)).into_iter().flatten() {
                    if let Some(AttributeValue::S(name)) = item.get(&t.hash_key) {
                        found.insert(name.clone(), item.clone());
                    }
                }
                keys =
                    out.unprocessed_keys().and_then(|u| u.get(&t.name)).map(|k| k.keys().to_vec()).unwrap_or_default();
            }
            anyhow::ensure!(keys.is_empty(), "BatchGetItem left {} keys unprocessed after 20 asks", keys.len());
        }
        Ok(found)
    }

    /// The index entries of every key in `names`, and how each came to
    /// agree with its stored item: a global secondary index is updated after
    /// the table (on the service, asynchronously), so the keys that disagree
    /// are read again, less often as the wait grows, until they agree or
    /// `window` (`table.index.settle`) has passed since the first pass; then
    /// what was read last stands. A key that agreed only on a later read
    /// settled late by the time since its first read.
    async fn settled_index_entries(
        &self,
        client: &Client,
        index: &str,
        window: Duration,
        names: &[String],
        found: &HashMap<String, Item>,
    ) -> anyhow::Result<HashMap<String, (Vec<Item>, IndexSettle)>> {
        let agrees = |name: &String, entries: &[Item]| match (found.get(name), entries) {
            (None, []) => true,
            (Some(i), [e]) => i.get("gr") == e.get("gr"),
            _ => false,
        };
        let at_once = IndexSettle { window, late: None };
        let mut settled = HashMap::new();
        let mut lagging = Vec::new();
        for name in names {
            let entries = self.index_entries(client, index, name).await?;
            if !agrees(name, &entries) {
                lagging.push((name.clone(), tokio::time::Instant::now()));
            }
            settled.insert(name.clone(), (entries, at_once));
        }
        let deadline = tokio::time::Instant::now() + window;
        let mut pause = Duration::from_millis(100);
        while !lagging.is_empty() {
            let now = tokio::time::Instant::now();
            if now >= deadline {
                break;
            }
            tokio::time::sleep(pause.min(deadline - now)).await;
            pause = (pause * 2).min(Duration::from_secs(1));
            let mut still = Vec::new();
            for (name, first_read) in lagging {
                let again = self.index_entries(client, index, &name).await?;
                let settle = match agrees(&name, &again) {
                    true => IndexSettle { window, late: Some(first_read.elapsed()) },
                    false => {
                        still.push((name.clone(), first_read));
                        at_once
                    }
                };
                settled.insert(name, (again, settle));
            }
            lagging = still;
        }
        Ok(settled)
    }

    /// The index entries of key `name`'s group.
    async fn index_entries(&self, client: &Client, index: &str, name: &str) -> anyhow::Result<Vec<Item>> {
        let mut entries = Vec::new();
        let mut start = None;
        loop {
            let out = client
                .query()
                .table_name(&self.options.table.name)
                .index_name(index)
                .key_condition_expression("#g = :g")
                .expression_attribute_names("#g", "gk")
                .expression_attribute_values(":g", AttributeValue::S(format!("g:{name}")))
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| anyhow::anyhow!("Query `{index}`: {}", errors::explain(&e)))?;
            entries.extend(out.items().iter().cloned());
            match out.last_evaluated_key() {
                Some(k) => start = Some(k.clone()),
                None => return Ok(entries),
            }
        }
    }
}

/// Why an item is not one write's whole item: its `w`, `s` and index key
/// must name the write its value names.
fn torn(item: &Item) -> Option<String> {
    let value = value_of(item)?;
    let (_, id) = parse_header(&value)?;
    let number = |field: &str| match item.get(field) {
        Some(AttributeValue::N(n)) => n.parse::<u64>().ok(),
        _ => None,
    };
    let text = |field: &str| match item.get(field) {
        Some(AttributeValue::S(s)) => Some(s.as_str()),
        _ => None,
    };
    let describe = |id: ValueId| format!("write {}.{}", id.writer, id.seq);
    if number("w") != Some(u64::from(id.writer)) || number("s") != Some(u64::from(id.seq)) {
        return Some(format!(
            "its value is {} but w/s say writer {:?}, seq {:?}",
            describe(id),
            number("w"),
            number("s")
        ));
    }
    if text("gr").is_some_and(|gr| gr != format!("w{}.{}", id.writer, id.seq)) {
        return Some(format!("its value is {} but its index key gr is {:?}", describe(id), text("gr")));
    }
    None
}

impl faultline_spec::KindInfo for DynamoDriver {
    fn default_command(&self) -> &'static str {
        "moto_server"
    }

    fn check_uri(&self, uri: &str) -> Result<(), String> {
        let usage = "write http://HOST:PORT or https://HOST[:PORT] (the endpoint, e.g. https://dynamodb.us-east-1.amazonaws.com)";
        let Some(rest) = uri.strip_prefix("http://").or_else(|| uri.strip_prefix("https://")) else {
            return Err(format!("is not an http:// or https:// endpoint: {usage}"));
        };
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        let host_port = authority.rsplit('@').next().unwrap_or_default();
        let (host, port) = match host_port.rsplit_once(':') {
            Some((h, p)) if !p.contains(']') => (h, Some(p)),
            _ => (host_port, None),
        };
        let host_ok = !host.is_empty() && !host.contains(char::is_whitespace);
        let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok_and(|p| p > 0));
        match (host_ok, port_ok) {
            (true, true) => Ok(()),
            (false, _) => Err(format!("has no host: {usage}")),
            (true, false) => Err(format!("has a port that is not a number from 1 to 65535: {usage}")),
        }
    }

    fn supports(&self, op: OpKind) -> bool {
        match op {
            OpKind::Incr | OpKind::Publish => false,
            OpKind::Query => self.options.table.index.is_some(),
            _ => true,
        }
    }

    fn returns_old_images(&self) -> bool {
        true
    }

    /// A client is an SDK client; an op in flight holds a pooled HTTP
    /// connection of its own (measured: docs/spec.md#memory).
    fn cost(&self) -> KindCost {
        KindCost { connection: 64 << 10, slot: 8 << 10 }
    }
}

#[async_trait::async_trait]
impl TargetDriver for DynamoDriver {
    fn listen_args(&self, port: u16, _data_dir: &Path) -> Vec<String> {
        // moto keeps everything in memory; another server takes its own args.
        vec!["-H".into(), "127.0.0.1".into(), "-p".into(), port.to_string()]
    }

    fn uri(&self, host: &str, port: u16) -> String {
        format!("http://{host}:{port}")
    }

    async fn ready(&self, uri: &str) -> anyhow::Result<ServerInfo> {
        let client = self.client(uri)?;
        let listed = tokio::time::timeout(Duration::from_secs(10), client.list_tables().limit(1).send())
            .await
            .context("no answer to ListTables within 10s")?;
        if let Err(e) = listed {
            let why = errors::classify(&e, false);
            // `why.code` is "STATUS TYPE" for an answer from the server.
            let (status, code) = why.code.as_deref().and_then(|c| c.split_once(' ')).unzip();
            let status = e.raw_response().map(|r| r.status().as_u16()).or(status.and_then(|s| s.parse().ok()));
            if status.is_some_and(|s| errors::refuses_credentials(s, code)) {
                return Err(faultline_kind::Refused(format!(
                    "ListTables answered {}: {}; the credentials (options.credentials, else AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY) are not accepted",
                    why.code.unwrap_or_default(),
                    why.message
                ))
                .into());
            }
            let said = errors::explain(&e);
            if faultline_kind::cause::is_final(&said) {
                return Err(faultline_kind::Refused(format!("ListTables: {said}")).into());
            }
            anyhow::bail!("ListTables: {said}");
        }
        Ok(ServerInfo { version: "DynamoDB API (ListTables answered)".into() })
    }

    async fn prepare(&self, uri: &str, _workload: &Workload) -> anyhow::Result<String> {
        let client = self.client(uri)?;
        let existed = self.created.load(Ordering::SeqCst);
        let resource = self.ledger_entry(uri);
        // Only on an external endpoint does the table outlive the run: on a
        // server faultline started it goes with the process or container,
        // and listing it would leave teardown a table it cannot reach.
        let external = faultline_kind::ledger::is_external(uri);
        let taken_back = match external {
            true => self.take_back_a_killed_runs_table(&client, &resource).await?,
            false => None,
        };
        // Written down before it is created, so a SIGKILL in between still
        // leaves it listed; a kept table is left on purpose, not listed.
        let own = external
            && !existed
            && !self.options.table.keep
            && self.options.table.create
            && faultline_kind::ledger::record(resource.clone())?;
        let mut done = match table::create(&client, &self.options.table).await {
            Ok(done) => done,
            Err(e) => {
                let unlisted = if own { faultline_kind::ledger::forget(&resource) } else { Ok(()) };
                return Err(match unlisted {
                    Ok(()) => e,
                    Err(f) => anyhow::anyhow!("{e:#}; and the run ledger still lists the table: {f:#}"),
                });
            }
        };
        if !existed && done.starts_with("created") {
            self.created.store(true, Ordering::SeqCst);
        } else if own {
            // It was there before the run: listed, teardown would remove the user's table.
            faultline_kind::ledger::forget(&resource)
                .context("the run ledger still lists a table it did not create")?;
        }
        if let Some(note) = taken_back {
            done = format!("{note}; {done}");
        }
        if self.options.table.stream {
            let cursor = self.stream_cursor(uri);
            let mut cursor = cursor.lock().await;
            cursor.arn = Some(table::stream_arn(&client, &self.options.table.name).await?);
            // What the stream held before the run is no call of this run's.
            let before = cursor
                .read(
                    &self.streams_client(uri)?,
                    &self.options.table.hash_key,
                    &Default::default(),
                    &mut Default::default(),
                )
                .await?;
            done.push_str(&format!("; its stream read from here on ({before} earlier records passed over)"));
        }
        Ok(done)
    }

    async fn clean_up(&self, uri: &str) -> anyhow::Result<String> {
        if self.options.table.keep || !self.created.load(Ordering::SeqCst) {
            return Ok(String::new());
        }
        let done = table::delete(&self.client(uri)?, &self.options.table.name).await?;
        faultline_kind::ledger::forget(&self.ledger_entry(uri))?;
        Ok(done)
    }

    async fn connect(&self, uri: &str, workload: Arc<Workload>) -> anyhow::Result<Connection> {
        let client = self.client(uri)?;
        Ok(Connection::Requests(Arc::new(DynamoClient {
            client,
            items: Items::new(&self.options, workload),
            consistent_reads: self.options.consistent_reads,
        })))
    }

    async fn read_values(&self, uri: &str, keys: &[Vec<u8>]) -> anyhow::Result<Vec<Option<Vec<u8>>>> {
        let client = self.client(uri)?;
        let names: Vec<String> = keys.iter().map(|k| String::from_utf8_lossy(k).into_owned()).collect();
        let found = self.get_items(&client, &names).await?;
        Ok(names.iter().map(|n| found.get(n).and_then(value_of)).collect())
    }

    fn stored_items(&self) -> Option<&dyn StoredItems> {
        Some(self)
    }
}

/// Whole items with their index entries and stream records, for the
/// hot-key checker.
#[async_trait::async_trait]
impl StoredItems for DynamoDriver {
    async fn read(&self, uri: &str, keys: &[Vec<u8>]) -> anyhow::Result<Vec<StoredItem>> {
        let client = self.client(uri)?;
        let names: Vec<String> = keys.iter().map(|k| String::from_utf8_lossy(k).into_owned()).collect();
        let siblings = self.options.siblings;
        let mut wanted = names.clone();
        wanted.extend(names.iter().flat_map(|n| (1..=siblings).map(move |i| Items::sibling(n, i))));
        let found = self.get_items(&client, &wanted).await?;
        let mut index = match &self.options.table.index {
            Some(i) => Some(self.settled_index_entries(&client, &i.name, i.settle.0, &names, &found).await?),
            None => None,
        };
        let mut stream = match self.options.table.stream {
            true => {
                let stored = names.iter().map(|n| (n.clone(), found.get(n).and_then(value_of))).collect();
                let cursor = self.stream_cursor(uri);
                let mut cursor = cursor.lock().await;
                if cursor.arn.is_none() {
                    cursor.arn = Some(table::stream_arn(&client, &self.options.table.name).await?);
                }
                let streams = self.streams_client(uri)?;
                let table = &self.options.table;
                Some(cursor.settled(&streams, &table.hash_key, &stored, table.stream_settle.0).await?)
            }
            false => None,
        };
        let mut items = Vec::with_capacity(names.len());
        for name in &names {
            let item = found.get(name);
            let (index_entries, index_settle) = match (&self.options.table.index, index.as_mut()) {
                (Some(index), Some(all)) => {
                    let (entries, settle) = all.remove(name).unwrap_or_default();
                    let entries = Some(
                        entries
                            .iter()
                            .map(|e| match index.projection {
                                Projection::All => value_of(e),
                                // Keys only: the entry matches when it names the stored item's writer.
                                Projection::KeysOnly => item.filter(|i| i.get("gr") == e.get("gr")).and_then(value_of),
                            })
                            .collect(),
                    );
                    (entries, Some(settle))
                }
                _ => (None, None),
            };
            let applied = item.and_then(|i| match (i.get("c"), i.get("l")) {
                (Some(AttributeValue::N(c)), Some(AttributeValue::L(l))) => Some((
                    c.parse().unwrap_or(-1),
                    l.iter()
                        .filter_map(|v| match v {
                            AttributeValue::B(b) => Some(b.as_ref().to_vec()),
                            _ => None,
                        })
                        .collect(),
                )),
                _ => None,
            });
            items.push(StoredItem {
                value: item.and_then(value_of),
                torn: item.and_then(torn),
                index_entries,
                index_settle,
                applied,
                siblings: (1..=siblings).map(|i| found.get(&Items::sibling(name, i)).and_then(value_of)).collect(),
                stream: stream.as_mut().map(|s| s.remove(name).unwrap_or_default()),
            });
        }
        Ok(items)
    }

    /// The read, plus the windows it may wait out for the index and the
    /// stream to catch up: a window longer than the engine's budget would
    /// turn an entry still wrong at its end into unknown instead of a
    /// violation.
    fn budget(&self) -> Duration {
        let table = &self.options.table;
        let index = table.index.as_ref().map_or(Duration::ZERO, |i| i.settle.0);
        let stream = if table.stream { table.stream_settle.0 } else { Duration::ZERO };
        faultline_kind::FINAL_READ_BUDGET + index + stream
    }
}

/// A DynamoDB-API server in a container is one member with no replicas of
/// its own (moto listens on 5000 in its image); it is always the primary.
pub struct DynamoTopology;

#[async_trait::async_trait]
impl faultline_kind::topology::TopologyKind for DynamoTopology {
    fn container_port(&self) -> u16 {
        5000
    }

    fn member_args(&self, member: &faultline_kind::topology::MemberPlan) -> Vec<String> {
        let port = member.port;
        vec!["-H".into(), "0.0.0.0".into(), "-p".into(), port.to_string()]
    }

    async fn role(&self, uri: &str) -> anyhow::Result<faultline_model::roles::Role> {
        DynamoDriver::new(DynamoOptions::default()).ready(uri).await?;
        Ok(faultline_model::roles::Role::Primary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An HTTP server that answers every request with `status` and `body`,
    /// as DynamoDB does (moto answers a refused signature with 403 only, so
    /// the service's 400s are played from its documented answers).
    async fn answering(status: &'static str, body: &'static str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut request = vec![0u8; 64 * 1024];
                let _ = socket.read(&mut request).await;
                let answer = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: application/x-amz-json-1.0\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            }
        });
        uri
    }

    #[tokio::test]
    async fn a_400_that_refuses_the_credentials_ends_the_probe_with_the_servers_words() {
        for (kind, words) in [
            ("UnrecognizedClientException", "The security token included in the request is invalid."),
            (
                "InvalidSignatureException",
                "The request signature we calculated does not match the signature you provided.",
            ),
        ] {
            let body: &'static str = Box::leak(
                format!(r#"{{"__type":"com.amazon.coral.service#{kind}","message":"{words}"}}"#).into_boxed_str(),
            );
            let uri = answering("400 Bad Request", body).await;
            let error = DynamoDriver::new(DynamoOptions::default()).ready(&uri).await.unwrap_err();
            assert!(error.downcast_ref::<faultline_kind::Refused>().is_some(), "{kind}: not a refusal: {error:#}");
            let said = format!("{error:#}");
            assert!(said.contains(&format!("400 {kind}")) && said.contains(words), "{said}");
        }
        // A 400 about the request itself is no refusal of the caller.
        let uri = answering(
            "400 Bad Request",
            r#"{"__type":"com.amazon.coral.validate#ValidationException","message":"bad"}"#,
        )
        .await;
        let error = DynamoDriver::new(DynamoOptions::default()).ready(&uri).await.unwrap_err();
        assert!(error.downcast_ref::<faultline_kind::Refused>().is_none(), "{error:#}");
    }

    #[tokio::test]
    async fn a_redirect_says_where_to_in_one_sentence() {
        let uri = answering("301 Moved Permanently\r\nlocation: https://127.0.0.1:18000/", "").await;
        let said = format!("{:#}", DynamoDriver::new(DynamoOptions::default()).ready(&uri).await.unwrap_err());
        assert_eq!(said, "ListTables: the endpoint redirects (301) to https://127.0.0.1:18000/: use that URI");
    }

    #[test]
    fn the_stored_items_budget_covers_the_index_and_stream_windows() {
        use faultline_model::units::Dur;
        let mut options = DynamoOptions::default();
        assert_eq!(DynamoDriver::new(options.clone()).budget(), faultline_kind::FINAL_READ_BUDGET);
        options.table.index = Some(options::IndexSpec {
            name: "by-group".into(),
            projection: Projection::All,
            settle: Dur(options::MAX_SETTLE),
        });
        options.table.stream = true;
        options.table.stream_settle = Dur(Duration::from_secs(90));
        // An entry still wrong waits out the whole 10m window, then the
        // stream's: the engine must still be waiting for the verdict.
        let budget = DynamoDriver::new(options).budget();
        assert_eq!(budget, faultline_kind::FINAL_READ_BUDGET + options::MAX_SETTLE + Duration::from_secs(90));
    }

    #[test]
    fn a_stream_settle_window_past_ten_minutes_is_refused_by_field() {
        let mut options = DynamoOptions::default();
        options.table.stream_settle = faultline_model::units::Dur(options::MAX_SETTLE + Duration::from_secs(1));
        assert_eq!(options.check().unwrap_err().0, "table.stream_settle");
    }

    mod lagging_index {
        use std::collections::{BTreeMap, HashMap};
        use std::sync::{Arc, Mutex};

        use faultline_check::checker::hot_key;
        use faultline_check::history::{write_value, Observed, OpRecord, Outcome, Scope, ValueId};
        use serde_json::{json, Value};

        use super::super::*;

        const RUN: u32 = 7;

        /// What the scripted server holds: the items, and per key how many
        /// more Query answers give the stale entries instead of the item's.
        #[derive(Default)]
        struct Server {
            items: HashMap<String, Value>,
            lagging: HashMap<String, (usize, Vec<Value>)>,
            queried: HashMap<String, usize>,
        }

        fn item(name: &str, id: ValueId) -> Value {
            let mut v = Vec::new();
            write_value(RUN, id, 40, &mut v);
            json!({
                "pk": {"S": name}, "v": {"S": String::from_utf8(v).unwrap()},
                "w": {"N": id.writer.to_string()}, "s": {"N": id.seq.to_string()},
                "gk": {"S": format!("g:{name}")}, "gr": {"S": format!("w{}.{}", id.writer, id.seq)},
            })
        }

        /// Answers BatchGetItem from the items and Query from the index:
        /// a lagging key's stale entries until its count runs out.
        async fn serve(server: Arc<Mutex<Server>>) -> String {
            crate::scripted::serve(move |call, body| {
                let mut s = server.lock().unwrap();
                match call {
                    "BatchGetItem" => {
                        let keys = body["RequestItems"]["faultline"]["Keys"].as_array().cloned().unwrap_or_default();
                        let found: Vec<Value> =
                            keys.iter().filter_map(|k| s.items.get(k["pk"]["S"].as_str()?).cloned()).collect();
                        json!({"Responses": {"faultline": found}, "UnprocessedKeys": {}})
                    }
                    "Query" => {
                        let group = body["ExpressionAttributeValues"][":g"]["S"].as_str().unwrap_or_default();
                        let name = group.trim_start_matches("g:").to_string();
                        *s.queried.entry(name.clone()).or_default() += 1;
                        let entries: Vec<Value> = match s.lagging.get_mut(&name) {
                            Some((left, stale)) if *left > 0 => {
                                *left -= 1;
                                stale.clone()
                            }
                            _ => s.items.get(&name).cloned().into_iter().collect(),
                        };
                        json!({"Count": entries.len(), "ScannedCount": entries.len(), "Items": entries})
                    }
                    other => panic!("the driver made an unexpected call: {other}"),
                }
            })
            .await
        }

        fn driver(settle: Duration) -> DynamoDriver {
            let mut options = DynamoOptions::default();
            let settle = faultline_model::units::Dur(settle);
            options.table.index =
                Some(options::IndexSpec { name: "by-group".into(), projection: Projection::All, settle });
            DynamoDriver::new(options)
        }

        /// Two acknowledged puts on key `key` in cell `cell`: writer 0's,
        /// which replaced nothing (cell 1) or an earlier cell's item, then
        /// writer 1's, which replaced it.
        fn puts(key: u64, cell: u16) -> (Vec<OpRecord>, ValueId) {
            let (a, b) = (ValueId { cell, writer: 0, seq: 0 }, ValueId { cell, writer: 1, seq: 0 });
            let before = if cell == 1 { Observed::Nil } else { Observed::Foreign };
            let put = |w: ValueId, replaced: Observed| OpRecord {
                start: 0,
                end: 1,
                key,
                kind: OpKind::Set,
                outcome: Outcome::Ok,
                written: Some(w),
                written_len: 40,
                member: 0,
                observed: replaced,
            };
            (vec![put(a, before), put(b, Observed::Write(a))], b)
        }

        #[tokio::test]
        async fn an_entry_that_matches_late_is_lag_and_one_still_wrong_when_the_window_ends_a_violation() {
            let server = Arc::new(Mutex::new(Server::default()));
            let uri = serve(Arc::clone(&server)).await;
            let names = ["k1", "k2", "k3"];
            let keys: Vec<Vec<u8>> = names.iter().map(|n| n.as_bytes().to_vec()).collect();
            let driver = driver(Duration::from_secs(2));

            // Cell 1: k1's entry still names writer 0 for three reads, k2
            // has no entry at all, k3's is right at once.
            let mut writes = BTreeMap::new();
            {
                let mut s = server.lock().unwrap();
                for (n, name) in names.iter().enumerate() {
                    let (calls, last) = puts(n as u64 + 1, 1);
                    s.items.insert(name.to_string(), item(name, last));
                    writes.insert(n as u64 + 1, calls);
                }
                let stale = item("k1", ValueId { cell: 1, writer: 0, seq: 0 });
                s.lagging.insert("k1".into(), (3, vec![stale]));
                s.lagging.insert("k2".into(), (usize::MAX, vec![]));
            }
            let stored = driver.read(&uri, &keys).await.unwrap();
            let settle = |i: usize| stored[i].index_settle.expect("the table has an index");
            assert!(settle(0).late.is_some(), "k1 agreed on a later read: {:?}", settle(0));
            assert_eq!((settle(1).late, settle(2).late), (None, None));
            assert_eq!(stored[1].index_entries, Some(vec![]), "k2 is judged on its last read");
            {
                let s = server.lock().unwrap();
                // k1 read until it agreed, k3 once; k2 until the window ended.
                assert_eq!((s.queried["k1"], s.queried["k3"]), (4, 1));
                assert!(s.queried["k2"] > 4, "{:?}", s.queried);
            }
            let items: HashMap<u64, StoredItem> = (1..).zip(stored).collect();
            let judged = hot_key::check(&writes, &items, Scope { run: RUN, cell: 1 }, true);
            assert_eq!(judged.violations, 1, "{:?}", judged.witnesses);
            assert!(
                judged.witnesses[0].starts_with(
                    "key 2: the index holds no entry for the stored item, still when its 2s settle window ended"
                ),
                "{:?}",
                judged.witnesses
            );
            let lag = judged.index.expect("the table has an index");
            assert_eq!((lag.entries, lag.settled_late, lag.still_wrong), (3, 1, 1), "{lag:?}");
            assert!(lag.longest_settle_ms > 0.0, "{lag:?}");

            // Cell 2 writes the same keys once the index has caught up: it
            // carries none of cell 1's lag or violation, as each cell's keys
            // are judged from their own first read.
            let mut writes = BTreeMap::new();
            {
                let mut s = server.lock().unwrap();
                s.lagging.clear();
                s.queried.clear();
                for (n, name) in names.iter().enumerate() {
                    let (calls, last) = puts(n as u64 + 1, 2);
                    s.items.insert(name.to_string(), item(name, last));
                    writes.insert(n as u64 + 1, calls);
                }
            }
            let stored = driver.read(&uri, &keys).await.unwrap();
            assert!(stored.iter().all(|i| i.index_settle.is_some_and(|s| s.late.is_none())), "{stored:?}");
            assert!(server.lock().unwrap().queried.values().all(|n| *n == 1));
            let items: HashMap<u64, StoredItem> = (1..).zip(stored).collect();
            let judged = hot_key::check(&writes, &items, Scope { run: RUN, cell: 2 }, false);
            assert_eq!(judged.violations, 0, "{:?}", judged.witnesses);
            let lag = judged.index.expect("the table has an index");
            assert_eq!((lag.settled_late, lag.still_wrong), (0, 0), "{lag:?}");
        }
    }
}
