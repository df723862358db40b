//! Removing what faultline created, found by its labels: at the end of a
//! target's life, from a drop guard when a run panics or abandons a start
//! half-way, and from `faultline teardown` after a crash.

use std::collections::HashMap;
use std::time::Duration;

use bollard::query_parameters::{
    ListContainersOptionsBuilder, ListNetworksOptionsBuilder, RemoveContainerOptionsBuilder,
};

use crate::client::{message_of, status_of, Docker, Labels, OWNER, OWNER_LABEL, PID_LABEL, RUN_LABEL, TARGET_LABEL};

/// What a teardown removed (by name) and what it could not.
#[derive(Debug, Clone, Default)]
pub struct Removed {
    /// Swarm services (a run's agents).
    pub services: Vec<String>,
    pub containers: Vec<String>,
    pub networks: Vec<String>,
    pub errors: Vec<String>,
}

impl Removed {
    fn absorb(&mut self, other: Removed) {
        self.services.extend(other.services);
        self.containers.extend(other.containers);
        self.networks.extend(other.networks);
        self.errors.extend(other.errors);
    }
}

/// A container or network that carries faultline's owner label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owned {
    pub kind: ResourceKind,
    pub id: String,
    pub name: String,
    pub run: String,
    pub target: String,
    /// The faultline process that created it.
    pub pid: Option<u32>,
    /// A container's state (`running`, `paused`, `exited`...); empty for a network.
    pub state: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ResourceKind {
    Service,
    Container,
    Network,
}

fn filters(labels: &[String]) -> HashMap<String, Vec<String>> {
    HashMap::from([("label".to_string(), labels.to_vec())])
}

impl Docker {
    /// Everything with faultline's owner label, or only one run's.
    pub async fn list_owned(&self, run: Option<&str>) -> anyhow::Result<Vec<Owned>> {
        let mut wanted = vec![format!("{OWNER_LABEL}={OWNER}")];
        if let Some(r) = run {
            wanted.push(format!("{RUN_LABEL}={r}"));
        }
        let f = filters(&wanted);
        let label_of = |labels: &Option<HashMap<String, String>>, key: &str| {
            labels.as_ref().and_then(|l| l.get(key)).cloned().unwrap_or_default()
        };
        let mut out = Vec::new();
        for (name, labels) in self.owned_services(&f).await? {
            let labels = Some(labels);
            out.push(Owned {
                kind: ResourceKind::Service,
                id: name.clone(),
                name,
                run: label_of(&labels, RUN_LABEL),
                target: label_of(&labels, TARGET_LABEL),
                pid: label_of(&labels, PID_LABEL).parse().ok(),
                state: String::new(),
            });
        }
        let containers = self
            .api
            .list_containers(Some(ListContainersOptionsBuilder::new().all(true).filters(&f).build()))
            .await
            .map_err(|e| anyhow::anyhow!("cannot list containers: {}", message_of(&e)))?;
        for c in containers {
            let name = c
                .names
                .as_ref()
                .and_then(|n| n.first())
                .map(|n| n.trim_start_matches('/').to_string())
                .unwrap_or_default();
            out.push(Owned {
                kind: ResourceKind::Container,
                id: c.id.clone().unwrap_or_default(),
                name,
                run: label_of(&c.labels, RUN_LABEL),
                target: label_of(&c.labels, TARGET_LABEL),
                pid: label_of(&c.labels, PID_LABEL).parse().ok(),
                state: c.state.map(|s| s.to_string()).unwrap_or_default(),
            });
        }
        let networks = self
            .api
            .list_networks(Some(ListNetworksOptionsBuilder::new().filters(&f).build()))
            .await
            .map_err(|e| anyhow::anyhow!("cannot list networks: {}", message_of(&e)))?;
        for n in networks {
            out.push(Owned {
                kind: ResourceKind::Network,
                id: n.id.clone().unwrap_or_default(),
                name: n.name.clone().unwrap_or_default(),
                run: label_of(&n.labels, RUN_LABEL),
                target: label_of(&n.labels, TARGET_LABEL),
                pid: label_of(&n.labels, PID_LABEL).parse().ok(),
                state: String::new(),
            });
        }
        Ok(out)
    }

    /// Removes swarm services first (so none starts a task again), then
    /// containers (forced, with their anonymous volumes), then networks. A
    /// network whose removal races a container being removed is tried again.
    pub async fn remove_owned(&self, items: &[Owned]) -> Removed {
        let mut removed = Removed::default();
        for s in items.iter().filter(|i| i.kind == ResourceKind::Service) {
            match self.remove_service(&s.name).await {
                Ok(()) => removed.services.push(s.name.clone()),
                Err(e) => removed.errors.push(format!("{e:#}")),
            }
        }
        let containers = items.iter().filter(|i| i.kind == ResourceKind::Container);
        let results = futures::future::join_all(containers.map(|c| async move {
            let options = RemoveContainerOptionsBuilder::new().force(true).v(true).build();
            for attempt in 0..20 {
                match self.api.remove_container(&c.id, Some(options.clone())).await {
                    Ok(()) => return Ok(Some(c.name.clone())),
                    // Listed a moment ago and gone now (a swarm service's
                    // task, removed with its service): gone is what was asked.
                    Err(e) if status_of(&e) == Some(404) => return Ok(Some(c.name.clone())),
                    // "removal already in progress": wait for the other removal.
                    Err(e) if status_of(&e) == Some(409) && attempt < 19 => {
                        tokio::time::sleep(Duration::from_millis(100)).await
                    }
                    Err(e) => return Err(format!("container {}: {}", c.name, message_of(&e))),
                }
            }
            Ok(None)
        }))
        .await;
        for r in results {
            match r {
                Ok(Some(name)) => removed.containers.push(name),
                Ok(None) => {}
                Err(e) => removed.errors.push(e),
            }
        }
        for n in items.iter().filter(|i| i.kind == ResourceKind::Network) {
            let mut last = None;
            for _ in 0..25 {
                match self.api.remove_network(&n.id).await {
                    Ok(()) => {
                        removed.networks.push(n.name.clone());
                        last = None;
                        break;
                    }
                    Err(e) if status_of(&e) == Some(404) => {
                        last = None;
                        break;
                    }
                    Err(e) => {
                        last = Some(format!("network {}: {}", n.name, message_of(&e)));
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
            }
            removed.errors.extend(last);
        }
        removed
    }

    /// Removes everything `labels` mark. A second look a moment later
    /// catches a container whose creation was still in flight.
    pub async fn remove_labeled(&self, labels: &Labels) -> Removed {
        let mut removed = Removed::default();
        for pass in 0..2 {
            if pass > 0 {
                tokio::time::sleep(Duration::from_millis(150)).await;
            }
            match self.list_labeled(labels).await {
                Ok(items) if items.is_empty() && pass > 0 => break,
                Ok(items) => removed.absorb(self.remove_owned(&items).await),
                Err(e) => removed.errors.push(format!("{e:#}")),
            }
        }
        removed
    }

    async fn list_labeled(&self, labels: &Labels) -> anyhow::Result<Vec<Owned>> {
        let mut items = self.list_owned(Some(&labels.run)).await?;
        if let Some(t) = &labels.target {
            items.retain(|i| &i.target == t);
        }
        Ok(items)
    }
}

/// [`Docker::remove_labeled`] from synchronous code, also from inside an
/// async runtime (a drop during a panic): on a thread of its own with a
/// small runtime of its own.
pub fn remove_labeled_blocking(labels: &Labels) -> Removed {
    let labels = labels.clone();
    let worker = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
        let runtime = match runtime {
            Ok(r) => r,
            Err(e) => return Removed { errors: vec![format!("cannot start a runtime: {e}")], ..Default::default() },
        };
        runtime.block_on(async {
            match Docker::connect().await {
                Ok(d) => d.remove_labeled(&labels).await,
                Err(e) => Removed { errors: vec![format!("{e:#}")], ..Default::default() },
            }
        })
    });
    worker
        .join()
        .unwrap_or_else(|_| Removed { errors: vec!["the teardown thread panicked".into()], ..Default::default() })
}

/// Removes what `labels` mark when dropped, unless disarmed first: the
/// safety net for a panic, or a start abandoned half-way (Ctrl-C while a
/// target comes up drops the future that was starting it).
pub struct TeardownGuard {
    labels: Labels,
    armed: bool,
}

impl TeardownGuard {
    pub fn new(labels: Labels) -> TeardownGuard {
        TeardownGuard { labels, armed: true }
    }

    /// The orderly teardown has run; nothing left to do on drop.
    pub fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for TeardownGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let removed = remove_labeled_blocking(&self.labels);
        for e in &removed.errors {
            eprintln!("error: teardown of run {}: {e}", self.labels.run);
        }
    }
}
