//! What a kind knows about running several servers as one target: the
//! arguments that make a container a primary or a replica, and how to ask a
//! member which role it has right now. Roles are never remembered: after a
//! failover the answer changes, so every [`Role`] comes from the servers at
//! the moment it is asked for. A kind joins with one implementation of
//! [`TopologyKind`], named by its [`crate::registry::Kind`] (MongoDB asks
//! `hello`).
//!
//! The running members of a target, whichever provider started them
//! (containers, or processes side by side on this host), are a
//! [`MemberSet`]: one resolver ([`resolve`]) turns a fault's selector
//! (`kv.leader`, `kv.followers`, `kv.any`, `kv.member[1]`) into members by
//! asking their roles at that moment, and the role sampler asks the same.

use std::time::Duration;

use anyhow::{anyhow, bail};

use faultline_model::roles::Role;
use faultline_spec::selector::Selector;

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
    /// Whether the kind's members can run side by side on one host as
    /// processes (each on its own ports and directory), and how many a
    /// process target starts unless told; None: a process target is one
    /// server.
    fn shared_host(&self) -> Option<SharedHost> {
        None
    }
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

/// How a kind's members share one host ([`TopologyKind::shared_host`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharedHost {
    /// Members a process target starts when its spec names no `members`.
    pub default_members: u32,
    /// Each member needs a second port of its own, for its peers.
    pub peer_port: bool,
}

/// A member about to be started (in a container, or as a process beside
/// the others): where it stands in the group, and how every member is
/// named and reached.
#[derive(Debug, Clone, Copy)]
pub struct MemberPlan<'a> {
    pub index: usize,
    /// The port this member listens on for clients.
    pub port: u16,
    /// Every member's name (a container's host name on the target's
    /// network), `names[index]` this one's.
    pub names: &'a [String],
    /// Where each member is reached, parallel to `names`.
    pub addresses: &'a [MemberAddress],
    /// The address this member binds (all of a container's, or loopback).
    pub listen: &'a str,
    /// Where the member keeps its data; None: the kind's own default place
    /// (inside a container).
    pub data_dir: Option<&'a str>,
    /// The target's name, e.g. to tell its cluster from another's.
    pub target: &'a str,
}

/// Where a member is reached by clients and by its peers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberAddress {
    pub host: String,
    pub port: u16,
    /// Its own peer port, when members share a host; None: the kind's
    /// default (each container has its own).
    pub peer_port: Option<u16>,
}

impl MemberPlan<'_> {
    /// The member Redis-like kinds make the primary (member 0), when this
    /// one is a replica of it: its host and port.
    pub fn primary(&self) -> Option<(&str, u16)> {
        (self.index > 0).then(|| (self.names[0].as_str(), self.port))
    }
}

/// The running members of a target, whichever provider started them.
#[async_trait::async_trait]
pub trait MemberSet: Send + Sync {
    /// The target's name, for errors.
    fn target(&self) -> &str;
    /// Each member's name (`kv-0`, …), by position.
    fn names(&self) -> Vec<String>;
    /// Where a client on this host reaches member `index` now.
    async fn address(&self, index: usize) -> anyhow::Result<(String, u16)>;
    /// How to ask a member its role.
    fn kind(&self) -> &dyn TopologyKind;
    /// The URI that reaches the one server at `host:port` (the driver's form).
    fn uri(&self, host: &str, port: u16) -> String;
}

/// How long a member has to say its role when a selector is resolved: a
/// member that has not answered by then (paused, cut off) is left out; a
/// busy machine can take seconds to schedule a container's reply.
pub const ASK_ROLE_LIMIT: Duration = Duration::from_secs(5);

/// A member's role as asked now, with the `host:port` it was asked at
/// (None when it has no address now), by which the role sampler knows
/// which member a driver says answered a read.
#[derive(Debug)]
pub struct MemberRole {
    pub index: usize,
    pub name: String,
    pub address: Option<String>,
    /// An error for a member that could not be asked (paused, stopped, cut
    /// off) or did not answer within the limit.
    pub role: anyhow::Result<Role>,
}

/// Where a client reaches member `index` now, in the kind's URI form.
pub async fn member_uri(set: &dyn MemberSet, index: usize) -> anyhow::Result<String> {
    let (host, port) = set.address(index).await?;
    Ok(set.uri(&host, port))
}

/// Every member's role, asked now (all at once), each within `limit`.
pub async fn roles_within(set: &dyn MemberSet, limit: Duration) -> Vec<MemberRole> {
    let names = set.names();
    let addresses = futures::future::join_all((0..names.len()).map(|i| set.address(i))).await;
    let reachable: Vec<(usize, String)> = addresses
        .iter()
        .enumerate()
        .filter_map(|(i, a)| a.as_ref().ok().map(|(host, port)| (i, set.uri(host, *port))))
        .collect();
    let uris: Vec<String> = reachable.iter().map(|(_, u)| u.clone()).collect();
    let mut asked = set.kind().roles(&uris, limit).await.into_iter();
    let mut answers: Vec<Option<anyhow::Result<Role>>> = (0..names.len()).map(|_| None).collect();
    for (i, _) in reachable {
        answers[i] = asked.next();
    }
    names
        .into_iter()
        .zip(addresses)
        .zip(answers)
        .enumerate()
        .map(|(index, ((name, address), answer))| {
            let (address, role) = match address {
                Err(e) => (None, Err(e)),
                Ok((host, port)) => {
                    (Some(format!("{host}:{port}")), answer.unwrap_or_else(|| Err(anyhow!("not asked"))))
                }
            };
            MemberRole { index, name, address, role }
        })
        .collect()
}

/// One line for every member: `kv-0: primary, kv-1: replica (link up), …`.
pub fn describe_roles(roles: &[MemberRole]) -> String {
    let each = roles.iter().map(|m| match &m.role {
        Ok(role) => format!("{}: {role}", m.name),
        Err(e) => format!("{}: unknown ({e:#})", m.name),
    });
    each.collect::<Vec<_>>().join(", ")
}

/// The members (by position) `selector` picks now. `Primary` gives every
/// member that says it leads (two during a split brain) and is an error
/// when none does, naming every member's answer; `Replicas` may be empty;
/// `Any` is member `pick % n`, whatever its role (a rerun of the same spec
/// hits the same one). Companion groups are the docker provider's.
pub async fn resolve(set: &dyn MemberSet, selector: &Selector, pick: u64) -> anyhow::Result<Vec<usize>> {
    let n = set.names().len();
    let by_role = |want: fn(&Role) -> bool, roles: &[MemberRole]| -> Vec<usize> {
        roles.iter().filter(|m| m.role.as_ref().is_ok_and(want)).map(|m| m.index).collect()
    };
    match selector {
        Selector::Primary => {
            let roles = roles_within(set, ASK_ROLE_LIMIT).await;
            let primaries = by_role(|r| *r == Role::Primary, &roles);
            if primaries.is_empty() {
                bail!("no member of `{}` says it is primary now: {}", set.target(), describe_roles(&roles));
            }
            Ok(primaries)
        }
        Selector::Replicas => {
            Ok(by_role(|r| matches!(r, Role::Replica { .. }), &roles_within(set, ASK_ROLE_LIMIT).await))
        }
        Selector::Members => Ok((0..n).collect()),
        Selector::Member(i) if *i < n => Ok(vec![*i]),
        Selector::Member(i) => bail!("`{}` has no member {i}", set.target()),
        Selector::Any if n > 0 => Ok(vec![(pick % n as u64) as usize]),
        Selector::Any => bail!("`{}` has no members", set.target()),
        Selector::Group(g) | Selector::GroupMember(g, _) => {
            bail!("`{}` has no companion group `{g}` (only docker targets have companions)", set.target())
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Members whose roles are given: `roles[i]` answers for `host-i`
    /// (None: it does not answer).
    struct Given {
        roles: Vec<Option<Role>>,
    }

    #[async_trait::async_trait]
    impl TopologyKind for Given {
        fn container_port(&self) -> u16 {
            1
        }
        fn member_args(&self, _: &MemberPlan) -> Vec<String> {
            Vec::new()
        }
        async fn role(&self, uri: &str) -> anyhow::Result<Role> {
            let i: usize = uri.trim_start_matches("fake://host-").split(':').next().unwrap_or("").parse()?;
            self.roles[i].clone().ok_or_else(|| anyhow!("no answer"))
        }
    }

    #[async_trait::async_trait]
    impl MemberSet for Given {
        fn target(&self) -> &str {
            "kv"
        }
        fn names(&self) -> Vec<String> {
            (0..self.roles.len()).map(|i| format!("kv-{i}")).collect()
        }
        async fn address(&self, index: usize) -> anyhow::Result<(String, u16)> {
            Ok((format!("host-{index}"), 7000 + index as u16))
        }
        fn kind(&self) -> &dyn TopologyKind {
            self
        }
        fn uri(&self, host: &str, port: u16) -> String {
            format!("fake://{host}:{port}")
        }
    }

    const LEADS: Option<Role> = Some(Role::Primary);
    const FOLLOWS: Option<Role> = Some(Role::Replica { linked: true });

    #[tokio::test]
    async fn selectors_resolve_by_the_roles_the_members_give_now() {
        let set = Given { roles: vec![FOLLOWS, LEADS, None, FOLLOWS] };
        assert_eq!(resolve(&set, &Selector::Primary, 0).await.unwrap(), [1]);
        assert_eq!(
            resolve(&set, &Selector::Replicas, 0).await.unwrap(),
            [0, 3],
            "one that does not answer is left out"
        );
        assert_eq!(resolve(&set, &Selector::Members, 0).await.unwrap(), [0, 1, 2, 3]);
        assert_eq!(resolve(&set, &Selector::Member(2), 0).await.unwrap(), [2]);
        assert_eq!(resolve(&set, &Selector::Any, 6).await.unwrap(), [2], "any: the pick among all, whatever its role");
        let err = resolve(&set, &Selector::Member(5), 0).await.unwrap_err().to_string();
        assert!(err.contains("`kv` has no member 5"), "{err}");
        let err = resolve(&set, &Selector::Group("sentinels".into()), 0).await.unwrap_err().to_string();
        assert!(err.contains("only docker targets have companions"), "{err}");

        let split = Given { roles: vec![LEADS, FOLLOWS, LEADS] };
        assert_eq!(resolve(&split, &Selector::Primary, 0).await.unwrap(), [0, 2], "both leaders of a split brain");
        let none = Given { roles: vec![FOLLOWS, None] };
        let err = resolve(&none, &Selector::Primary, 0).await.unwrap_err().to_string();
        assert!(err.contains("no member of `kv` says it is primary now: kv-0: replica"), "{err}");
        assert!(err.contains("kv-1: unknown (no answer)"), "{err}");
    }

    #[tokio::test]
    async fn roles_name_the_address_each_member_was_asked_at() {
        let roles = roles_within(&Given { roles: vec![LEADS, None] }, ASK_ROLE_LIMIT).await;
        assert_eq!(roles[0].address.as_deref(), Some("host-0:7000"));
        assert_eq!(roles[1].address.as_deref(), Some("host-1:7001"));
        assert!(matches!(roles[0].role, Ok(Role::Primary)) && roles[1].role.is_err());
    }
}
