//! What a kind knows about running several servers as one target: the
//! arguments that make a container a primary or a replica, and how to ask a
//! member which role it has right now. Roles are never remembered: after a
//! failover the answer changes, so every [`Role`] comes from the servers at
//! the moment it is asked for. A kind joins with one implementation of
//! [`TopologyKind`], named by its [`crate::registry::Kind`] (MongoDB asks
//! `hello`).

use faultline_model::roles::Role;

#[async_trait::async_trait]
pub trait TopologyKind: Send + Sync {
    /// The port the server listens on inside a container.
    fn container_port(&self) -> u16;
    /// The kind's own arguments for `member` in a container listening on
    /// its port on all its addresses. A kind whose replicas follow a primary
    /// it names (Redis) makes member 0 the primary; a kind whose members
    /// elect a leader among themselves (etcd) lists them all.
    fn member_args(&self, member: &MemberPlan) -> Vec<String>;
    /// The URI that reaches the primary through discovery servers (e.g.
    /// Redis Sentinels) at `servers` (`host:port` each) that watch it under
    /// `name`; None when the kind has no such discovery.
    fn discovery_uri(&self, servers: &[String], name: &str) -> Option<String> {
        let _ = (servers, name);
        None
    }
    /// The URI that reaches the whole group through the driver's own
    /// discovery (e.g. a MongoDB replica set), from every member's
    /// `host:port`; None when clients connect to member 0.
    fn group_uri(&self, hosts: &[String]) -> Option<String> {
        let _ = hosts;
        None
    }
    /// Forms the group once every member answers (e.g. `replSetInitiate`);
    /// members built from their arguments need nothing.
    async fn initiate(&self, members: &[FailoverMember]) -> anyhow::Result<String> {
        let _ = members;
        Ok(String::new())
    }
    /// The member's role now, asked of the server at `uri`.
    async fn role(&self, uri: &str) -> anyhow::Result<Role>;
    /// Arguments that make a member keep its files in `dir` (a directory
    /// inside its container), for data on the fault filesystem; None for
    /// a kind that cannot say where.
    fn data_args(&self, dir: &str) -> Option<Vec<String>> {
        let _ = dir;
        None
    }
    /// The `host:port` the kind's driver names the one server at `uri` by
    /// when it says which server answered a read; None for a kind whose
    /// driver does not say, or a URI of several servers.
    fn address(&self, uri: &str) -> Option<String> {
        let _ = uri;
        None
    }
    /// Switches the primary away from `plan.primary` through the discovery
    /// servers (the `failover` fault); the evidence of each step comes back.
    async fn failover(&self, plan: &FailoverPlan) -> anyhow::Result<String> {
        let _ = plan;
        anyhow::bail!("this kind has no failover")
    }
    /// Every member's role now (`uris[i]` is member i). Kinds whose members
    /// know the whole set (MongoDB) may ask one of them instead.
    /// A member that does not answer within `limit` gets an error: a frozen
    /// one accepts the connection and answers only once thawed.
    async fn roles(&self, uris: &[String], limit: std::time::Duration) -> Vec<anyhow::Result<Role>> {
        let asks = uris.iter().map(|u| async move {
            match tokio::time::timeout(limit, self.role(u)).await {
                Ok(role) => role,
                Err(_) => Err(anyhow::anyhow!("no answer within {limit:?}")),
            }
        });
        futures::future::join_all(asks).await
    }
}

/// A member about to be started in a container: where it stands in the
/// group, and the names (host names on the target's network) of all.
#[derive(Debug, Clone, Copy)]
pub struct MemberPlan<'a> {
    pub index: usize,
    /// The port every member listens on in its container.
    pub port: u16,
    /// Every member's host name, `names[index]` this one's.
    pub names: &'a [String],
    /// The target's name, e.g. to tell its cluster from another's.
    pub target: &'a str,
}

impl MemberPlan<'_> {
    /// The member Redis-like kinds make the primary (member 0), when this
    /// one is a replica of it: its host and port.
    pub fn primary(&self) -> Option<(&str, u16)> {
        (self.index > 0).then(|| (self.names[0].as_str(), self.port))
    }
}

/// A member as a failover sees it.
#[derive(Debug, Clone)]
pub struct FailoverMember {
    pub name: String,
    /// Where faultline reaches it.
    pub uri: String,
    /// Where its peers reach it.
    pub host: String,
    pub port: u16,
}

/// What a `failover` fault switches: the primary now, the members that may
/// take over, and the discovery servers (Sentinels) watching them as `group`.
#[derive(Debug, Clone)]
pub struct FailoverPlan {
    pub primary: FailoverMember,
    pub replicas: Vec<FailoverMember>,
    pub discovery: Vec<FailoverMember>,
    pub group: String,
    /// Stop writes and let the replicas catch up before switching, and
    /// demote the old primary the moment the new one is promoted.
    pub coordinated: bool,
}
