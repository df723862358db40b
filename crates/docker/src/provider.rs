//! Runs a target as containers: `members` servers (as their kind starts
//! them: Redis makes member 0 the primary and the others its replicas,
//! etcd's members elect a leader) and companion groups (e.g. Sentinels), on an
//! internal network of the run's own that the host reaches through its
//! gateway address. Everything is labeled with the run id and removed when
//! the target stops, when its start fails or is abandoned, and (through a
//! drop guard) when faultline panics; `faultline teardown` removes what a
//! killed faultline left. Clients reach member 0, or with `discovery` the
//! primary the target's Sentinels name at each connect.
//!
//! The engine's docker provider (its provider/docker.rs) calls [`start`]
//! with the kind's [`TopologyKind`] (the build's list of kinds is the
//! CLI's) and holds what comes back, an [`Up`], in its `RunningTarget`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use indexmap::IndexMap;
use tokio::time::Instant;

use crate::members::{Member, Topology};
use crate::{ContainerSpec, Docker, Labels, Network, ReadyCheck, TeardownGuard, MEMBER_LABEL};
use faultline_kind::topology::{FailoverMember, MemberAddress, MemberPlan, TopologyKind};
use faultline_kind::{ServerInfo, TargetDriver};
use faultline_model::roles::Role;
use faultline_model::units::{format_duration, Size};
use faultline_spec::docker::{split_tmpfs, CompanionSpec, DiscoverySpec, ReadySpec};
use faultline_spec::selector::{companion_name, member_name};
use faultline_spec::TargetSpec;

/// A started docker target: its containers, and the guard that removes
/// them if the orderly [`DockerTarget::stop`] never runs.
pub struct DockerTarget {
    pub topology: Arc<Topology>,
    labels: Labels,
    logs: PathBuf,
    guard: TeardownGuard,
}

impl DockerTarget {
    /// Saves every container's logs into the run directory, then removes
    /// the containers and the network; says, naming the target, what could
    /// not be done.
    #[must_use]
    pub async fn stop(mut self) -> Vec<String> {
        let mut problems = save_all_logs(&self.topology.docker, self.topology.all(), &self.logs).await;
        let removed = self.topology.docker.remove_labeled(&self.labels).await;
        problems.extend(removed.errors.iter().map(|e| format!("removing its containers: {e}")));
        // The containers are gone: the filesystems under their data can go.
        let disks = std::mem::take(&mut *self.topology.disks.lock().unwrap_or_else(|p| p.into_inner()));
        for (member, disk) in disks {
            if let Err(e) = disk.unmount() {
                problems.push(format!("`{member}`: unmounting its fault filesystem: {e}"));
            }
        }
        // What is left (if anything) the guard cannot remove either.
        self.guard.disarm();
        problems.into_iter().map(|p| format!("target `{}`: {p}", self.topology.target)).collect()
    }
}

/// A docker target that is up and answering, for the engine to hold.
pub struct Up {
    /// Where clients connect (member 0, the group, or the primary through
    /// the Sentinels).
    pub uri: String,
    /// What the probe of member 0 learned.
    pub server: ServerInfo,
    /// The containers, removed by [`DockerTarget::stop`] (or its guard).
    pub target: DockerTarget,
}

/// Where a member's data goes in its container when it runs on the fault filesystem.
const FAULT_DISK_DIR: &str = "/faultline-data";

/// Starts `name`'s containers, its members run as `kind` says, and waits
/// until they answer; logs go under `log_dir`. `fault_disk`: a directory
/// under which each member's data runs on the fault filesystem (mounted
/// there, bound into the container), cached so, for disk faults.
pub async fn start(
    name: &str,
    spec: &TargetSpec,
    driver: Arc<dyn TargetDriver>,
    kind: Arc<dyn TopologyKind>,
    log_dir: &Path,
    fault_disk: Option<(&Path, faultline_faultfs::Layer)>,
) -> anyhow::Result<Up> {
    let label = format!("target `{name}` (docker)");
    let docker = Docker::connect().await.with_context(|| label.clone())?;
    let image = spec.image.clone().context("docker targets need `image`")?;
    let mut images = vec![image.clone()];
    images.extend(spec.companions.values().filter_map(|c| c.image.clone()));
    for i in &images {
        docker.require_image(i).await.with_context(|| label.clone())?;
    }

    let labels = Labels::target(&faultline_kind::ledger::run_id(log_dir), name);
    // Armed from before the first resource exists: if this future is dropped
    // (Ctrl-C during start) or panics, the guard removes what it created.
    let mut guard = TeardownGuard::new(labels.clone());
    let logs = log_dir.join(name);
    let mut build = Build {
        docker: docker.clone(),
        name,
        spec,
        driver,
        kind,
        labels: labels.clone(),
        created: Vec::new(),
        fault_disk,
        disks: HashMap::new(),
    };
    match build.run(&image).await {
        Ok((topology, server, uri)) => {
            Ok(Up { uri, server, target: DockerTarget { topology: Arc::new(topology), labels, logs, guard } })
        }
        Err((e, culprit)) => {
            let unsaved = save_all_logs(&docker, build.created.iter(), &logs).await;
            let tail = match culprit {
                Some(c) => format!(
                    "\nlast lines of {} (saved in {}):\n{}",
                    c.name,
                    logs.join(format!("{}.log", c.name)).display(),
                    docker.log_tail(&c.container, 15).await
                ),
                None => String::new(),
            };
            let removed = docker.remove_labeled(&labels).await;
            guard.disarm();
            let problems: Vec<String> = unsaved.into_iter().chain(removed.errors).collect();
            let leftovers = match problems.is_empty() {
                true => String::new(),
                false => format!("\nteardown problems: {}", problems.join("; ")),
            };
            Err(anyhow!("{label}: {e:#}{tail}{leftovers}"))
        }
    }
}

/// Saves each member's log as `dir/NAME.log`; says which could not be saved.
async fn save_all_logs<'a>(docker: &Docker, members: impl Iterator<Item = &'a Member>, dir: &Path) -> Vec<String> {
    let saves = members.map(|m| {
        let path = dir.join(format!("{}.log", m.name));
        async move {
            let saved = docker.save_logs(&m.container, &path).await;
            saved.err().map(|e| format!("cannot save the logs of `{}`: {e:#}", m.name))
        }
    });
    futures::future::join_all(saves).await.into_iter().flatten().collect()
}

type Failure = (anyhow::Error, Option<Member>);

struct Build<'a> {
    docker: Docker,
    name: &'a str,
    spec: &'a TargetSpec,
    driver: Arc<dyn TargetDriver>,
    kind: Arc<dyn TopologyKind>,
    labels: Labels,
    /// Every container started so far, for logs and error messages.
    created: Vec<Member>,
    fault_disk: Option<(&'a Path, faultline_faultfs::Layer)>,
    /// The members' fault filesystems mounted so far.
    disks: HashMap<String, faultline_faultfs::Mounted>,
}

impl Build<'_> {
    /// Mounts the fault filesystem for `member` at `ROOT/MEMBER` (its files
    /// in `ROOT/MEMBER.disk`, both listed for teardown); the mountpoint.
    fn mount_disk(&mut self, root: &Path, member: &str, layer: faultline_faultfs::Layer) -> anyhow::Result<PathBuf> {
        let mountpoint = root.join(member);
        let backing = root.join(format!("{member}.disk"));
        for dir in [&mountpoint, &backing] {
            let listed = faultline_kind::ledger::Resource::DataDirectory {
                target: self.name.to_string(),
                path: dir.display().to_string(),
            };
            faultline_kind::ledger::record(listed)?;
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let mounted = faultline_faultfs::mount(&backing, &mountpoint, member, layer)
            .with_context(|| format!("`{member}`: cannot mount the fault filesystem over {}", mountpoint.display()))?;
        self.disks.insert(member.to_string(), mounted);
        Ok(mountpoint)
    }

    async fn run(&mut self, image: &str) -> Result<(Topology, ServerInfo, String), Failure> {
        let spec = self.spec;
        let net_name = format!("fl-{}-{}", self.labels.run, self.name);
        let network = self.docker.create_network(&net_name, &self.labels, true).await.map_err(|e| (e, None))?;
        let port = spec.port.unwrap_or_else(|| self.kind.container_port());
        let command = spec.command.clone().unwrap_or_else(|| self.driver.default_command().to_string());
        let member_count = spec.members.unwrap_or(1) as usize;
        let primary_host = member_name(self.name, 0);
        let own_port = spec.args.iter().any(|a| a.contains("{port}"));

        let names: Vec<String> = (0..member_count).map(|i| member_name(self.name, i)).collect();
        // Each container has its own address: its host name, the kind's ports.
        let addresses: Vec<MemberAddress> =
            names.iter().map(|n| MemberAddress { host: n.clone(), port, peer_port: None }).collect();
        for i in 0..member_count {
            let member = names[i].clone();
            let vars = HashMap::from([
                ("{member}", i.to_string()),
                ("{index}", i.to_string()),
                ("{name}", member.clone()),
                ("{port}", port.to_string()),
                ("{primary_host}", primary_host.clone()),
            ]);
            let mut cmd = vec![command.clone()];
            if !own_port {
                cmd.extend(self.kind.member_args(&MemberPlan {
                    index: i,
                    port,
                    names: &names,
                    addresses: &addresses,
                    listen: "0.0.0.0",
                    data_dir: None,
                    target: self.name,
                }));
            }
            let mut binds = Vec::new();
            if let Some((root, layer)) = self.fault_disk {
                let args = self.kind.data_args(FAULT_DISK_DIR).ok_or_else(|| {
                    let kind = self.spec.kind.as_str();
                    (
                        anyhow!(
                            "{kind} members cannot say where their data goes: no disk faults on docker {kind} targets"
                        ),
                        None,
                    )
                })?;
                cmd.extend(args);
                let mountpoint = self.mount_disk(root, &member, layer).map_err(|e| (e, None))?;
                binds.push(format!("{}:{FAULT_DISK_DIR}", mountpoint.display()));
            }
            cmd.extend(spec.args.iter().map(|a| substitute(a, &vars)));
            let limits = Limits { env: &spec.env, memory: spec.memory, cpus: spec.cpus, tmpfs: &spec.tmpfs, binds };
            self.start_container(image, &network, member, None, i, cmd, &vars, limits, Some(port)).await?;
        }

        // Members: the spec's ready check, then the kind's own probe, then
        // (with replicas) every replica linked to member 0.
        let timeout = spec.ready.as_ref().and_then(|r| r.timeout).unwrap_or(spec.ready_timeout).0;
        let deadline = Instant::now() + timeout;
        let members: Vec<Member> = self.created.clone();
        let check = spec.ready.as_ref().map(|r| ready_check(r, &network));
        let waits = members.iter().map(|m| self.member_ready(m, &network, check.as_ref(), deadline, timeout));
        let servers = futures::future::join_all(waits).await;
        let mut server = None;
        for (m, s) in members.iter().zip(servers) {
            let s = s.map_err(|e| (e, Some(m.clone())))?;
            server.get_or_insert(s);
        }
        let server = server.expect("at least one member");
        if member_count > 1 {
            self.replication_ready(&members, &network, deadline, timeout).await.map_err(|e| (e, None))?;
        }

        let primary_ip = self
            .docker
            .ip_on(&members[0].container, &network.name)
            .await
            .and_then(|ip| ip.ok_or_else(|| anyhow!("member 0 has no address")))
            .map_err(|e| (e, Some(members[0].clone())))?;
        let mut companions: IndexMap<String, Vec<Member>> = IndexMap::new();
        for (group, c) in &spec.companions {
            let image = c.image.clone().unwrap_or_else(|| image.to_string());
            let command = c.command.clone().unwrap_or_else(|| self.driver.default_command().to_string());
            let first = self.created.len();
            for i in 0..c.count as usize {
                let cname = companion_name(self.name, group, i);
                let vars = HashMap::from([
                    ("{index}", i.to_string()),
                    ("{name}", cname.clone()),
                    ("{port}", port.to_string()),
                    ("{primary_host}", primary_host.clone()),
                    ("{primary_ip}", primary_ip.to_string()),
                    ("{quorum}", (c.count / 2 + 1).to_string()),
                    ("{count}", c.count.to_string()),
                ]);
                let mut cmd = vec![command.clone()];
                cmd.extend(c.args.iter().map(|a| substitute(a, &vars)));
                let limits = Limits { env: &c.env, memory: c.memory, cpus: c.cpus, tmpfs: &c.tmpfs, binds: Vec::new() };
                self.start_container(&image, &network, cname, Some(group), i, cmd, &vars, limits, c.port).await?;
            }
            companions.insert(group.clone(), self.created[first..].to_vec());
        }
        for (group, c) in &spec.companions {
            let timeout = c.ready.as_ref().and_then(|r| r.timeout).unwrap_or(spec.ready_timeout).0;
            let check = companion_check(c, &network);
            let waits = companions[group].iter().map(|m| async {
                self.docker.wait_ready(&m.container, &check, timeout).await.map_err(|e| (e, Some(m.clone())))
            });
            for r in futures::future::join_all(waits).await {
                r?;
            }
        }

        let topology = Topology::new(
            self.name.to_string(),
            self.docker.clone(),
            network,
            members,
            companions,
            Arc::clone(&self.kind),
            Arc::clone(&self.driver),
        );
        *topology.disks.lock().unwrap_or_else(|p| p.into_inner()) = std::mem::take(&mut self.disks);
        let uri = match &spec.discovery {
            None => self.group_uri(&topology).await?,
            Some(d) => self.discovery_ready(&topology, d).await?,
        };
        Ok((topology, server, uri))
    }

    /// Where clients connect: the whole group when the kind's driver
    /// discovers its members itself (a MongoDB replica set), else member 0.
    async fn group_uri(&self, topology: &Topology) -> Result<String, Failure> {
        let mut hosts = Vec::new();
        for m in &topology.members {
            let ip = topology.ip(m).await.map_err(|e| (e, Some(m.clone())))?;
            hosts.push(format!("{ip}:{}", m.port.expect("members have a port")));
        }
        match (topology.members.len() > 1).then(|| self.kind.group_uri(&hosts)).flatten() {
            Some(uri) => Ok(uri),
            None => topology.uri(&topology.members[0]).await.map_err(|e| (e, None)),
        }
    }

    /// The URI that finds the primary through the companion group named in
    /// `discovery`, once a probe through it answers (the Sentinels know the
    /// master and name an address the host reaches).
    async fn discovery_ready(&self, topology: &Topology, d: &DiscoverySpec) -> Result<String, Failure> {
        let group = &topology.companions[&d.sentinels];
        let mut addrs = Vec::new();
        for m in group {
            let ip = topology.ip(m).await.map_err(|e| (e, Some(m.clone())))?;
            addrs.push(format!("{ip}:{}", m.port.expect("validated: the discovery group has a port")));
        }
        let kind = self.spec.kind.as_str();
        let uri = self
            .kind
            .discovery_uri(&addrs, &d.master)
            .ok_or_else(|| (anyhow!("`discovery` is not available for {kind} targets"), None))?;
        let timeout = self.spec.ready_timeout.0;
        let deadline = Instant::now() + timeout;
        loop {
            let last = match tokio::time::timeout_at(deadline, self.driver.ready(&uri)).await {
                Ok(Ok(_)) => return Ok(uri),
                Ok(Err(e)) => format!("{e:#}"),
                Err(_) => "the probe did not finish".into(),
            };
            // Probe until the deadline itself, not a pause before it.
            let now = Instant::now();
            if now >= deadline {
                let e = anyhow!(
                    "the primary was not reachable through `{}` ({uri}) within {}; last probe error: {last}",
                    d.sentinels,
                    format_duration(timeout)
                );
                return Err((e, group.first().cloned()));
            }
            tokio::time::sleep_until((now + Duration::from_millis(200)).min(deadline)).await;
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn start_container(
        &mut self,
        image: &str,
        network: &Network,
        name: String,
        group: Option<&String>,
        index: usize,
        cmd: Vec<String>,
        vars: &HashMap<&str, String>,
        limits: Limits<'_>,
        port: Option<u16>,
    ) -> Result<(), Failure> {
        let mut labels = self.labels.to_map();
        labels.insert(MEMBER_LABEL.into(), name.clone());
        let spec = ContainerSpec {
            name: format!("fl-{}-{name}", self.labels.run),
            hostname: name.clone(),
            image: image.to_string(),
            cmd,
            env: limits.env.iter().map(|(k, v)| format!("{k}={}", substitute(v, vars))).collect(),
            labels,
            memory: limits.memory.map(|m| m.0),
            cpus: limits.cpus,
            tmpfs: limits.tmpfs.iter().map(|t| split_tmpfs(t)).collect(),
            binds: limits.binds,
            // For faults that cut links with the packet filter inside.
            cap_add: vec!["NET_ADMIN".into()],
            network: network.name.clone(),
            aliases: vec![name.clone()],
        };
        let container = self.docker.run(&spec).await.map_err(|e| (e, None))?;
        self.created.push(Member { name, group: group.cloned(), index, container, port });
        Ok(())
    }

    /// The spec's ready check (if any), then the kind's probe from the host.
    async fn member_ready(
        &self,
        m: &Member,
        network: &Network,
        check: Option<&ReadyCheck>,
        deadline: Instant,
        timeout: Duration,
    ) -> anyhow::Result<ServerInfo> {
        if let Some(check) = check {
            let left = deadline.saturating_duration_since(Instant::now());
            self.docker.wait_ready(&m.container, check, left).await?;
        }
        let port = m.port.expect("members have a port");
        let mut delay = Duration::from_millis(50);
        loop {
            let state = self.docker.state(&m.container).await?;
            if !state.running {
                bail!("container `{}` stopped before it was ready: {state}", m.name);
            }
            let last = match self.docker.ip_on(&m.container, &network.name).await? {
                None => format!("no address on network `{}`", network.name),
                Some(ip) => {
                    let uri = self.driver.uri(&ip.to_string(), port);
                    match tokio::time::timeout_at(deadline, self.driver.ready(&uri)).await {
                        Ok(Ok(info)) => return Ok(info),
                        Ok(Err(e)) => format!("{uri}: {e:#}"),
                        Err(_) => format!("{uri}: the probe did not finish"),
                    }
                }
            };
            let now = Instant::now();
            if now >= deadline {
                bail!("`{}` did not answer within {}; last probe error: {last}", m.name, format_duration(timeout));
            }
            tokio::time::sleep_until((now + delay).min(deadline)).await;
            delay = (delay * 2).min(Duration::from_millis(500));
        }
    }

    /// Waits until one member says it is primary and every other member says
    /// it is a replica with its link up: which one leads is the kind's
    /// (Redis makes member 0 the primary; etcd's members elect one).
    async fn replication_ready(
        &self,
        members: &[Member],
        network: &Network,
        deadline: Instant,
        timeout: Duration,
    ) -> anyhow::Result<()> {
        let mut group = Vec::new();
        for m in members {
            let ip = self.docker.ip_on(&m.container, &network.name).await?.context("no address")?;
            let port = m.port.unwrap_or(0);
            let uri = self.driver.uri(&ip.to_string(), port);
            group.push(FailoverMember { name: m.name.clone(), uri, host: ip.to_string(), port });
        }
        // Kinds whose members form the group by a command (MongoDB's
        // replSetInitiate) do so now that every member answers.
        self.kind.initiate(&group).await.with_context(|| format!("forming the group of `{}`", self.name))?;
        let uris: Vec<String> = group.iter().map(|m| m.uri.clone()).collect();
        loop {
            let roles = self.kind.roles(&uris, Duration::from_secs(2)).await;
            let primaries = roles.iter().filter(|r| matches!(r, Ok(Role::Primary))).count();
            let linked = roles.iter().filter(|r| matches!(r, Ok(Role::Replica { linked: true }))).count();
            let healthy = primaries == 1 && primaries + linked == roles.len();
            if healthy {
                return Ok(());
            }
            if Instant::now() + Duration::from_millis(100) >= deadline {
                let seen: Vec<String> = members
                    .iter()
                    .zip(&roles)
                    .map(|(m, r)| match r {
                        Ok(role) => format!("{}: {role}", m.name),
                        Err(e) => format!("{}: {e:#}", m.name),
                    })
                    .collect();
                bail!(
                    "replication did not come up within {} (one primary, the others linked replicas); roles: {}",
                    format_duration(timeout),
                    seen.join(", ")
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

struct Limits<'a> {
    env: &'a IndexMap<String, String>,
    memory: Option<Size>,
    cpus: Option<f64>,
    tmpfs: &'a [String],
    /// `HOST:CONTAINER` directories bound in.
    binds: Vec<String>,
}

fn ready_check(r: &ReadySpec, network: &Network) -> ReadyCheck {
    match (&r.command, r.port, &r.log) {
        (Some(c), _, _) => ReadyCheck::Command(c.argv()),
        (None, Some(p), _) => ReadyCheck::Port { network: network.name.clone(), port: p },
        (None, None, Some(l)) => ReadyCheck::Log(l.clone()),
        (None, None, None) => unreachable!("validated: exactly one of command, port, log"),
    }
}

/// A companion's own check; without one, its port answering, or else
/// simply that it keeps running.
fn companion_check(c: &CompanionSpec, network: &Network) -> ReadyCheck {
    match (&c.ready, c.port) {
        (Some(r), _) => ready_check(r, network),
        (None, Some(p)) => ReadyCheck::Port { network: network.name.clone(), port: p },
        (None, None) => ReadyCheck::Command(vec!["true".into()]),
    }
}

fn substitute(text: &str, vars: &HashMap<&str, String>) -> String {
    let mut out = text.to_string();
    for (k, v) in vars {
        out = out.replace(k, v);
    }
    out
}
