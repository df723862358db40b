//! Providers bring a target up and take it down: a local process, an
//! external server someone else runs, or containers (docker, whose provider
//! is `faultline_docker::provider`: docker.rs hands it its kind's members).
//! Each gives the engine a [`RunningTarget`] holding what it started as a
//! [`Started`]: the engine asks that for members, process groups,
//! containers and the provider's own faults, and stops it, without naming
//! the provider. A provider is its folder or file here: how it starts,
//! its `Started`, and its faults beside it (process/faults.rs; docker's in
//! faultline-docker).

mod docker;
mod external;
pub mod process;
pub mod process_group;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;

use crate::events::Events;
use crate::spec::{FaultSpec, ProviderKind, Spec, TargetSpec};
use faultline_kind::fault::Applied;
use faultline_kind::registry::Kinds;
use faultline_kind::topology::MemberSet;
use faultline_kind::{ServerInfo, TargetDriver};

/// A target that is up and answering.
pub struct RunningTarget {
    pub name: String,
    pub uri: String,
    pub server: ServerInfo,
    pub provider: ProviderKind,
    /// The port it listens on, where faultline knows it (process targets:
    /// member 0's).
    pub port: Option<u16>,
    /// What the provider started: stopped when the target is (also, by its
    /// guards, on drop).
    started: Box<dyn Started>,
    /// Its kind's driver, with the target's own options (for its faults).
    pub driver: Arc<dyn TargetDriver>,
    /// Its data runs on the fault filesystem, cached so.
    pub fault_filesystem: Option<faultline_model::faults::Caching>,
}

/// What a provider started, as the target holds it. Each provider answers
/// what it has; the defaults say it has none of it.
#[async_trait::async_trait]
pub trait Started: Send + Sync {
    /// Stops what was started, for good; says, naming the target, what
    /// could not be undone or had to be forced (a process group that
    /// needed SIGKILL).
    async fn stop(self: Box<Self>) -> Vec<String>;

    /// Applies one of the provider's own faults to the target `target`.
    async fn apply(&self, target: &str, fault: &FaultSpec, spec: &Spec) -> anyhow::Result<Applied>;

    /// The members, asked their roles and resolved by selectors; None for a
    /// target of one server.
    fn member_set(&self) -> Option<Arc<dyn MemberSet>> {
        None
    }

    /// The process faultline started (member 0's), while it runs: `{pid}`
    /// in probes, the leader of its process group.
    fn pid(&self) -> Option<i32> {
        None
    }

    /// Every running process group (one per member): what `isolation: stop`
    /// freezes.
    fn process_groups(&self) -> Vec<i32> {
        Vec::new()
    }

    /// Its containers' ids: whose CPU is the target's when the host is watched.
    fn container_ids(&self) -> Vec<String> {
        Vec::new()
    }

    /// The target's own working directory (`{target_dir}`), where it has one.
    fn work_dir(&self) -> Option<&Path> {
        None
    }

    /// The program it runs, as given, where faultline started one (the
    /// results record its checksum).
    fn program(&self) -> Option<&str> {
        None
    }
}

impl RunningTarget {
    /// Undoes what the kind set up on the server (a table it created), then
    /// stops what the provider started; external servers are left running.
    /// What could not be undone is a warning to `events`.
    pub async fn stop(self, events: &Events) {
        match tokio::time::timeout(Duration::from_secs(20), self.driver.clean_up(&self.uri)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => events.warn(&format!("target `{}`: {e:#}", self.name)),
            Err(_) => events.warn(&format!("target `{}`: cleaning up took longer than 20s", self.name)),
        }
        for e in self.started.stop().await {
            events.warn(&e);
        }
    }

    /// A target someone else brought up, as an agent reaches it: the
    /// coordinator's uri, with the target's own driver.
    pub fn reached(name: &str, uri: &str, driver: Arc<dyn TargetDriver>) -> RunningTarget {
        RunningTarget {
            name: name.to_string(),
            uri: uri.to_string(),
            server: ServerInfo { version: String::new() },
            provider: ProviderKind::External,
            port: None,
            started: Box::new(external::Reached),
            driver,
            fault_filesystem: None,
        }
    }

    /// What its provider started, asked for members, process groups,
    /// containers, `{pid}`, `{target_dir}` and the provider's own faults.
    pub fn provided(&self) -> &dyn Started {
        self.started.as_ref()
    }
}

/// Where a target keeps its files: its own working directory under the run
/// directory (process targets), and the run's log directory.
pub struct TargetDirs<'a> {
    pub work_dir: &'a Path,
    /// The target's data goes on the fault filesystem, mounted for its faults so.
    pub fault_disk: Option<faultline_faultfs::Layer>,
    pub run_dir: &'a Path,
    pub log_dir: &'a Path,
    /// Names its log file (`logs/NAME.log`), the instance for a matrix.
    pub log_name: &'a str,
}

pub async fn start(
    name: &str,
    spec: &TargetSpec,
    driver: Arc<dyn TargetDriver>,
    kinds: &Kinds,
    dirs: &TargetDirs<'_>,
) -> anyhow::Result<RunningTarget> {
    let mut target = match spec.provider {
        ProviderKind::Process => {
            let log_path = dirs.log_dir.join(format!("{}.log", dirs.log_name));
            let own = process::Dirs {
                work_dir: dirs.work_dir,
                fault_disk: dirs.fault_disk,
                run_dir: dirs.run_dir,
                log_path: &log_path,
            };
            // A kind whose members share a host starts `members` of them.
            let shared = kinds.members(&spec.kind).ok().filter(|k| k.shared_host().is_some());
            process::start(name, spec, driver, &own, shared).await?
        }
        // Validation refuses the fault filesystem under an external target.
        ProviderKind::External => return external::start(name, spec, driver).await,
        ProviderKind::Docker => docker::start(name, spec, driver, kinds, dirs).await?,
    };
    target.fault_filesystem = dirs.fault_disk.map(|layer| layer.caching);
    Ok(target)
}

/// Probes until the target answers or `timeout` passes; the error carries the
/// last probe failure so the user sees why, and how many probes ran and when
/// the last began and ended, so a late target is told from a wait that gave
/// up early (and a probe a busy machine made slow, from one begun early).
/// The pause between probes grows (20 ms to 500 ms) but shrinks again near
/// the deadline, so the last probe runs just before it rather than a whole
/// pause early.
pub(crate) async fn wait_ready(
    driver: &dyn TargetDriver,
    uri: &str,
    timeout: Duration,
    mut still_alive: impl FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<ServerInfo> {
    const FLOOR: Duration = Duration::from_millis(20);
    let began = tokio::time::Instant::now();
    let deadline = began + timeout;
    let mut delay = FLOOR;
    let mut last_error: Option<String> = None;
    let mut probes = 0u32;
    loop {
        still_alive()?;
        probes += 1;
        let last_probe = began.elapsed();
        match tokio::time::timeout_at(deadline, driver.ready(uri)).await {
            Ok(Ok(info)) => return Ok(info),
            Ok(Err(e)) if e.downcast_ref::<faultline_kind::Refused>().is_some() => {
                bail!("{uri} refused faultline: {e:#}")
            }
            Ok(Err(e)) => last_error = Some(format!("{e:#}")),
            // Cut short by the deadline: an earlier probe's answer says more.
            Err(_) => {
                last_error.get_or_insert_with(|| "the probe itself did not finish".to_string());
            }
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            bail!(
                "did not answer at {uri} within {} ({probes} probes, the last begun {:.2} s in, ended {:.2} s in); \
                 last probe error: {}",
                faultline_model::units::format_duration(timeout),
                last_probe.as_secs_f64(),
                (now - began).as_secs_f64(),
                last_error.unwrap_or_default()
            );
        }
        let pause = delay.min((deadline - now) / 2).max(FLOOR);
        tokio::time::sleep_until((now + pause).min(deadline)).await;
        delay = (delay * 2).min(Duration::from_millis(500));
    }
}
