//! MongoDB's own faults, sent to each member a fault names over a direct
//! connection, registered in [`FAULTS`]: `stepdown` (replSetStepDown,
//! confirmed by the member no longer calling itself primary), `freeze`
//! (replSetFreeze; healed by `replSetFreeze 0`) and `stepup`
//! (replSetStepUp, confirmed by the member becoming primary).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use mongodb::bson::{doc, Document};
use mongodb::error::ErrorKind;
use mongodb::Client;
use schemars::JsonSchema;
use serde::Deserialize;

use super::errors::explain;
use super::MongoDriver;
use faultline_kind::fault::{Applied, Apply, Fault, Healed, Server, Undo};
use faultline_model::units::Dur;
use faultline_spec::{Action, FaultType, Registered};

/// How long a role change may take to show after the command.
const CONFIRM_WITHIN: Duration = Duration::from_secs(15);

/// Every fault MongoDB applies through its own admin commands.
pub static FAULTS: &[&dyn Fault<Members>] =
    &[&Registered::<Stepdown>::NEW, &Registered::<Freeze>::NEW, &Registered::<Stepup>::NEW];

/// MongoDB's faults as validation sees them (the kind's registration).
pub fn declared() -> Vec<&'static dyn FaultType> {
    faultline_kind::fault::declared(FAULTS)
}

/// What MongoDB's faults reach a target by: the members a fault names,
/// with the target's options (credentials, TLS) to connect with.
pub struct Members {
    pub driver: MongoDriver,
    pub servers: Vec<Server>,
}

/// An admin command sent to one member, with its evidence.
type Command<'c> =
    &'c (dyn for<'a> Fn(&'a Client) -> Pin<Box<dyn Future<Output = anyhow::Result<String>> + Send + 'a>> + Send + Sync);

impl Members {
    /// `command` on each member in turn: `name: evidence`, joined.
    async fn each(&self, command: Command<'_>) -> anyhow::Result<String> {
        let mut evidence = Vec::new();
        for server in &self.servers {
            let client = self.driver.admin_client(&server.uri).await?;
            let done = command(&client).await;
            client.shutdown().immediate(true).await;
            let done = done.map_err(|e| e.context(format!("`{}`", server.name)))?;
            evidence.push(format!("{}: {done}", server.name));
        }
        Ok(evidence.join("; "))
    }

    fn hit(&self) -> Vec<String> {
        self.servers.iter().map(|s| s.name.clone()).collect()
    }
}

fn secs(d: Option<Dur>, default: u64) -> u64 {
    d.map_or(default, |d| d.0.as_secs())
}

/// `replSetStepDown` on the primary, confirmed by the role change.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Stepdown {
    /// How long the old primary may not stand for election again (default 60s).
    seconds: Option<Dur>,
    /// How long the primary waits for a secondary to catch up before it
    /// steps down (default 10s).
    catch_up: Option<Dur>,
    /// Step down even when no secondary has caught up (a lone member has none).
    #[serde(default)]
    force: bool,
}

impl Action for Stepdown {
    const NAME: &'static str = "stepdown";
}

#[async_trait::async_trait]
impl Apply<Members> for Stepdown {
    async fn apply(&self, on: &Members) -> anyhow::Result<Applied> {
        let (seconds, catch_up) = (secs(self.seconds, 60), secs(self.catch_up, 10));
        let force = self.force;
        let evidence = on.each(&move |client| Box::pin(step_down(client, seconds, catch_up, force))).await?;
        Ok(Applied::done(on.hit(), evidence))
    }
}

async fn step_down(client: &Client, seconds: u64, catch_up: u64, force: bool) -> anyhow::Result<String> {
    let command = doc! {
        "replSetStepDown": seconds as i64,
        "secondaryCatchUpPeriodSecs": catch_up as i64,
        "force": force,
    };
    match client.database("admin").run_command(command).await {
        Ok(_) => {}
        // The member closes its connections as it steps down: the role
        // check below says whether it did.
        Err(e) if matches!(e.kind.as_ref(), ErrorKind::Io(_) | ErrorKind::ConnectionPoolCleared { .. }) => {}
        Err(e) => anyhow::bail!("replSetStepDown: {}", explain(&e)),
    }
    let hello = wait_for_role(client, false).await?;
    Ok(format!("replSetStepDown {seconds}s (catch-up {catch_up}s): no longer primary ({})", describe(&hello)))
}

/// `replSetFreeze` on a member, so it does not stand for election; healed
/// by `replSetFreeze 0`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Freeze {
    /// How long the member may not stand (default 60s; `0s` thaws).
    seconds: Option<Dur>,
}

impl Action for Freeze {
    const NAME: &'static str = "freeze";
    const HEALS: bool = true;
}

async fn freeze(on: &Members, seconds: u64) -> anyhow::Result<String> {
    on.each(&move |client| Box::pin(freeze_one(client, seconds))).await
}

async fn freeze_one(client: &Client, seconds: u64) -> anyhow::Result<String> {
    client
        .database("admin")
        .run_command(doc! {"replSetFreeze": seconds as i64})
        .await
        .map_err(|e| anyhow::anyhow!("replSetFreeze: {}", explain(&e)))?;
    Ok(match seconds {
        0 => "replSetFreeze 0: may stand for election again".into(),
        s => format!("replSetFreeze {s}s: will not stand for election"),
    })
}

#[async_trait::async_trait]
impl Apply<Members> for Freeze {
    async fn apply(&self, on: &Members) -> anyhow::Result<Applied> {
        let evidence = freeze(on, secs(self.seconds, 60)).await?;
        let thaw = Thaw(Members { driver: on.driver.clone(), servers: on.servers.clone() });
        Ok(Applied::undone_by(on.hit(), evidence, thaw))
    }
}

/// `replSetFreeze 0` on the members a freeze froze.
struct Thaw(Members);

#[async_trait::async_trait]
impl Undo for Thaw {
    async fn heal(&self) -> anyhow::Result<Healed> {
        Ok(freeze(&self.0, 0).await?.into())
    }
}

/// `replSetStepUp` on a member, which calls an election it wins if it can
/// (with a partition, a second primary).
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Stepup {}

impl Action for Stepup {
    const NAME: &'static str = "stepup";
}

#[async_trait::async_trait]
impl Apply<Members> for Stepup {
    async fn apply(&self, on: &Members) -> anyhow::Result<Applied> {
        let evidence = on.each(&|client| Box::pin(step_up(client))).await?;
        Ok(Applied::done(on.hit(), evidence))
    }
}

async fn step_up(client: &Client) -> anyhow::Result<String> {
    client
        .database("admin")
        .run_command(doc! {"replSetStepUp": 1})
        .await
        .map_err(|e| anyhow::anyhow!("replSetStepUp: {}", explain(&e)))?;
    let hello = wait_for_role(client, true).await?;
    Ok(format!("replSetStepUp: primary now ({})", describe(&hello)))
}

/// Asks `hello` until the member is (or is no longer) a writable primary.
async fn wait_for_role(client: &Client, primary: bool) -> anyhow::Result<Document> {
    let until = tokio::time::Instant::now() + CONFIRM_WITHIN;
    let mut last = String::from("no answer");
    while tokio::time::Instant::now() < until {
        match client.database("admin").run_command(doc! {"hello": 1}).await {
            Ok(hello) if hello.get_bool("isWritablePrimary").unwrap_or(false) == primary => return Ok(hello),
            Ok(hello) => last = describe(&hello),
            Err(e) => last = explain(&e),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let want = if primary { "primary" } else { "not primary" };
    anyhow::bail!("the member was not {want} within {}s (last hello: {last})", CONFIRM_WITHIN.as_secs())
}

/// What `hello` says of a member's role, e.g. `secondary of rs0, primary m1:27017`.
pub fn describe(hello: &Document) -> String {
    let set = hello.get_str("setName").map(|s| format!(" of {s}")).unwrap_or_default();
    let role = if hello.get_bool("isWritablePrimary").unwrap_or(false) {
        "primary"
    } else if hello.get_bool("secondary").unwrap_or(false) {
        "secondary"
    } else if hello.get_bool("arbiterOnly").unwrap_or(false) {
        "arbiter"
    } else {
        "neither primary nor secondary"
    };
    let primary = hello.get_str("primary").map(|p| format!(", primary {p}")).unwrap_or_default();
    format!("{role}{set}{primary}")
}
