//! The docker provider's faults: one typed action per fault, each built of
//! the Docker layer's confirmed operations (ops.rs) on the containers its
//! selector picks when it fires, registered in [`FAULTS`]. What undoes one
//! is an [`OnEach`] of the undoing operation on the same containers. A new
//! container fault is its struct, its `Apply<Containers>` and one line in
//! [`FAULTS`]; an operation that confirms a new effect goes in ops.rs.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::members::{Member, Topology};
use crate::ops::Confirmed;
use faultline_faultfs::actions::{DiskError, DiskFull, DiskWindow, PowerLoss, SlowDisk};
use faultline_faultfs::Faults;
use faultline_kind::fault::{Applied, Apply, Fault, Healed, Undo};
use faultline_model::faults::Restart as RestartKind;
use faultline_spec::docker::DiscoverySpec;
use faultline_spec::fault::Site;
use faultline_spec::selector::Selector;
use faultline_spec::{Action, FaultSpec, FaultType, Registered, Spec};

/// Grace period for `stop` and `restart`.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// Limit for an `exec` fault's command.
const EXEC_TIMEOUT: Duration = Duration::from_secs(30);

/// Every container fault, in the order errors list them.
pub static FAULTS: &[&dyn Fault<Containers>] = &[
    &Registered::<Kill>::NEW,
    &Registered::<Stop>::NEW,
    &Registered::<Start>::NEW,
    &Registered::<Restart>::NEW,
    &Registered::<Pause>::NEW,
    &Registered::<Unpause>::NEW,
    &Registered::<Disconnect>::NEW,
    &Registered::<Reconnect>::NEW,
    &Registered::<Isolate>::NEW,
    &Registered::<Rejoin>::NEW,
    &Registered::<Exec>::NEW,
    &Registered::<Failover>::NEW,
    &Registered::<PowerLoss>::NEW,
    &Registered::<DiskFull>::NEW,
    &Registered::<DiskError>::NEW,
    &Registered::<SlowDisk>::NEW,
];

/// The container faults as validation sees them.
pub fn declared() -> Vec<&'static dyn FaultType> {
    faultline_kind::fault::declared(FAULTS)
}

/// Applies `fault` to the members of `topology` its selector picks now.
pub async fn apply(topology: &Arc<Topology>, fault: &FaultSpec, spec: &Spec) -> anyhow::Result<Applied> {
    let selection = faultline_spec::selector::parse_selector(&fault.target, spec).map_err(anyhow::Error::msg)?;
    let on = Containers {
        topology: Arc::clone(topology),
        written: fault.target.clone(),
        selector: selection.selector,
        pick: faultline_spec::selector::pick(spec.seed, &fault.name),
        discovery: spec.targets.get(&topology.target).and_then(|t| t.discovery.clone()),
    };
    faultline_kind::fault::apply(FAULTS, "docker", &fault.action, &fault.fields, &on).await
}

/// What a container fault reaches its target by.
pub struct Containers {
    pub topology: Arc<Topology>,
    /// The selector as the spec wrote it (`kv.primary`), for errors.
    pub written: String,
    pub selector: Selector,
    /// Which member `kv.any` picks.
    pub pick: u64,
    /// The target's Sentinels, for `failover`.
    pub discovery: Option<DiscoverySpec>,
}

impl Containers {
    /// The members the selector picks now (at least one).
    async fn members(&self) -> anyhow::Result<Vec<Member>> {
        let members = self
            .topology
            .resolve(&self.selector, self.pick)
            .await
            .with_context(|| format!("resolving `{}`", self.written))?;
        anyhow::ensure!(!members.is_empty(), "`{}` selects no container now", self.written);
        Ok(members)
    }

    /// `op` on each selected member, undone (if at all) by `undo` on the
    /// same ones. When `op` fails on one, the members it was done to are
    /// undone at once: a failed fault leaves nothing in force.
    async fn each(&self, op: Op, undo: Option<(Op, Option<RestartKind>)>) -> anyhow::Result<Applied> {
        let members = self.members().await?;
        let mut evidence = Vec::new();
        for (i, m) in members.iter().enumerate() {
            match op(&self.topology, m).await {
                Ok(done) => evidence.push(format!("{}: {}", m.name, done.evidence)),
                Err(e) => {
                    let Some((reverse, _)) = undo else { return Err(e) };
                    let undone = on_each(&self.topology, &members[..i], reverse).await;
                    let undone = undone.unwrap_or_else(|u| format!("undoing the others failed too: {u:#}"));
                    return Err(e.context(format!("on `{}` (undone where done: {undone})", m.name)));
                }
            }
        }
        self.applied(members, evidence.join("; "), undo)
    }

    fn applied(
        &self,
        members: Vec<Member>,
        evidence: String,
        undo: Option<(Op, Option<RestartKind>)>,
    ) -> anyhow::Result<Applied> {
        let hit = members.iter().map(|m| m.name.clone()).collect();
        Ok(match undo {
            Some((op, restart)) => {
                Applied::undone_by(hit, evidence, OnEach { topology: Arc::clone(&self.topology), members, op, restart })
            }
            None => Applied::done(hit, evidence),
        })
    }
}

/// A confirmed operation on one member's container.
type Op = for<'a> fn(&'a Topology, &'a Member) -> BoxFuture<'a, anyhow::Result<Confirmed>>;

/// `name: evidence` of `op` on each of `members`, in turn.
async fn on_each(topology: &Topology, members: &[Member], op: Op) -> anyhow::Result<String> {
    let mut evidence = Vec::new();
    for m in members {
        evidence.push(format!("{}: {}", m.name, op(topology, m).await?.evidence));
    }
    Ok(evidence.join("; "))
}

/// Undoes a container fault: the undoing operation on the members it hit
/// (each does nothing when there is nothing to undo).
struct OnEach {
    topology: Arc<Topology>,
    members: Vec<Member>,
    op: Op,
    /// Starting them again brings their servers back on their own data.
    restart: Option<RestartKind>,
}

#[async_trait::async_trait]
impl Undo for OnEach {
    async fn heal(&self) -> anyhow::Result<Healed> {
        let evidence = on_each(&self.topology, &self.members, self.op).await?;
        Ok(Healed { evidence, restart: self.restart })
    }
}

fn start<'a>(t: &'a Topology, m: &'a Member) -> BoxFuture<'a, anyhow::Result<Confirmed>> {
    Box::pin(t.docker.start(&m.container))
}
fn stop<'a>(t: &'a Topology, m: &'a Member) -> BoxFuture<'a, anyhow::Result<Confirmed>> {
    Box::pin(t.docker.stop(&m.container, STOP_GRACE))
}
fn restart<'a>(t: &'a Topology, m: &'a Member) -> BoxFuture<'a, anyhow::Result<Confirmed>> {
    Box::pin(t.docker.restart(&m.container, STOP_GRACE))
}
fn pause<'a>(t: &'a Topology, m: &'a Member) -> BoxFuture<'a, anyhow::Result<Confirmed>> {
    Box::pin(t.docker.pause(&m.container))
}
fn unpause<'a>(t: &'a Topology, m: &'a Member) -> BoxFuture<'a, anyhow::Result<Confirmed>> {
    Box::pin(t.docker.unpause(&m.container))
}
fn disconnect<'a>(t: &'a Topology, m: &'a Member) -> BoxFuture<'a, anyhow::Result<Confirmed>> {
    Box::pin(t.docker.disconnect(&m.container, &t.network))
}
fn reconnect<'a>(t: &'a Topology, m: &'a Member) -> BoxFuture<'a, anyhow::Result<Confirmed>> {
    Box::pin(t.docker.reconnect(&m.container, &t.network, std::slice::from_ref(&m.name)))
}
fn isolate<'a>(t: &'a Topology, m: &'a Member) -> BoxFuture<'a, anyhow::Result<Confirmed>> {
    Box::pin(t.docker.isolate(&m.container, &t.network))
}
fn rejoin<'a>(t: &'a Topology, m: &'a Member) -> BoxFuture<'a, anyhow::Result<Confirmed>> {
    Box::pin(t.docker.rejoin(&m.container))
}

/// Send a signal to each selected container's main process, confirmed by
/// the container stopping; healed by starting it again on its own data.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Kill {
    /// The signal (default SIGKILL), e.g. SIGTERM.
    signal: Option<String>,
}

impl Action for Kill {
    const NAME: &'static str = "kill";
    const HEALS: bool = true;
}

#[async_trait::async_trait]
impl Apply<Containers> for Kill {
    async fn apply(&self, on: &Containers) -> anyhow::Result<Applied> {
        let signal = self.signal.as_deref().unwrap_or("SIGKILL");
        let members = on.members().await?;
        let mut evidence = Vec::new();
        for m in &members {
            evidence.push(format!("{}: {}", m.name, on.topology.docker.kill(&m.container, signal).await?.evidence));
        }
        let restart = RestartKind::by_signal(self.signal.as_deref());
        on.applied(members, evidence.join("; "), Some((start, Some(restart))))
    }
}

/// Stop each selected container (SIGTERM, SIGKILL after a 5 s grace);
/// healed by starting it again.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Stop {}

impl Action for Stop {
    const NAME: &'static str = "stop";
    const HEALS: bool = true;
}

#[async_trait::async_trait]
impl Apply<Containers> for Stop {
    async fn apply(&self, on: &Containers) -> anyhow::Result<Applied> {
        on.each(stop, Some((start, None))).await
    }
}

/// Start each selected container.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Start {}

impl Action for Start {
    const NAME: &'static str = "start";
}

#[async_trait::async_trait]
impl Apply<Containers> for Start {
    async fn apply(&self, on: &Containers) -> anyhow::Result<Applied> {
        on.each(start, None).await
    }
}

/// Restart each selected container: a stop with a 5 s grace and a start,
/// confirmed by the kind's readiness probe.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Restart {
    /// Refused: a docker restart always stops with SIGTERM and a grace
    /// period (it is here to say so).
    signal: Option<String>,
}

impl Action for Restart {
    const NAME: &'static str = "restart";
    fn restarts(&self) -> Option<RestartKind> {
        Some(RestartKind::Clean)
    }
    fn check(&self, _: &Site) -> Result<(), (&'static str, String)> {
        match self.signal {
            Some(_) => Err((
                "signal",
                "a docker restart stops the container with SIGTERM and a grace period: drop `signal`, or use kill with heal_after"
                    .into(),
            )),
            None => Ok(()),
        }
    }
}

#[async_trait::async_trait]
impl Apply<Containers> for Restart {
    async fn apply(&self, on: &Containers) -> anyhow::Result<Applied> {
        on.each(restart, None).await
    }
}

/// Freeze each selected container's processes (the cgroup freezer); healed
/// by unpausing.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Pause {}

impl Action for Pause {
    const NAME: &'static str = "pause";
    const HEALS: bool = true;
}

#[async_trait::async_trait]
impl Apply<Containers> for Pause {
    async fn apply(&self, on: &Containers) -> anyhow::Result<Applied> {
        on.each(pause, Some((unpause, None))).await
    }
}

/// Unpause each selected container.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Unpause {}

impl Action for Unpause {
    const NAME: &'static str = "unpause";
}

#[async_trait::async_trait]
impl Apply<Containers> for Unpause {
    async fn apply(&self, on: &Containers) -> anyhow::Result<Applied> {
        on.each(unpause, None).await
    }
}

/// Take each selected container off the campaign network (clients and
/// peers lose it); healed by reconnecting it under its own name.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Disconnect {}

impl Action for Disconnect {
    const NAME: &'static str = "disconnect";
    const HEALS: bool = true;
}

#[async_trait::async_trait]
impl Apply<Containers> for Disconnect {
    async fn apply(&self, on: &Containers) -> anyhow::Result<Applied> {
        on.each(disconnect, Some((reconnect, None))).await
    }
}

/// Put each selected container back on the campaign network.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Reconnect {}

impl Action for Reconnect {
    const NAME: &'static str = "reconnect";
}

#[async_trait::async_trait]
impl Apply<Containers> for Reconnect {
    async fn apply(&self, on: &Containers) -> anyhow::Result<Applied> {
        on.each(reconnect, None).await
    }
}

/// Cut each selected member off from its peers while clients still reach
/// it; healed by rejoining.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Isolate {}

impl Action for Isolate {
    const NAME: &'static str = "isolate";
    const HEALS: bool = true;
}

#[async_trait::async_trait]
impl Apply<Containers> for Isolate {
    async fn apply(&self, on: &Containers) -> anyhow::Result<Applied> {
        on.each(isolate, Some((rejoin, None))).await
    }
}

/// Let each selected member reach its peers again.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Rejoin {}

impl Action for Rejoin {
    const NAME: &'static str = "rejoin";
}

#[async_trait::async_trait]
impl Apply<Containers> for Rejoin {
    async fn apply(&self, on: &Containers) -> anyhow::Result<Applied> {
        on.each(rejoin, None).await
    }
}

/// Run a command in each selected container; its output is recorded.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Exec {
    /// The command and its arguments, e.g. `[redis-cli, info]`.
    #[serde(default)]
    command: Vec<String>,
}

impl Action for Exec {
    const NAME: &'static str = "exec";
    fn check(&self, _: &Site) -> Result<(), (&'static str, String)> {
        match self.command.is_empty() {
            true => Err(("", "action: exec needs `command`, e.g. [redis-cli, info]".into())),
            false => Ok(()),
        }
    }
}

#[async_trait::async_trait]
impl Apply<Containers> for Exec {
    async fn apply(&self, on: &Containers) -> anyhow::Result<Applied> {
        let members = on.members().await?;
        let (mut evidence, mut output) = (Vec::new(), String::new());
        for m in &members {
            let out = on.topology.docker.exec_ok(&m.container, &self.command, EXEC_TIMEOUT).await?;
            output.push_str(out.combined().trim());
            evidence.push(format!("{}: exit code {}", m.name, out.exit_code));
        }
        let mut applied = on.applied(members, evidence.join("; "), None)?;
        applied.output = output;
        Ok(applied)
    }
}

/// Switch the primary through the target's Sentinels.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Failover {
    /// Stop writes on the primary and let every replica catch up before
    /// switching, and demote the old primary the moment the new one is
    /// promoted, so nothing acknowledged is lost (default: a plain
    /// `SENTINEL FAILOVER`).
    #[serde(default)]
    coordinated: bool,
}

impl Action for Failover {
    const NAME: &'static str = "failover";
    fn check(&self, site: &Site) -> Result<(), (&'static str, String)> {
        let target = site.target_name;
        if site.selector != Some(&Selector::Primary) {
            return Err(("target", format!("a failover switches away from the primary: name it, `{target}.primary`")));
        }
        if site.target.discovery.is_none() {
            return Err(("target", format!("`{target}` has no `discovery`: a failover goes through its Sentinels")));
        }
        Ok(())
    }
}

/// The whole group switches, through its Sentinels.
#[async_trait::async_trait]
impl Apply<Containers> for Failover {
    async fn apply(&self, on: &Containers) -> anyhow::Result<Applied> {
        let topology = &on.topology;
        let discovery = on.discovery.as_ref().with_context(|| {
            format!("`{}` has no `discovery`: a failover goes through the Sentinels", topology.target)
        })?;
        let (old, evidence) = topology.failover(&discovery.sentinels, &discovery.master, self.coordinated).await?;
        Ok(Applied::done(vec![old.name], evidence))
    }
}

/// `change` to the disk faults under each of `members`; what each disk does now.
fn change_disks(topology: &Topology, members: &[Member], change: impl Fn(&mut Faults)) -> anyhow::Result<String> {
    let disks = topology.disks.lock().unwrap_or_else(|p| p.into_inner());
    let mut evidence = Vec::new();
    for m in members {
        let Some(disk) = disks.get(&m.name) else {
            anyhow::bail!("`{}` does not run on the fault filesystem (disk faults are for members)", m.name)
        };
        evidence.push(format!("{}: {}", m.name, disk.change(&change)));
    }
    Ok(evidence.join("; "))
}

/// The power goes out under each selected member: its container is killed
/// (SIGKILL), what its disk had not made durable is thrown away, and it is
/// started again on what is left.
#[async_trait::async_trait]
impl Apply<Containers> for PowerLoss {
    async fn apply(&self, on: &Containers) -> anyhow::Result<Applied> {
        let members = on.members().await?;
        // Known before any is killed: a power loss that cannot undo
        // anything must not leave a member down.
        change_disks(&on.topology, &members, |_| {})?;
        let d = &on.topology.docker;
        let mut evidence = Vec::new();
        for m in &members {
            let killed = d.kill(&m.container, "SIGKILL").await?.evidence;
            let lost = {
                let mut disks = on.topology.disks.lock().unwrap_or_else(|p| p.into_inner());
                let disk = disks
                    .get_mut(&m.name)
                    .with_context(|| format!("`{}` does not run on the fault filesystem", m.name))?;
                disk.power_loss(self.torn_seed(), self.names)
                    .with_context(|| format!("`{}`: after the power loss, mounting its disk again", m.name))?
            };
            anyhow::ensure!(lost.failed.is_empty(), "`{}`: the power loss could not undo every file: {lost}", m.name);
            let started = d.start(&m.container).await?.evidence;
            evidence.push(format!("{}: {killed}; {lost}; {started}", m.name));
        }
        on.applied(members, evidence.join("; "), None)
    }
}

/// A disk fault on each selected member, in force until its undo.
fn disk_window(fault: &impl DiskWindow, members: Vec<Member>, on: &Containers) -> anyhow::Result<Applied> {
    let evidence = change_disks(&on.topology, &members, |f| fault.set(f))?;
    let hit = members.iter().map(|m| format!("{} (its disk)", m.name)).collect();
    let undo = DiskHeals { topology: Arc::clone(&on.topology), members, heal: fault.healer() };
    Ok(Applied::undone_by(hit, evidence, undo))
}

/// Puts back the disks a disk fault changed.
struct DiskHeals {
    topology: Arc<Topology>,
    members: Vec<Member>,
    heal: fn(&mut Faults),
}

#[async_trait::async_trait]
impl Undo for DiskHeals {
    async fn heal(&self) -> anyhow::Result<Healed> {
        Ok(change_disks(&self.topology, &self.members, self.heal)?.into())
    }
}

#[async_trait::async_trait]
impl Apply<Containers> for DiskFull {
    async fn apply(&self, on: &Containers) -> anyhow::Result<Applied> {
        disk_window(self, on.members().await?, on)
    }
}

#[async_trait::async_trait]
impl Apply<Containers> for DiskError {
    async fn apply(&self, on: &Containers) -> anyhow::Result<Applied> {
        disk_window(self, on.members().await?, on)
    }
}

#[async_trait::async_trait]
impl Apply<Containers> for SlowDisk {
    async fn apply(&self, on: &Containers) -> anyhow::Result<Applied> {
        disk_window(self, on.members().await?, on)
    }
}
