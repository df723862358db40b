//! A server someone else runs: faultline only checks it answers.

use std::sync::{Arc, Mutex};

use anyhow::Context;

use super::{wait_ready, RunningTarget};
use crate::spec::{ProviderKind, TargetSpec};
use crate::target::TargetDriver;

/// The URIs of this run's external targets: what a kind creates on them
/// outlives the run unless removed, so it goes in the run ledger; a server
/// faultline starts takes what is on it with its data directory or
/// container.
static EXTERNAL: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Whether `uri` is one of this run's external targets.
pub fn is_external(uri: &str) -> bool {
    EXTERNAL.lock().unwrap_or_else(|e| e.into_inner()).iter().any(|u| u == uri)
}

pub async fn start(name: &str, spec: &TargetSpec, driver: Arc<dyn TargetDriver>) -> anyhow::Result<RunningTarget> {
    let uri = spec.uri.clone().context("external targets need `uri`")?;
    {
        let mut external = EXTERNAL.lock().unwrap_or_else(|e| e.into_inner());
        if !external.contains(&uri) {
            external.push(uri.clone());
        }
    }
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
        process: None,
        docker: None,
        driver,
    })
}
