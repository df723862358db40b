//! Providers bring a target up and take it down: a local process, an
//! external server someone else runs, or containers (docker).

pub mod docker;
mod external;
mod process;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;

use crate::spec::{ProviderKind, TargetSpec};
use crate::target::{ServerInfo, TargetDriver};

/// A target that is up and answering.
pub struct RunningTarget {
    pub name: String,
    pub uri: String,
    pub server: ServerInfo,
    pub provider: ProviderKind,
    /// Kept so the process is stopped when the target is (also on drop).
    process: Option<process::ManagedProcess>,
    /// Docker targets: the containers (removed when the target stops, also
    /// on drop).
    docker: Option<docker::DockerTarget>,
}

impl RunningTarget {
    /// Stops what the provider started; external targets are left alone.
    pub async fn stop(mut self) {
        if let Some(p) = self.process.take() {
            p.stop().await;
        }
        if let Some(d) = self.docker.take() {
            d.stop().await;
        }
    }

    /// The members and companions of a docker target, with their roles on
    /// request; None for other providers.
    #[allow(dead_code)] // for the fault scheduler
    /// The server process of a `process` target.
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().and_then(|p| p.pid())
    }

    pub fn topology(&self) -> Option<&std::sync::Arc<crate::topology::Topology>> {
        self.docker.as_ref().map(|d| &d.topology)
    }
}

pub async fn start(
    name: &str,
    spec: &TargetSpec,
    driver: Arc<dyn TargetDriver>,
    log_dir: &Path,
) -> anyhow::Result<RunningTarget> {
    match spec.provider {
        ProviderKind::Process => process::start(name, spec, driver, log_dir).await,
        ProviderKind::External => external::start(name, spec, driver).await,
        ProviderKind::Docker => docker::start(name, spec, driver, log_dir).await,
    }
}

/// Probes until the target answers or `timeout` passes; the error carries the
/// last probe failure so the user sees why.
pub(crate) async fn wait_ready(
    driver: &dyn TargetDriver,
    uri: &str,
    timeout: Duration,
    mut still_alive: impl FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<ServerInfo> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut delay = Duration::from_millis(20);
    loop {
        still_alive()?;
        let last_error = match tokio::time::timeout_at(deadline, driver.probe(uri)).await {
            Ok(Ok(info)) => return Ok(info),
            Ok(Err(e)) => format!("{e:#}"),
            Err(_) => "the probe itself did not finish".to_string(),
        };
        if tokio::time::Instant::now() + delay >= deadline {
            bail!(
                "did not answer at {uri} within {}; last probe error: {last_error}",
                crate::spec::units::format_duration(timeout)
            );
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_millis(500));
    }
}
