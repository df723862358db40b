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

use anyhow::{anyhow, bail};
use indexmap::IndexMap;

use crate::client::{Container, Docker, Network};
use faultline_kind::topology::{self, FailoverMember, FailoverPlan, MemberSet, TopologyKind};
use faultline_kind::TargetDriver;
use faultline_model::roles::Role;

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

use faultline_spec::selector::Selector;

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
        let roles = topology::roles_within(self, topology::ASK_ROLE_LIMIT).await;
        roles.into_iter().map(|r| (self.members[r.index].clone(), r.role)).collect()
    }

    /// What `selector` picks now (`pick` chooses `Any`'s member): members
    /// by role or position ([`topology::resolve`]), or companions.
    pub async fn resolve(&self, selector: &Selector, pick: u64) -> anyhow::Result<Vec<Member>> {
        match selector {
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
            members => {
                let picked = topology::resolve(self, members, pick).await?;
                Ok(picked.into_iter().map(|i| self.members[i].clone()).collect())
            }
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
        for m in self.resolve(&Selector::Replicas, 0).await? {
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
        let mut primaries = self.resolve(&Selector::Primary, 0).await?;
        if primaries.len() > 1 {
            let names: Vec<&str> = primaries.iter().map(|m| m.name.as_str()).collect();
            bail!("`{}` has {} primaries now: {}", self.target, primaries.len(), names.join(", "));
        }
        Ok(primaries.remove(0))
    }
}

/// The members as any provider's are seen: by position, reached at
/// their address on the target's network.
#[async_trait::async_trait]
impl MemberSet for Topology {
    fn target(&self) -> &str {
        &self.target
    }

    fn names(&self) -> Vec<String> {
        self.members.iter().map(|m| m.name.clone()).collect()
    }

    async fn address(&self, index: usize) -> anyhow::Result<(String, u16)> {
        let m = self.members.get(index).ok_or_else(|| anyhow!("`{}` has no member {index}", self.target))?;
        let (ip, port) = Topology::address(self, m).await?;
        Ok((ip.to_string(), port))
    }

    fn kind(&self) -> &dyn TopologyKind {
        self.kind.as_ref()
    }

    fn uri(&self, host: &str, port: u16) -> String {
        self.driver.uri(host, port)
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
        assert_eq!(sel("kv.any"), Ok(Selector::Any));
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
            err("kv.chief").contains(
                "known: primary, leader, replicas, secondaries, followers, members, member[i], any, sentinels"
            ),
            "{}",
            err("kv.chief")
        );
        assert!(err("nope.primary").contains("no target named `nope`"));
        assert!(err("local.primary").contains("runs one server"));
        assert!(err("kv-7").contains("names no container"));
        assert!(err("kv.member[x]").contains("index"));
    }
}
