//! Who is who in a running multi-container target: its members (the
//! database servers) and companion groups (e.g. Sentinels), addressed by
//! name (`kv-1`, `kv-sentinels-0`) or by role (`kv.primary`, `kv.replicas`,
//! `kv.member[1]`, `kv.sentinels[0]`). Roles are asked of the servers at
//! the moment a selector is resolved (through the kind's
//! [`TopologyKind`]), so `kv.primary` after a failover is the new primary.
//! This is the running half, which asks containers; the selector grammar
//! is the spec's (`faultline_spec::selector`), and what a kind knows about
//! its members is [`faultline_kind::topology`].

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail};
use indexmap::IndexMap;

use crate::client::{Container, Docker, Network};
use faultline_kind::topology::{FailoverMember, FailoverPlan, TopologyKind};
use faultline_kind::TargetDriver;
use faultline_model::roles::Role;

/// How long a member has to say its role when a selector is resolved: a
/// member that has not answered by then (paused, cut off) is left out; a
/// busy machine can take seconds to schedule a container's reply.
const ASK_ROLE_LIMIT: Duration = Duration::from_secs(5);

/// One container of a target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// `kv-0` for members, `kv-sentinels-0` for companions: the container's
    /// host name and its alias on the target's network.
    pub name: String,
    /// The companion group, or None for a member.
    pub group: Option<String>,
    /// Position in its group (member 0 started as the primary).
    pub index: usize,
    pub container: Container,
    /// The port it serves on inside the container (members: the kind's port;
    /// companions: their `port`, if given).
    pub port: Option<u16>,
}

pub use faultline_spec::selector::{companion_name, member_name, Selector};

/// A docker target's containers and how to ask them their roles.
pub struct Topology {
    pub target: String,
    pub docker: Docker,
    /// The target's network; the host reaches every container on it.
    pub network: Network,
    pub members: Vec<Member>,
    pub companions: IndexMap<String, Vec<Member>>,
    /// Each member's fault filesystem (by member name), when its data runs on one.
    pub disks: std::sync::Mutex<std::collections::HashMap<String, faultline_faultfs::Mounted>>,
    kind: Arc<dyn TopologyKind>,
    driver: Arc<dyn TargetDriver>,
}

impl Topology {
    pub fn new(
        target: String,
        docker: Docker,
        network: Network,
        members: Vec<Member>,
        companions: IndexMap<String, Vec<Member>>,
        kind: Arc<dyn TopologyKind>,
        driver: Arc<dyn TargetDriver>,
    ) -> Topology {
        Topology { target, docker, network, members, companions, disks: Default::default(), kind, driver }
    }

    /// Members, then companions.
    pub fn all(&self) -> impl Iterator<Item = &Member> {
        self.members.iter().chain(self.companions.values().flatten())
    }

    /// The container's address on the target's network now (it can change
    /// when a container is disconnected and connected again).
    pub async fn ip(&self, m: &Member) -> anyhow::Result<Ipv4Addr> {
        self.docker
            .ip_on(&m.container, &self.network.name)
            .await?
            .ok_or_else(|| anyhow!("`{}` has no address on network `{}` now", m.name, self.network.name))
    }

    /// Where a client on the host reaches the member now, in the kind's URI
    /// form (e.g. `redis://172.18.0.2:6379`).
    pub async fn uri(&self, m: &Member) -> anyhow::Result<String> {
        let (ip, port) = self.address(m).await?;
        Ok(self.driver.uri(&ip.to_string(), port))
    }

    /// The member's address and port now: the `host:port` a driver's own
    /// discovery names it by (the replica set is initiated with it).
    async fn address(&self, m: &Member) -> anyhow::Result<(Ipv4Addr, u16)> {
        let port = m.port.ok_or_else(|| anyhow!("`{}` has no port (give its group a `port`)", m.name))?;
        Ok((self.ip(m).await?, port))
    }

    /// Every member's role, asked now. A member that cannot be asked (paused,
    /// stopped, cut off) has an error instead.
    pub async fn roles(&self) -> Vec<(Member, anyhow::Result<Role>)> {
        self.roles_within(ASK_ROLE_LIMIT).await.into_iter().map(|(m, _, r)| (m, r)).collect()
    }

    /// As [`Self::roles`], with an error for a member that does not answer
    /// within `limit`, and the `host:port` each member was asked at (None
    /// when it has no address now), by which the role sampler knows which
    /// member a driver says answered a read.
    pub async fn roles_within(&self, limit: Duration) -> Vec<(Member, Option<String>, anyhow::Result<Role>)> {
        let addresses = futures::future::join_all(self.members.iter().map(|m| self.address(m))).await;
        let host_ports: Vec<Option<String>> =
            addresses.iter().map(|a| a.as_ref().ok().map(|(ip, port)| format!("{ip}:{port}"))).collect();
        let uris: Vec<anyhow::Result<String>> =
            addresses.into_iter().map(|a| a.map(|(ip, port)| self.driver.uri(&ip.to_string(), port))).collect();
        let reachable: Vec<(usize, String)> =
            uris.iter().enumerate().filter_map(|(i, u)| u.as_ref().ok().map(|u| (i, u.clone()))).collect();
        let asked = self.kind.roles(&reachable.iter().map(|(_, u)| u.clone()).collect::<Vec<_>>(), limit).await;
        let mut answers: Vec<Option<anyhow::Result<Role>>> = (0..self.members.len()).map(|_| None).collect();
        for ((i, _), role) in reachable.into_iter().zip(asked) {
            answers[i] = Some(role);
        }
        self.members
            .iter()
            .cloned()
            .zip(uris)
            .zip(answers)
            .zip(host_ports)
            .map(|(((m, uri), role), address)| {
                let role = match (uri, role) {
                    (Err(e), _) => Err(e),
                    (Ok(_), Some(r)) => r,
                    (Ok(_), None) => Err(anyhow!("not asked")),
                };
                (m, address, role)
            })
            .collect()
    }

    /// One line per member: `kv-0: primary, kv-1: replica (link up), …`.
    pub fn describe_roles(roles: &[(Member, anyhow::Result<Role>)]) -> String {
        roles
            .iter()
            .map(|(m, r)| match r {
                Ok(role) => format!("{}: {role}", m.name),
                Err(e) => format!("{}: unknown ({e:#})", m.name),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// What `selector` picks now. `Primary` is an error when no member says
    /// it is primary, and gives every one that does (two during a split
    /// brain); `Replicas` may be empty.
    pub async fn resolve(&self, selector: &Selector) -> anyhow::Result<Vec<Member>> {
        let by_role = |want: fn(&Role) -> bool, roles: Vec<(Member, anyhow::Result<Role>)>| {
            roles.into_iter().filter(|(_, r)| r.as_ref().is_ok_and(want)).map(|(m, _)| m).collect::<Vec<_>>()
        };
        match selector {
            Selector::Primary => {
                let roles = self.roles().await;
                let described = Self::describe_roles(&roles);
                let primaries = by_role(|r| *r == Role::Primary, roles);
                if primaries.is_empty() {
                    bail!("no member of `{}` says it is primary now: {described}", self.target);
                }
                Ok(primaries)
            }
            Selector::Replicas => Ok(by_role(|r| matches!(r, Role::Replica { .. }), self.roles().await)),
            Selector::Members => Ok(self.members.clone()),
            Selector::Member(i) => self
                .members
                .get(*i)
                .cloned()
                .map(|m| vec![m])
                .ok_or_else(|| anyhow!("`{}` has no member {i}", self.target)),
            Selector::Group(g) => {
                self.companions.get(g).cloned().ok_or_else(|| anyhow!("`{}` has no companion group `{g}`", self.target))
            }
            Selector::GroupMember(g, i) => self
                .companions
                .get(g)
                .and_then(|c| c.get(*i))
                .cloned()
                .map(|m| vec![m])
                .ok_or_else(|| anyhow!("`{}` has no companion `{g}[{i}]`", self.target)),
        }
    }

    /// Switches the primary away from the member that is primary now,
    /// through the companion group `sentinels` watching it as `group`:
    /// returns the old primary and the evidence of each step.
    pub async fn failover(&self, sentinels: &str, group: &str, coordinated: bool) -> anyhow::Result<(Member, String)> {
        let primary = self.primary().await?;
        let discovery = self
            .companions
            .get(sentinels)
            .ok_or_else(|| anyhow!("`{}` has no companion group `{sentinels}`", self.target))?;
        let mut replicas = Vec::new();
        for m in self.resolve(&Selector::Replicas).await? {
            replicas.push(self.failover_member(&m).await?);
        }
        let mut watchers = Vec::new();
        for m in discovery {
            watchers.push(self.failover_member(m).await?);
        }
        let plan = FailoverPlan {
            primary: self.failover_member(&primary).await?,
            replicas,
            discovery: watchers,
            group: group.to_string(),
            coordinated,
        };
        let evidence = self.kind.failover(&plan).await?;
        Ok((primary, evidence))
    }

    async fn failover_member(&self, m: &Member) -> anyhow::Result<FailoverMember> {
        let port = m.port.ok_or_else(|| anyhow!("`{}` has no port (give its group a `port`)", m.name))?;
        Ok(FailoverMember { name: m.name.clone(), uri: self.uri(m).await?, host: self.ip(m).await?.to_string(), port })
    }

    /// The single primary now; an error if there is none or more than one.
    pub async fn primary(&self) -> anyhow::Result<Member> {
        let mut primaries = self.resolve(&Selector::Primary).await?;
        if primaries.len() > 1 {
            let names: Vec<&str> = primaries.iter().map(|m| m.name.as_str()).collect();
            bail!("`{}` has {} primaries now: {}", self.target, primaries.len(), names.join(", "));
        }
        Ok(primaries.remove(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use faultline_spec::selector::parse_selector;
    use faultline_spec::Spec;

    const SPEC: &str = "name: t\ntargets:\n  kv:\n    kind: redis\n    provider: docker\n    image: faultline/redis:bookworm\n    members: 3\n    companions:\n      sentinels: {count: 3, port: 26379}\n  local: {kind: redis, provider: process}\nworkloads:\n  w: {ops: {get: 1}}\nprofiles:\n  p: {closed: 1x1}\nscenarios:\n  - {name: s, target: kv, workload: w, profiles: [p]}\n";

    fn spec() -> Spec {
        crate::tests::parse("t.yaml", SPEC)
    }

    #[test]
    fn selectors_by_role_position_group_and_name() {
        let spec = spec();
        let sel = |t: &str| parse_selector(t, &spec).map(|s| s.selector);
        assert_eq!(sel("kv.primary"), Ok(Selector::Primary));
        assert_eq!(sel("kv.replicas"), Ok(Selector::Replicas));
        assert_eq!(sel("kv.leader"), Ok(Selector::Primary));
        assert_eq!(sel("kv.followers"), Ok(Selector::Replicas));
        assert_eq!(sel("kv.members"), Ok(Selector::Members));
        assert_eq!(sel("kv.member[2]"), Ok(Selector::Member(2)));
        assert_eq!(sel("kv-1"), Ok(Selector::Member(1)));
        assert_eq!(sel("kv.sentinels"), Ok(Selector::Group("sentinels".into())));
        assert_eq!(sel("kv.sentinels[1]"), Ok(Selector::GroupMember("sentinels".into(), 1)));
        assert_eq!(sel("kv-sentinels-2"), Ok(Selector::GroupMember("sentinels".into(), 2)));
        assert_eq!(parse_selector("kv.member[0]", &spec).unwrap().to_string(), "kv.member[0]");
    }

    #[test]
    fn bad_selectors_say_what_exists() {
        let spec = spec();
        let err = |t: &str| parse_selector(t, &spec).unwrap_err();
        assert!(err("kv.member[3]").contains("has 3 member(s)"), "{}", err("kv.member[3]"));
        assert!(err("kv.sentinels[3]").contains("has 3 container(s)"));
        assert!(
            err("kv.chief")
                .contains("known: primary, leader, replicas, secondaries, followers, members, member[i], sentinels"),
            "{}",
            err("kv.chief")
        );
        assert!(err("nope.primary").contains("no target named `nope`"));
        assert!(err("local.primary").contains("not a docker target"));
        assert!(err("kv-7").contains("names no container"));
        assert!(err("kv.member[x]").contains("index"));
    }
}
