//! `faultline teardown`: removes the containers and networks that runs left
//! behind (a faultline killed with SIGKILL cannot clean up), found by
//! faultline's owner label. Runs whose faultline process is still alive are
//! left alone unless `--force`.

use std::collections::BTreeMap;

use crate::docker::{Docker, Owned, ResourceKind};
use crate::EXIT_USAGE;

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
    let docker = match Docker::connect().await {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e:#}");
            return EXIT_USAGE;
        }
    };
    let owned = match docker.list_owned(args.run.as_deref()).await {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e:#}");
            return EXIT_USAGE;
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
    if chosen.is_empty() {
        crate::stdout::say!("nothing to remove");
        return 0;
    }
    if args.dry_run {
        for o in &chosen {
            crate::stdout::say!("would remove {} {} ({})", kind_word(o.kind), o.name, origin(o));
        }
        return 0;
    }
    let removed = docker.remove_owned(&chosen).await;
    for o in &chosen {
        let gone = match o.kind {
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
    crate::stdout::say!(
        "removed {} container{} and {} network{}",
        removed.containers.len(),
        if removed.containers.len() == 1 { "" } else { "s" },
        removed.networks.len(),
        if removed.networks.len() == 1 { "" } else { "s" },
    );
    if removed.errors.is_empty() {
        0
    } else {
        1
    }
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
        ResourceKind::Container => "container",
        ResourceKind::Network => "network",
    }
}

/// Whether `pid` is a live faultline process (a test binary counts too).
pub fn faultline_alive(pid: u32) -> bool {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let argv0 = cmdline.split(|b| *b == 0).next().unwrap_or_default();
    let name = String::from_utf8_lossy(argv0);
    name.rsplit('/').next().is_some_and(|base| base.starts_with("faultline"))
}
