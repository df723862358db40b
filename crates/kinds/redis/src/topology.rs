//! Redis primaries and replicas: `--replicaof` to build them, `INFO
//! replication` to tell who is who now, Sentinels to find the primary.

use anyhow::Context;
use redis::AsyncConnectionConfig;

use faultline_kind::topology::{FailoverPlan, MemberPlan, TopologyKind};
use faultline_model::roles::Role;

pub struct RedisTopology;

#[async_trait::async_trait]
impl TopologyKind for RedisTopology {
    fn container_port(&self) -> u16 {
        6379
    }

    fn data_args(&self, dir: &str) -> Option<Vec<String>> {
        Some(vec!["--dir".into(), dir.into()])
    }

    fn member_args(&self, member: &MemberPlan) -> Vec<String> {
        let (port, primary) = (member.port, member.primary());
        // Reachable from the host and the peers (a container's own network is
        // the boundary), no persistence unless the spec's args ask for it, and
        // a replica's first sync starts at once instead of after Redis 7's
        // default 5 s wait for more replicas.
        let mut args: Vec<String> = [
            "--port",
            &port.to_string(),
            "--protected-mode",
            "no",
            "--save",
            "",
            "--appendonly",
            "no",
            "--repl-diskless-sync-delay",
            "0",
        ]
        .map(String::from)
        .to_vec();
        if let Some((host, port)) = primary {
            args.extend(["--replicaof".to_string(), host.to_string(), port.to_string()]);
        }
        args
    }

    fn discovery_uri(&self, sentinels: &[String], master: &str) -> Option<String> {
        Some(super::sentinel::format_uri(sentinels, master))
    }

    async fn role(&self, uri: &str) -> anyhow::Result<Role> {
        let client = redis::Client::open(uri).with_context(|| format!("invalid redis uri `{uri}`"))?;
        // No limits of the driver's own (1 s to connect, 500 ms to answer by
        // default): the caller's `limit` bounds the ask, and a member an
        // earlier fault froze answers once it is thawed within it.
        let config = AsyncConnectionConfig::new().set_connection_timeout(None).set_response_timeout(None);
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .with_context(|| format!("cannot connect to {uri}"))?;
        let info: String = redis::cmd("INFO").arg("replication").query_async(&mut conn).await?;
        Ok(parse_role(&info))
    }

    async fn failover(&self, plan: &FailoverPlan) -> anyhow::Result<String> {
        super::failover::run(plan).await
    }
}

/// The role in an `INFO replication` reply.
pub fn parse_role(info: &str) -> Role {
    let field = |name: &str| info.lines().find_map(|l| l.trim().strip_prefix(name).map(|v| v.trim().to_string()));
    match field("role:").as_deref() {
        Some("master") => Role::Primary,
        Some("slave") => Role::Replica { linked: field("master_link_status:").as_deref() == Some("up") },
        Some(other) => Role::Other(other.to_string()),
        None => Role::Other("no role in INFO replication".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_roles_from_info_replication() {
        assert_eq!(parse_role("# Replication\r\nrole:master\r\nconnected_slaves:2\r\n"), Role::Primary);
        let replica = "# Replication\r\nrole:slave\r\nmaster_host:kv-0\r\nmaster_link_status:up\r\n";
        assert_eq!(parse_role(replica), Role::Replica { linked: true });
        assert_eq!(parse_role("role:slave\r\nmaster_link_status:down\r\n"), Role::Replica { linked: false });
        assert_eq!(parse_role("role:sentinel\r\n"), Role::Other("sentinel".into()));
    }
}
