//! MongoDB (and MongoDB-wire-protocol servers), driven through the official
//! driver. Every load client is a `mongodb::Client` of its own, with its own
//! connection pool, as every application replica has one; its ops are
//! request futures, run by the engine's request/response executor.
//!
//! A key of the workload is a document `{_id: "<prefix><n>", v: <bytes>}`;
//! counters (`incr`) live in their own documents `{_id: "<prefix>n:<n>", n}`.
//! Reads and writes carry the workload's tagged values, so the history
//! checkers run on MongoDB campaigns unchanged.

mod admin;
mod collection;
mod errors;
mod ops;
pub mod options;
mod served;
mod topology;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use mongodb::bson::{doc, Bson, Document};
use mongodb::options::ClientOptions;
use mongodb::Client;

use faultline_kind::fault::{Applied, KindFaults, Server};
use faultline_kind::registry::{parse_options, Kind};
use faultline_kind::workload::Workload;
use faultline_kind::{Connection, ServerInfo, TargetDriver};
use faultline_model::ops::OpKind;
use faultline_spec::fault::Fields;
use faultline_spec::KindCost;
pub use options::MongoOptions;
use topology::MongoTopology;

/// The kind as the build registers it (the CLI's `kinds::KINDS`).
pub const KIND: Kind = Kind {
    name: "mongodb",
    driver: |options| {
        let options: MongoOptions = parse_options(options)?;
        options.check().map_err(|(field, e)| (field.to_string(), e))?;
        Ok(Arc::new(MongoDriver { options }))
    },
    members: Some(|| Arc::new(MongoTopology)),
    options: Some(|generator| generator.subschema_for::<MongoOptions>()),
    faults: admin::declared,
    remove_listed: Some(collection::drop_listed),
};

#[derive(Clone)]
pub struct MongoDriver {
    pub options: MongoOptions,
}

/// How long an admin command (probe, final read, fault) may take.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(10);

impl MongoDriver {
    /// A client for admin work: short server selection, so a dead server
    /// fails a probe quickly instead of after the driver's 30 s.
    async fn admin_client(&self, uri: &str) -> anyhow::Result<Client> {
        let mut options = ClientOptions::parse(uri).await.with_context(|| format!("invalid MongoDB URI `{uri}`"))?;
        self.options.apply(&mut options, 4);
        options.server_selection_timeout = Some(Duration::from_secs(2));
        options.connect_timeout = Some(Duration::from_secs(2));
        options.retry_writes = Some(false);
        Client::with_options(options).context("cannot create a MongoDB client")
    }

    fn collection(&self, client: &Client) -> mongodb::Collection<Document> {
        let options = mongodb::options::CollectionOptions::builder()
            .read_concern(self.options.read_concern())
            .write_concern(self.options.write_concern())
            .selection_criteria(Some(self.options.selection_criteria()))
            .build();
        client.database(&self.options.database).collection_with_options(&self.options.collection, options)
    }
}

impl faultline_spec::KindInfo for MongoDriver {
    fn default_command(&self) -> &'static str {
        "secantusd-rs"
    }

    fn check_uri(&self, uri: &str) -> Result<(), String> {
        // No DNS SRV resolver is built in, so a `mongodb+srv://` URI would fail later.
        if !uri.starts_with("mongodb://") {
            return Err("is not a MongoDB URI: write mongodb://[USER:PASSWORD@]HOST:PORT[,…]/[?OPTIONS] (mongodb+srv:// is not supported)".into());
        }
        mongodb::options::ConnectionString::parse(uri)
            .map(|_| ())
            .map_err(|e| format!("is not a valid MongoDB URI: {}", errors::explain(&e)))
    }

    fn supports(&self, op: OpKind) -> bool {
        matches!(op, OpKind::Get | OpKind::Set | OpKind::Incr | OpKind::Del | OpKind::Insert)
    }

    fn acknowledges_writes(&self) -> bool {
        self.options.acknowledged_writes()
    }

    /// A client is a driver pool with its monitor; an op in flight holds a
    /// pooled connection of its own (measured: docs/spec.md#memory).
    fn cost(&self) -> KindCost {
        KindCost { connection: 2 << 20, slot: 64 << 10 }
    }
}

#[async_trait::async_trait]
impl TargetDriver for MongoDriver {
    fn read_rule(&self) -> Option<faultline_kind::ReadRule> {
        use options::ReadConcernLevel as Level;
        // Without a read concern the server's default (local) applies.
        let level = self.options.read_concern.unwrap_or(Level::Local);
        let read_concern = match level {
            Level::Local => "local",
            Level::Available => "available",
            Level::Majority => "majority",
            Level::Linearizable => "linearizable",
            Level::Snapshot => "snapshot",
        };
        // MongoDB documents linearizable reads as served by the primary only.
        Some(faultline_kind::ReadRule {
            read_concern: read_concern.into(),
            requires_primary: level == Level::Linearizable,
        })
    }

    fn has_roles(&self) -> bool {
        true
    }

    fn listen_args(&self, port: u16, data_dir: &Path) -> Vec<String> {
        // secantusd-rs (the MongoDB-wire server that runs here); a real
        // mongod takes `--port P --dbpath DIR --bind_ip 127.0.0.1` through
        // the spec's own args.
        vec!["--port".into(), port.to_string(), "--storage-path".into(), data_dir.display().to_string()]
    }

    fn uri(&self, host: &str, port: u16) -> String {
        format!("mongodb://{host}:{port}/?directConnection=true")
    }

    async fn ready(&self, uri: &str) -> anyhow::Result<ServerInfo> {
        let client = self.admin_client(uri).await?;
        let probe = async {
            let admin = client.database("admin");
            let hello = admin.run_command(doc! {"hello": 1}).await.map_err(|e| {
                let said = errors::explain(&e);
                match errors::refuses_credentials(&e) {
                    true => anyhow::Error::new(faultline_kind::Refused(format!(
                        "the server refused the credentials: {said} (check the user and password in the URI)"
                    ))),
                    false if faultline_kind::cause::is_final(&said) => {
                        anyhow::Error::new(faultline_kind::Refused(format!("hello: {said}")))
                    }
                    false => anyhow::anyhow!("hello: {said}"),
                }
            })?;
            // A replica set serves the load through its primary: one that has
            // none yet (an election, a set still being initiated) is not up.
            let primary = hello.get_bool("isWritablePrimary").unwrap_or(false);
            let set = hello.get_str("setName").ok();
            // A member started with --replSet waits for replSetInitiate: it is
            // up, and the provider forms the set next.
            let uninitiated = set.is_none() && hello.get_bool("isreplicaset").unwrap_or(false);
            if !primary && !uninitiated && self.options.read_preference == options::ReadPreferenceMode::Primary {
                let seen = hello.get_str("primary").map(|p| format!(" (it names {p} as primary)")).unwrap_or_default();
                anyhow::bail!("the server is not a writable primary{seen}");
            }
            let build = admin
                .run_command(doc! {"buildInfo": 1})
                .await
                .map_err(|e| anyhow::anyhow!("buildInfo: {}", errors::explain(&e)))?;
            let set = set.map(|s| format!(", replica set `{s}`")).unwrap_or_default();
            anyhow::Ok(ServerInfo { version: format!("{}{set}", server_name(&build)) })
        };
        let info = tokio::time::timeout(ADMIN_TIMEOUT, probe).await;
        // Closed on every path, a probe that timed out included.
        client.shutdown().immediate(true).await;
        info.context("no answer within 10s")?
    }

    async fn prepare(&self, uri: &str, workload: &Workload) -> anyhow::Result<String> {
        // Only on an external server does the collection outlive the run.
        let external = faultline_kind::ledger::is_external(uri);
        if self.options.seed_documents == 0 && !external {
            return Ok(String::new());
        }
        let client = self.admin_client(uri).await?;
        let done = async {
            let mut said = Vec::new();
            if external {
                said.push(collection::prepare(&client, uri, &self.options).await?);
            }
            if self.options.seed_documents > 0 {
                said.push(ops::seed(&self.collection(&client), workload, self.options.seed_documents).await?);
            }
            said.retain(|s| !s.is_empty());
            anyhow::Ok(said.join("; "))
        }
        .await;
        client.shutdown().immediate(true).await;
        done
    }

    async fn clean_up(&self, uri: &str) -> anyhow::Result<String> {
        if !faultline_kind::ledger::lists(&collection::ledger_entry(uri, &self.options)) {
            return Ok(String::new());
        }
        let client = self.admin_client(uri).await?;
        let done = collection::clean_up(&client, uri, &self.options).await;
        client.shutdown().immediate(true).await;
        done
    }

    async fn connect(&self, uri: &str, workload: Arc<Workload>) -> anyhow::Result<Connection> {
        let mut options = ClientOptions::parse(uri).await.with_context(|| format!("invalid MongoDB URI `{uri}`"))?;
        self.options.apply(&mut options, ops::DEFAULT_POOL);
        // Reads only the primary may answer are judged by the member that
        // answered each: the monitor costs every command an event, so only
        // such cells pay it.
        let attributes_reads = self.read_rule().is_some_and(|r| r.requires_primary);
        if attributes_reads {
            options.command_event_handler = Some(ops::answered_by_monitor());
        }
        let client = Client::with_options(options).context("cannot create a MongoDB client")?;
        // Fails here, before the clock starts, when the server is not there.
        client
            .database("admin")
            .run_command(doc! {"ping": 1})
            .await
            .map_err(|e| anyhow::anyhow!("ping {uri}: {}", errors::explain(&e)))?;
        let collection = self.collection(&client);
        Ok(Connection::Requests(Arc::new(ops::MongoClient::new(
            client,
            collection,
            workload,
            &self.options,
            attributes_reads,
        ))))
    }

    async fn read_values(&self, uri: &str, keys: &[Vec<u8>]) -> anyhow::Result<Vec<Option<Vec<u8>>>> {
        let client = self.admin_client(uri).await?;
        // The final state is read as strongly as the server offers, from the primary.
        let collection = client.database(&self.options.database).collection_with_options::<Document>(
            &self.options.collection,
            mongodb::options::CollectionOptions::builder()
                .read_concern(Some(mongodb::options::ReadConcern::majority()))
                .selection_criteria(Some(mongodb::options::SelectionCriteria::ReadPreference(
                    mongodb::options::ReadPreference::Primary,
                )))
                .build(),
        );
        let values = ops::read_values(&collection, keys).await;
        client.shutdown().immediate(true).await;
        values
    }

    fn kind_faults(&self) -> Option<&dyn KindFaults> {
        Some(self)
    }

    /// The primary's `serverStatus` opcounters (served.rs), where every op
    /// goes to the primary; reads spread over secondaries are not counted
    /// there, so then none.
    async fn served(&self, uri: &str) -> Option<anyhow::Result<faultline_kind::Served>> {
        if self.options.read_preference != options::ReadPreferenceMode::Primary {
            return None;
        }
        Some(
            async {
                let client = self.admin_client(uri).await?;
                let served = served::served(&client).await;
                client.shutdown().immediate(true).await;
                served
            }
            .await,
        )
    }
}

/// Step-down, freeze and step-up, through the server's own admin commands
/// ([`admin::FAULTS`]), with this target's options.
#[async_trait::async_trait]
impl KindFaults for MongoDriver {
    async fn apply(&self, action: &str, fields: &Fields, servers: &[Server]) -> anyhow::Result<Applied> {
        let on = admin::Members { driver: self.clone(), servers: servers.to_vec() };
        faultline_kind::fault::apply(admin::FAULTS, "mongodb", action, fields, &on).await
    }
}

/// The server as its `buildInfo` describes it, never a product name it did
/// not give: `version` is the MongoDB release a wire-compatible server
/// answers as, so a server that names its own build in a `<name>Version`
/// field (secantusd-rs: `secantusVersion`) is that build, with the
/// compatibility version beside it; otherwise the fields as given.
fn server_name(build: &Document) -> String {
    let version = build.get_str("version").unwrap_or("unknown");
    let own = build.iter().find_map(|(k, v)| {
        let name = k.strip_suffix("Version").filter(|n| !n.is_empty() && *n != "git")?;
        Some((name, v.as_str()?))
    });
    let git = build.get_str("gitVersion").ok().filter(|g| g.chars().any(|c| c != '0'));
    match (own, git) {
        (Some((name, own)), _) => format!("{name} {own} (buildInfo version {version})"),
        (None, Some(git)) => format!("buildInfo version {version}, gitVersion {}", git.get(..12).unwrap_or(git)),
        (None, None) => format!("buildInfo version {version}"),
    }
}

/// A document's `v` field as bytes, whatever type the server kept it as.
fn value_bytes(v: Option<&Bson>) -> Option<Vec<u8>> {
    match v? {
        Bson::Binary(b) => Some(b.bytes.clone()),
        Bson::String(s) => Some(s.clone().into_bytes()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_is_named_as_its_build_info_names_it() {
        let secantus = doc! {"version": "8.2.11", "secantusVersion": "0.5.3", "gitVersion": "0".repeat(40)};
        assert_eq!(server_name(&secantus), "secantus 0.5.3 (buildInfo version 8.2.11)");
        let mongod = doc! {"version": "8.0.4", "gitVersion": "bc35ab4305d9920d9d0491c1c9ef9b72383d31f9"};
        assert_eq!(server_name(&mongod), "buildInfo version 8.0.4, gitVersion bc35ab4305d9");
    }
}
