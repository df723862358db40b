//! Containers, as the engine holds them: faultline-docker starts a kind's
//! members (and companions) and applies the container faults; here it is
//! handed the kind's topology and answers as a [`Started`].

use std::sync::Arc;

use super::{RunningTarget, Started, TargetDirs};
use crate::spec::{FaultSpec, ProviderKind, Spec, TargetSpec};
use faultline_docker::provider::DockerTarget;
use faultline_kind::fault::Applied;
use faultline_kind::registry::Kinds;
use faultline_kind::topology::MemberSet;
use faultline_kind::TargetDriver;

pub async fn start(
    name: &str,
    spec: &TargetSpec,
    driver: Arc<dyn TargetDriver>,
    kinds: &Kinds,
    dirs: &TargetDirs<'_>,
) -> anyhow::Result<RunningTarget> {
    let members = kinds.members(&spec.kind).map_err(|e| anyhow::anyhow!("target `{name}`: {e}"))?;
    let fault_disk = dirs.fault_disk.map(|layer| (dirs.work_dir, layer));
    let started =
        faultline_docker::provider::start(name, spec, Arc::clone(&driver), members, dirs.log_dir, fault_disk).await?;
    Ok(RunningTarget {
        name: name.to_string(),
        uri: started.uri,
        server: started.server,
        provider: ProviderKind::Docker,
        port: None,
        started: Box::new(Containers(started.target)),
        driver,
        fault_filesystem: None,
    })
}

/// A docker target's containers (removed when the target stops; on drop,
/// by their teardown guard).
struct Containers(DockerTarget);

#[async_trait::async_trait]
impl Started for Containers {
    async fn stop(self: Box<Self>) -> Vec<String> {
        self.0.stop().await
    }

    async fn apply(&self, _target: &str, fault: &FaultSpec, spec: &Spec) -> anyhow::Result<Applied> {
        faultline_docker::fault::apply(&self.0.topology, fault, spec).await
    }

    fn member_set(&self) -> Option<Arc<dyn MemberSet>> {
        Some(Arc::clone(&self.0.topology) as Arc<dyn MemberSet>)
    }

    fn container_ids(&self) -> Vec<String> {
        self.0.topology.all().map(|m| m.container.id.clone()).collect()
    }
}
