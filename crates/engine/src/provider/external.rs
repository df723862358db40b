//! A server someone else runs: faultline only checks it answers.

use std::sync::Arc;

use anyhow::Context;

use super::{wait_ready, RunningTarget, Started};
use crate::spec::{FaultSpec, ProviderKind, Spec, TargetSpec};
use faultline_kind::fault::Applied;
use faultline_kind::TargetDriver;

pub async fn start(name: &str, spec: &TargetSpec, driver: Arc<dyn TargetDriver>) -> anyhow::Result<RunningTarget> {
    let uri = spec.uri.clone().context("external targets need `uri`")?;
    faultline_kind::ledger::note_external(&uri);
    let server = wait_ready(driver.as_ref(), &uri, spec.ready_timeout.0, || Ok(()))
        .await
        .with_context(|| format!("target `{name}` (external)"))?;
    // Where probes find it (`{port}`): the last `:NUMBER` of the uri.
    let port = uri.rsplit(':').next().and_then(|p| p.trim_end_matches('/').parse().ok());
    Ok(RunningTarget {
        name: name.to_string(),
        uri,
        server,
        provider: ProviderKind::External,
        port,
        started: Box::new(Reached),
        driver,
        fault_filesystem: None,
    })
}

/// A server faultline reached but did not start: nothing to stop, nothing
/// of faultline's to fault.
pub(super) struct Reached;

#[async_trait::async_trait]
impl Started for Reached {
    async fn stop(self: Box<Self>) -> Vec<String> {
        Vec::new()
    }

    async fn apply(&self, target: &str, _: &FaultSpec, _: &Spec) -> anyhow::Result<Applied> {
        anyhow::bail!("target `{target}` is external: faultline cannot inject faults into it")
    }
}
