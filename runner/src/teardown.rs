//! `faultline teardown`: removes what runs left behind (a faultline killed
//! with SIGKILL cannot clean up): containers and networks, found by
//! faultline's owner label, and what the run ledgers list (DynamoDB tables,
//! MongoDB collections on external servers, data directories; see
//! ledger.rs), and fault filesystems whose faultline is gone (unmounted
//! first, so the directories under them can go). Runs whose faultline
//! process is still alive are left alone unless `--force`.

use std::collections::BTreeMap;

use crate::kinds;
use crate::EXIT_USAGE;
use faultline_docker::{Docker, Owned, ResourceKind};
use faultline_kind::ledger::{self, faultline_alive, run_id_matches, Resource};
use faultline_model::ops::TargetKind;

pub struct TeardownArgs {
    pub run: Option<String>,
    pub force: bool,
    pub dry_run: bool,
}

pub fn run(args: TeardownArgs) -> u8 {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start a runtime: {e}");
            return EXIT_USAGE;
        }
    };
    runtime.block_on(teardown(args))
}

async fn teardown(args: TeardownArgs) -> u8 {
    let asked = |run: &str| args.run.as_deref().is_none_or(|asked| run_id_matches(run, asked));
    // The run ledgers first: they need no Docker.
    let mut listed = Vec::new();
    let (entries, skipped) = ledger::entries();
    for line in skipped {
        crate::stdout::say_err!("warning: {line}");
    }
    for (path, entry) in entries {
        if !asked(&entry.run) || entry.resources.is_empty() {
            continue;
        }
        if faultline_alive(entry.pid) && !args.force {
            crate::stdout::say!(
                "skipped run {}: faultline (pid {}) is still running it; --force removes it anyway",
                entry.run,
                entry.pid
            );
            continue;
        }
        listed.push((path, entry));
    }
    // Listed whole and matched here: the label carries a hash of the run
    // directory's path that the user never sees.
    let found = match Docker::connect().await {
        Ok(d) => d.list_owned(None).await.map(|o| (o, d)),
        Err(e) => Err(e),
    };
    let (owned, docker) = match found {
        Ok((mut o, d)) => {
            o.retain(|item| asked(&item.run));
            (o, Some(d))
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            // Without Docker, what the ledgers list is still removed.
            if listed.is_empty() {
                return EXIT_USAGE;
            }
            (Vec::new(), None)
        }
    };
    let mut runs: BTreeMap<String, Vec<Owned>> = BTreeMap::new();
    for o in owned {
        runs.entry(o.run.clone()).or_default().push(o);
    }
    let mut chosen = Vec::new();
    for (run, items) in runs {
        let live = items.iter().filter_map(|i| i.pid).find(|pid| faultline_alive(*pid));
        match live {
            Some(pid) if !args.force => {
                crate::stdout::say!(
                    "skipped run {run}: faultline (pid {pid}) is still running it; --force removes it anyway"
                );
            }
            _ => chosen.extend(items),
        }
    }
    chosen.sort_by(|a, b| (a.kind, &a.name).cmp(&(b.kind, &b.name)));
    // A fault filesystem whose process is gone answers ENOTCONN to every
    // call (it never hangs): found in the mount table, never by a walk.
    let mounts: Vec<_> = match faultline_faultfs::stale::mounts() {
        Ok(m) => m.into_iter().filter(|m| m.orphaned()).collect(),
        Err(e) => {
            eprintln!("error: cannot read the mount table: {e}");
            Vec::new()
        }
    };
    let done = if docker.is_some() { 0 } else { EXIT_USAGE };
    if chosen.is_empty() && listed.is_empty() && mounts.is_empty() {
        crate::stdout::say!("nothing to remove");
        return done;
    }
    let mount_line = |m: &faultline_faultfs::stale::FaultMount| {
        format!("the fault filesystem at {} (target {}, faultline pid {} gone)", m.mountpoint.display(), m.label, m.pid)
    };
    if args.dry_run {
        for m in &mounts {
            crate::stdout::say!("would unmount {}", mount_line(m));
        }
        for (_, entry) in &listed {
            for r in &entry.resources {
                crate::stdout::say!("would remove {} (run {})", r.describe(), entry.run);
            }
        }
        for o in &chosen {
            crate::stdout::say!("would remove {} {} ({})", kind_word(o.kind), o.name, origin(o));
        }
        return done;
    }
    let mut failed = false;
    for m in &mounts {
        match faultline_faultfs::stale::unmount(&m.mountpoint) {
            Ok(()) => crate::stdout::say!("unmounted {}", mount_line(m)),
            Err(e) => {
                eprintln!("error: cannot unmount {}: {e}", mount_line(m));
                failed = true;
            }
        }
    }
    // Before the ledgers are struck off: they say where each run's logs go.
    if let Some(docker) = &docker {
        save_agents_logs(docker, &chosen).await;
    }
    failed |= !remove_listed(&listed).await;
    if let Some(docker) = docker.filter(|_| !chosen.is_empty()) {
        let removed = docker.remove_owned(&chosen).await;
        for o in &chosen {
            let gone = match o.kind {
                ResourceKind::Service => removed.services.contains(&o.name),
                ResourceKind::Container => removed.containers.contains(&o.name),
                ResourceKind::Network => removed.networks.contains(&o.name),
            };
            if gone {
                crate::stdout::say!("removed {} {} ({})", kind_word(o.kind), o.name, origin(o));
            }
        }
        for e in &removed.errors {
            eprintln!("error: {e}");
        }
        if !removed.services.is_empty() {
            crate::stdout::say!("removed {} swarm service(s) of agents", removed.services.len());
        }
        crate::stdout::say!(
            "removed {} container{} and {} network{}",
            removed.containers.len(),
            if removed.containers.len() == 1 { "" } else { "s" },
            removed.networks.len(),
            if removed.networks.len() == 1 { "" } else { "s" },
        );
        failed |= !removed.errors.is_empty();
    }
    if failed {
        1
    } else {
        done
    }
}

/// A killed coordinator's swarm agents wrote their logs only into their
/// tasks' containers: saved into the run's `logs/` (found through its
/// ledger) before the service and its containers go, as the run itself
/// would have.
async fn save_agents_logs(docker: &Docker, chosen: &[Owned]) {
    let (runs, _) = ledger::entries();
    for service in chosen.iter().filter(|o| o.kind == ResourceKind::Service) {
        let Some((_, entry)) = runs.iter().find(|(_, e)| e.run == service.run) else { continue };
        let logs = std::path::Path::new(&entry.run_dir).join("logs");
        match docker.save_service_logs(&service.name, &logs).await {
            Ok(()) => crate::stdout::say!("saved swarm service {}'s agent logs in {}", service.name, logs.display()),
            Err(e) => eprintln!("warning: swarm service {}'s agent logs: {e:#}", service.name),
        }
    }
}

/// Removes what the ledgers list, striking each off as it goes; false when
/// something could not be removed (it stays listed).
async fn remove_listed(listed: &[(std::path::PathBuf, ledger::Entry)]) -> bool {
    let mut all = true;
    for (path, entry) in listed {
        for r in &entry.resources {
            let removed = match r {
                Resource::DataDirectory { path: dir, .. } => match std::fs::remove_dir_all(dir) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                        Err(anyhow::anyhow!("cannot remove {dir}: {e}"))
                    }
                    _ => Ok(String::new()),
                },
                _ => remove_through_its_kind(r).await,
            };
            match removed.and_then(|_| ledger::strike(path, r)) {
                Ok(()) => crate::stdout::say!("removed {} (run {})", r.describe(), entry.run),
                Err(e) => {
                    eprintln!("error: run {}: {}: {e:#}", entry.run, r.describe());
                    all = false;
                }
            }
        }
    }
    all
}

/// A table or a collection, removed by the kind that created it; a build
/// without that kind cannot, so it stays listed and the error says how to
/// build one that can.
async fn remove_through_its_kind(resource: &Resource) -> anyhow::Result<String> {
    let name = resource.created_by().ok_or_else(|| anyhow::anyhow!("no target kind created it"))?;
    let kind = kinds::CATALOG.find(&TargetKind::new(name)).map_err(anyhow::Error::msg)?;
    let remove = kind.remove_listed.ok_or_else(|| anyhow::anyhow!("`{name}` targets remove nothing they list"))?;
    remove(resource).await
}

fn origin(o: &Owned) -> String {
    if o.target.is_empty() {
        format!("run {}", o.run)
    } else {
        format!("run {}, target {}", o.run, o.target)
    }
}

fn kind_word(k: ResourceKind) -> &'static str {
    match k {
        ResourceKind::Service => "swarm service",
        ResourceKind::Container => "container",
        ResourceKind::Network => "network",
    }
}
