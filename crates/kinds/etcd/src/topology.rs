//! etcd clusters in containers: every member starts alike, named by its
//! host name on the target's network and listing every member in
//! `--initial-cluster`, and the members elect their leader themselves (no
//! member is the leader by position). Roles come from each member's own
//! Maintenance Status: the leader is the member whose id is the leader id
//! it reports; a follower that knows a leader is linked.

use std::time::Duration;

use etcd_client::StatusResponse;

use super::endpoints;
use super::EtcdOptions;
use faultline_kind::topology::{MemberPlan, TopologyKind};
use faultline_model::roles::Role;

/// etcd's own client port, which members listen on in their containers.
pub const CLIENT_PORT: u16 = 2379;
/// The port members reach each other on (etcd's default).
const PEER_PORT: u16 = 2380;

pub struct EtcdTopology;

/// etcd 3.4 logs through its deprecated logger unless told otherwise: its
/// structured one, to stderr (the member's log the provider keeps).
pub const LOG_TO_STDERR: [&str; 4] = ["--logger", "zap", "--log-outputs", "stderr"];

/// A member's role in its status: the leader, or a follower that knows
/// one (linked) or does not (an election is running, or it is cut off).
pub fn role_of(status: &StatusResponse) -> Role {
    let me = status.header().map(|h| h.member_id());
    match status.leader() {
        0 => Role::Replica { linked: false },
        leader if Some(leader) == me => Role::Primary,
        _ => Role::Replica { linked: true },
    }
}

/// The status of the one member at `uri`, within `limit`.
pub async fn status(uri: &str, limit: Duration) -> anyhow::Result<StatusResponse> {
    let members = endpoints::parse(uri).map_err(|e| anyhow::anyhow!("`{uri}` {e}"))?;
    anyhow::ensure!(members.len() == 1, "`{uri}` names {} members, not one", members.len());
    let options = EtcdOptions { connect_timeout: Some(faultline_model::units::Dur(limit)), ..Default::default() };
    let mut client = endpoints::client(&members[0], &options).await?;
    match tokio::time::timeout(limit, client.status()).await {
        Ok(Ok(status)) => Ok(status),
        Ok(Err(e)) => anyhow::bail!("status {uri}: {}", super::errors::explain(&e)),
        Err(_) => anyhow::bail!("status {uri}: no answer within {limit:?}"),
    }
}

#[async_trait::async_trait]
impl TopologyKind for EtcdTopology {
    fn container_port(&self) -> u16 {
        CLIENT_PORT
    }

    fn member_args(&self, member: &MemberPlan) -> Vec<String> {
        let name = &member.names[member.index];
        let peer_port = if member.port == PEER_PORT { PEER_PORT + 1 } else { PEER_PORT };
        let cluster: Vec<String> = member.names.iter().map(|n| format!("{n}=http://{n}:{peer_port}")).collect();
        [
            "--name",
            name,
            // In the container's own filesystem, kept across a restart
            // (`data_args` puts it on the fault filesystem instead).
            "--data-dir",
            "/var/lib/etcd/member",
            "--listen-client-urls",
            &format!("http://0.0.0.0:{}", member.port),
            "--advertise-client-urls",
            &format!("http://{name}:{}", member.port),
            "--listen-peer-urls",
            &format!("http://0.0.0.0:{peer_port}"),
            "--initial-advertise-peer-urls",
            &format!("http://{name}:{peer_port}"),
            "--initial-cluster",
            &cluster.join(","),
            // Two targets' clusters never take each other's members.
            "--initial-cluster-token",
            member.target,
            "--initial-cluster-state",
            "new",
            // As etcd 3.5 and later default to: a member cut off from the
            // others does not raise the term while it is away, so its
            // return does not depose the leader the majority elected.
            "--pre-vote",
        ]
        .into_iter()
        .chain(LOG_TO_STDERR)
        .map(String::from)
        .collect()
    }

    fn group_uri(&self, hosts: &[String]) -> Option<String> {
        Some(format!("{}{}", endpoints::SCHEME, hosts.join(",")))
    }

    async fn role(&self, uri: &str) -> anyhow::Result<Role> {
        Ok(role_of(&status(uri, Duration::from_secs(2)).await?))
    }

    /// Given after [`Self::member_args`]: the last `--data-dir` is the one
    /// etcd takes.
    fn data_args(&self, dir: &str) -> Option<Vec<String>> {
        Some(vec!["--data-dir".into(), dir.into()])
    }

    fn address(&self, uri: &str) -> Option<String> {
        match endpoints::parse(uri) {
            Ok(members) if members.len() == 1 => members.into_iter().next(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_member_lists_the_whole_cluster_and_none_leads_by_position() {
        let names = ["kv-0".to_string(), "kv-1".into(), "kv-2".into()];
        let plan = |index| MemberPlan { index, port: CLIENT_PORT, names: &names, target: "kv" };
        let args = EtcdTopology.member_args(&plan(1));
        let after = |flag: &str| args[args.iter().position(|a| a == flag).unwrap() + 1].clone();
        assert_eq!(after("--name"), "kv-1");
        assert_eq!(after("--initial-cluster"), "kv-0=http://kv-0:2380,kv-1=http://kv-1:2380,kv-2=http://kv-2:2380");
        assert_eq!(after("--initial-advertise-peer-urls"), "http://kv-1:2380");
        let first = EtcdTopology.member_args(&plan(0));
        assert_eq!(first.iter().filter(|a| a.contains("kv-1")).count(), 1, "member 0 is started like any other");
    }
}
