//! MongoDB's own faults, sent to one member over a direct connection:
//! `stepdown` (replSetStepDown, confirmed by the member no longer calling
//! itself primary), `freeze` (replSetFreeze; `seconds: 0` thaws) and
//! `stepup` (replSetStepUp, confirmed by the member becoming primary).

use std::time::Duration;

use mongodb::bson::{doc, Document};
use mongodb::error::ErrorKind;
use mongodb::Client;

use super::errors::explain;
use faultline_spec::FaultAction;

/// How long a role change may take to show after the command.
const CONFIRM_WITHIN: Duration = Duration::from_secs(15);

pub async fn apply(client: &Client, action: &FaultAction) -> anyhow::Result<String> {
    let admin = client.database("admin");
    let secs = |d: Option<faultline_model::units::Dur>, default: u64| d.map_or(default, |d| d.0.as_secs());
    match action {
        FaultAction::Stepdown { seconds, catch_up, force } => {
            let (seconds, catch_up) = (secs(*seconds, 60), secs(*catch_up, 10));
            let command = doc! {
                "replSetStepDown": seconds as i64,
                "secondaryCatchUpPeriodSecs": catch_up as i64,
                "force": *force,
            };
            match admin.run_command(command).await {
                Ok(_) => {}
                // The member closes its connections as it steps down: the
                // role check below says whether it did.
                Err(e) if matches!(e.kind.as_ref(), ErrorKind::Io(_) | ErrorKind::ConnectionPoolCleared { .. }) => {}
                Err(e) => anyhow::bail!("replSetStepDown: {}", explain(&e)),
            }
            let hello = wait_for_role(client, false).await?;
            Ok(format!("replSetStepDown {seconds}s (catch-up {catch_up}s): no longer primary ({})", describe(&hello)))
        }
        FaultAction::Freeze { seconds, .. } => {
            let seconds = secs(*seconds, 60);
            admin
                .run_command(doc! {"replSetFreeze": seconds as i64})
                .await
                .map_err(|e| anyhow::anyhow!("replSetFreeze: {}", explain(&e)))?;
            Ok(match seconds {
                0 => "replSetFreeze 0: may stand for election again".into(),
                s => format!("replSetFreeze {s}s: will not stand for election"),
            })
        }
        FaultAction::Stepup => {
            admin
                .run_command(doc! {"replSetStepUp": 1})
                .await
                .map_err(|e| anyhow::anyhow!("replSetStepUp: {}", explain(&e)))?;
            let hello = wait_for_role(client, true).await?;
            Ok(format!("replSetStepUp: primary now ({})", describe(&hello)))
        }
        other => anyhow::bail!("`{}` is not a MongoDB fault", other.as_str()),
    }
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
