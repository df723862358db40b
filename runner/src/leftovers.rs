//! At the start of `faultline run`: warns about containers and networks that
//! earlier runs left behind when their faultline was killed (SIGKILL leaves
//! them, possibly paused or cut off from their peers), so nobody benchmarks
//! next to them unknowingly. Only a warning: they may be kept on purpose,
//! for debugging; `faultline teardown` removes them.

use std::collections::BTreeMap;
use std::time::Duration;

use faultline_docker::{Docker, Owned, ResourceKind};
use faultline_kind::ledger::faultline_alive;

/// How long the check may take; an engine that does not answer by then is
/// skipped quietly (as is a machine without one).
const LIMIT: Duration = Duration::from_secs(2);

/// One warning line per abandoned run, or none.
pub async fn warnings() -> Vec<String> {
    let listed = tokio::time::timeout(LIMIT, async {
        let docker = Docker::connect().await.ok()?;
        docker.list_owned(None).await.ok()
    })
    .await;
    let Ok(Some(owned)) = listed else { return Vec::new() };
    abandoned(owned).into_iter().map(|(run, items)| describe(&run, &items)).collect()
}

/// The resources of runs whose faultline is no longer running, by run.
fn abandoned(owned: Vec<Owned>) -> BTreeMap<String, Vec<Owned>> {
    let mut runs: BTreeMap<String, Vec<Owned>> = BTreeMap::new();
    for o in owned {
        runs.entry(o.run.clone()).or_default().push(o);
    }
    runs.retain(|_, items| !items.iter().filter_map(|i| i.pid).any(faultline_alive));
    runs
}

fn describe(run: &str, items: &[Owned]) -> String {
    let mut containers: Vec<String> = items
        .iter()
        .filter(|i| i.kind == ResourceKind::Container)
        .map(|c| if c.state.is_empty() { c.name.clone() } else { format!("{} ({})", c.name, c.state) })
        .collect();
    containers.sort();
    let networks = items.iter().filter(|i| i.kind == ResourceKind::Network).count();
    let services = items.iter().filter(|i| i.kind == ResourceKind::Service).count();
    let mut left = Vec::new();
    if services > 0 {
        left.push(format!("{services} swarm service{} of agents", if services == 1 { "" } else { "s" }));
    }
    if !containers.is_empty() {
        left.push(format!(
            "{} container{}: {}",
            containers.len(),
            if containers.len() == 1 { "" } else { "s" },
            containers.join(", ")
        ));
    }
    if networks > 0 {
        left.push(format!("{networks} network{}", if networks == 1 { "" } else { "s" }));
    }
    format!(
        "warning: run {run} was killed and left {} behind (paused or isolated ones may disturb this run); \
         `faultline teardown --run {run}` removes them, `faultline teardown` every abandoned run's",
        left.join(" and ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owned(kind: ResourceKind, name: &str, run: &str, pid: u32, state: &str) -> Owned {
        Owned {
            kind,
            id: name.into(),
            name: name.into(),
            run: run.into(),
            target: "kv".into(),
            pid: Some(pid),
            state: state.into(),
        }
    }

    #[test]
    fn only_runs_whose_faultline_is_gone_are_reported_with_each_containers_state() {
        // This test binary counts as a live faultline; pid 0 is never a process.
        let live = std::process::id();
        let found = abandoned(vec![
            owned(ResourceKind::Container, "fl-a-kv-0", "a", 0, "paused"),
            owned(ResourceKind::Container, "fl-a-kv-1", "a", 0, "running"),
            owned(ResourceKind::Network, "fl-a-net", "a", 0, ""),
            owned(ResourceKind::Container, "fl-b-kv-0", "b", live, "running"),
        ]);
        assert_eq!(found.keys().collect::<Vec<_>>(), ["a"]);
        let line = describe("a", &found["a"]);
        assert!(
            line.contains("left 2 containers: fl-a-kv-0 (paused), fl-a-kv-1 (running) and 1 network behind")
                && line.contains("`faultline teardown --run a`"),
            "{line}"
        );
    }
}
