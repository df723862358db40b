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
use faultline_kind::topology::{MemberAddress, MemberPlan, SharedHost, TopologyKind};
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
        let default_peer = if member.port == PEER_PORT { PEER_PORT + 1 } else { PEER_PORT };
        let peer = |a: &MemberAddress| a.peer_port.unwrap_or(default_peer);
        let cluster: Vec<String> = (member.names.iter().zip(member.addresses))
            .map(|(n, a)| format!("{n}=http://{}:{}", a.host, peer(a)))
            .collect();
        let me = &member.addresses[member.index];
        [
            "--name",
            name,
            // In a container, its own filesystem, kept across a restart
            // (`data_args` puts it on the fault filesystem instead); a
            // process member's own directory.
            "--data-dir",
            &format!("{}/member", member.data_dir.unwrap_or("/var/lib/etcd")),
            "--listen-client-urls",
            &format!("http://{}:{}", member.listen, member.port),
            "--advertise-client-urls",
            &format!("http://{}:{}", me.host, me.port),
            "--listen-peer-urls",
            &format!("http://{}:{}", member.listen, peer(me)),
            "--initial-advertise-peer-urls",
            &format!("http://{}:{}", me.host, peer(me)),
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

    /// Three members on loopback, each on its own client and peer port.
    fn shared_host(&self) -> Option<SharedHost> {
        Some(SharedHost { default_members: 3, peer_port: true })
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
        let addresses: Vec<MemberAddress> =
            names.iter().map(|n| MemberAddress { host: n.clone(), port: CLIENT_PORT, peer_port: None }).collect();
        let plan = |index| MemberPlan {
            index,
            port: CLIENT_PORT,
            names: &names,
            addresses: &addresses,
            listen: "0.0.0.0",
            data_dir: None,
            target: "kv",
        };
        let args = EtcdTopology.member_args(&plan(1));
        let after = |flag: &str| args[args.iter().position(|a| a == flag).unwrap() + 1].clone();
        assert_eq!(after("--name"), "kv-1");
        assert_eq!(after("--initial-cluster"), "kv-0=http://kv-0:2380,kv-1=http://kv-1:2380,kv-2=http://kv-2:2380");
        assert_eq!(after("--initial-advertise-peer-urls"), "http://kv-1:2380");
        assert_eq!(after("--listen-client-urls"), "http://0.0.0.0:2379");
        assert_eq!(after("--data-dir"), "/var/lib/etcd/member");
        let first = EtcdTopology.member_args(&plan(0));
        assert_eq!(first.iter().filter(|a| a.contains("kv-1")).count(), 1, "member 0 is started like any other");
    }

    #[test]
    fn members_on_one_host_each_have_their_own_ports_and_directory() {
        let names = ["kv-0".to_string(), "kv-1".into()];
        let addresses = [
            MemberAddress { host: "127.0.0.1".into(), port: 4001, peer_port: Some(4002) },
            MemberAddress { host: "127.0.0.1".into(), port: 4003, peer_port: Some(4004) },
        ];
        let plan = MemberPlan {
            index: 1,
            port: 4003,
            names: &names,
            addresses: &addresses,
            listen: "127.0.0.1",
            data_dir: Some("/run/t/kv-1"),
            target: "kv",
        };
        let args = EtcdTopology.member_args(&plan);
        let after = |flag: &str| args[args.iter().position(|a| a == flag).unwrap() + 1].clone();
        assert_eq!(after("--initial-cluster"), "kv-0=http://127.0.0.1:4002,kv-1=http://127.0.0.1:4004");
        assert_eq!(after("--listen-client-urls"), "http://127.0.0.1:4003");
        assert_eq!(after("--listen-peer-urls"), "http://127.0.0.1:4004");
        assert_eq!(after("--advertise-client-urls"), "http://127.0.0.1:4003");
        assert_eq!(after("--data-dir"), "/run/t/kv-1/member");
    }
}
