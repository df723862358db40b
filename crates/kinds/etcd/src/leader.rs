//! etcd's own faults, registered in [`FAULTS`]: `move-leader`, etcd's
//! graceful leadership transfer (the Maintenance MoveLeader call, the
//! analogue of MongoDB's step-down), sent to the member that leads now and
//! confirmed by the leader the members report afterwards.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use tokio::time::Instant;

use super::errors::explain;
use super::topology::status;
use super::{endpoints, EtcdDriver};
use faultline_kind::fault::{Applied, Apply, Fault, Server};
use faultline_spec::{Action, FaultType, Registered};

/// How long the new leader may take to show after the transfer.
const CONFIRM_WITHIN: Duration = Duration::from_secs(15);
/// How long one admin call may take.
const CALL_LIMIT: Duration = Duration::from_secs(5);

/// Every fault etcd applies through its own API.
pub static FAULTS: &[&dyn Fault<Members>] = &[&Registered::<MoveLeader>::NEW];

/// etcd's faults as validation sees them (the kind's registration).
pub fn declared() -> Vec<&'static dyn FaultType> {
    faultline_kind::fault::declared(FAULTS)
}

/// What etcd's faults reach a target by: the members a fault names.
pub struct Members {
    pub driver: EtcdDriver,
    pub servers: Vec<Server>,
}

/// Hand leadership from the leader to another member (etcd's MoveLeader),
/// confirmed by the new leader's own status. Aim it at the leader
/// (`kv.leader`); on a target of one URI, the leader is found among its members.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MoveLeader {
    /// The member to hand leadership to, by its etcd name (e.g. `kv-2`);
    /// default: the first other voting member.
    to: Option<String>,
}

impl Action for MoveLeader {
    const NAME: &'static str = "move-leader";
}

#[async_trait::async_trait]
impl Apply<Members> for MoveLeader {
    async fn apply(&self, on: &Members) -> anyhow::Result<Applied> {
        let leader = find_leader(on).await?;
        let evidence = move_leader(on, &leader, self.to.as_deref()).await?;
        Ok(Applied::done(vec![leader.name.clone()], evidence))
    }
}

/// The one of the named servers that leads now (each server may itself be
/// a URI of several members, as an external target's is).
async fn find_leader(on: &Members) -> anyhow::Result<Server> {
    let mut seen = Vec::new();
    for server in &on.servers {
        let members = endpoints::parse(&server.uri).map_err(|e| anyhow::anyhow!("`{}` {e}", server.uri))?;
        for member in &members {
            let uri = endpoints::member_uri(member);
            match status(&uri, CALL_LIMIT).await {
                Ok(s) if s.header().is_some_and(|h| h.member_id() == s.leader()) => {
                    let name = if members.len() == 1 { server.name.clone() } else { member.clone() };
                    return Ok(Server { name, uri });
                }
                Ok(s) => seen.push(format!("{member}: follower of {:x}", s.leader())),
                Err(e) => seen.push(format!("{member}: {e:#}")),
            }
        }
    }
    anyhow::bail!("none of the members the fault names leads now ({}): aim move-leader at the leader", seen.join("; "))
}

async fn move_leader(on: &Members, leader: &Server, to: Option<&str>) -> anyhow::Result<String> {
    let member = &endpoints::parse(&leader.uri).map_err(anyhow::Error::msg)?[0];
    let mut client = endpoints::client(member, &on.driver.options).await?;
    let listed = tokio::time::timeout(CALL_LIMIT, client.member_list())
        .await
        .map_err(|_| anyhow::anyhow!("member list: no answer within {CALL_LIMIT:?}"))?
        .map_err(|e| anyhow::anyhow!("member list: {}", explain(&e)))?;
    let from = status(&leader.uri, CALL_LIMIT).await?.leader();
    let names = || listed.members().iter().map(|m| m.name().to_string()).collect::<Vec<_>>().join(", ");
    let target = match to {
        Some(name) => listed
            .members()
            .iter()
            .find(|m| m.name() == name)
            .ok_or_else(|| anyhow::anyhow!("no member is named `{name}` (members: {})", names()))?,
        None => listed
            .members()
            .iter()
            .find(|m| m.id() != from && !m.is_learner())
            .ok_or_else(|| anyhow::anyhow!("the leader has no other voting member to hand over to"))?,
    };
    anyhow::ensure!(target.id() != from, "`{}` leads already", target.name());
    let (target_id, target_name) = (target.id(), target.name().to_string());
    let started = Instant::now();
    tokio::time::timeout(CONFIRM_WITHIN, client.move_leader(target_id))
        .await
        .map_err(|_| anyhow::anyhow!("move leader: no answer within {CONFIRM_WITHIN:?}"))?
        .map_err(|e| anyhow::anyhow!("move leader to `{target_name}`: {}", explain(&e)))?;
    // Confirmed by the old leader's own view of who leads now.
    let mut last = String::from("no answer");
    while started.elapsed() < CONFIRM_WITHIN {
        match status(&leader.uri, CALL_LIMIT).await {
            Ok(s) if s.leader() == target_id => {
                return Ok(format!(
                    "leadership moved from `{}` to `{target_name}` (term {}), seen after {} ms",
                    leader.name,
                    s.raft_term(),
                    started.elapsed().as_millis()
                ))
            }
            Ok(s) => last = format!("leader {:x}", s.leader()),
            Err(e) => last = format!("{e:#}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    anyhow::bail!("`{target_name}` did not lead within {CONFIRM_WITHIN:?} of the transfer (last status: {last})")
}
