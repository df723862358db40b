//! Who starts the agents. faultline does not place or restart them itself:
//! `local` starts N agent processes on this machine (each dies with the
//! coordinator, whatever ends it); `swarm` asks Docker Swarm for a service
//! of N agents (faultline-docker's swarm.rs); `wait` starts none and waits
//! for N agents an orchestrator started (a Kubernetes Job from `faultline
//! agents render`, or anything that runs `faultline agent --connect`). The
//! CLI reads which from `--agents` (runner/src/agents_flag.rs).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{oneshot, Notify};
use tokio::task::JoinHandle;

use crate::events::Events;

/// The local image `swarm` agents' image is made from unless told otherwise
/// (scripts/docker-images.sh builds it).
pub const DEFAULT_AGENT_BASE: &str = "faultline/redis:bookworm";

/// How the agents come to be, as `--agents` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launcher {
    /// N agent processes on this machine.
    Local(u32),
    /// N agents in a Docker Swarm service.
    Swarm(u32),
    /// N agents started by someone else, dialing `--agent-listen`.
    Wait(u32),
}

impl Launcher {
    pub(crate) fn count(&self) -> u32 {
        match self {
            Launcher::Local(n) | Launcher::Swarm(n) | Launcher::Wait(n) => *n,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Launcher::Local(_) => "local",
            Launcher::Swarm(_) => "swarm",
            Launcher::Wait(_) => "external",
        }
    }
}

/// The most agents a run takes.
pub const MAX_AGENTS: u32 = 256;

/// One agent process this run started.
struct Started {
    log: PathBuf,
    kill: Option<oneshot::Sender<()>>,
    waiter: JoinHandle<()>,
}

/// What a launcher started, stopped by [`Launched::stop`] (and by the
/// processes' own death signal should the coordinator die first).
pub struct Launched {
    pub(crate) kind: &'static str,
    pub(crate) count: u32,
    processes: Vec<Started>,
    /// Agent processes that exited, with how.
    exits: Arc<Mutex<Vec<String>>>,
    exited: Arc<Notify>,
    /// A swarm service of agents, removed on stop.
    service: Option<(faultline_docker::Docker, faultline_docker::swarm::AgentService)>,
    /// Where the agents' logs are kept.
    log_dir: PathBuf,
    /// Where warnings of the teardown go.
    pub(crate) events: Events,
}

impl Launched {
    pub fn none(launcher: Launcher, events: Events) -> Launched {
        Launched {
            kind: launcher.name(),
            count: launcher.count(),
            processes: Vec::new(),
            exits: Arc::default(),
            exited: Arc::default(),
            service: None,
            log_dir: PathBuf::new(),
            events,
        }
    }

    /// A swarm service of agents, already created.
    pub fn swarm(
        docker: faultline_docker::Docker,
        service: faultline_docker::swarm::AgentService,
        log_dir: &Path,
        events: Events,
    ) -> Launched {
        let mut launched = Launched::none(Launcher::Swarm(service.replicas), events);
        launched.service = Some((docker, service));
        launched.log_dir = log_dir.to_path_buf();
        launched
    }

    /// Starts `count` agent processes of this very binary, dialing
    /// `coordinator`, each given the run's `key` in its environment (only
    /// its user may read a process's environment; anyone its command line).
    pub fn local(
        count: u32,
        coordinator: SocketAddr,
        log_dir: &Path,
        key: &super::link::LinkKey,
        events: Events,
    ) -> anyhow::Result<Launched> {
        use anyhow::Context;
        let exe = std::env::current_exe().context("cannot find faultline's own binary to start agents")?;
        let mut launched = Launched::none(Launcher::Local(count), events);
        for i in 0..count {
            let name = format!("local-{i}");
            let log = log_dir.join(format!("agent-{name}.log"));
            let file = std::fs::File::create(&log).with_context(|| format!("cannot create {}", log.display()))?;
            let mut command = tokio::process::Command::new(&exe);
            command
                .args(["agent", "--connect", &coordinator.to_string(), "--name", &name])
                .env(super::link::KEY_ENV, key.to_hex())
                .stdin(std::process::Stdio::null())
                .stdout(file.try_clone()?)
                .stderr(file)
                // Its own process group: a Ctrl-C at the terminal reaches the
                // coordinator, which stops the agents in order.
                .process_group(0)
                .kill_on_drop(true);
            // SAFETY: prctl is async-signal-safe; it only sets this child's
            // death signal, so an agent dies with a coordinator killed outright.
            unsafe {
                command.pre_exec(|| {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            let mut child = command.spawn().with_context(|| format!("cannot start agent {name}"))?;
            let (kill, killed) = oneshot::channel::<()>();
            let (exits, exited, who) = (Arc::clone(&launched.exits), Arc::clone(&launched.exited), name.clone());
            let waiter = tokio::spawn(async move {
                let status = tokio::select! {
                    s = child.wait() => s,
                    _ = killed => {
                        let _ = child.start_kill();
                        child.wait().await
                    }
                };
                let how = match status {
                    Ok(s) => s.to_string(),
                    Err(e) => format!("unknown ({e})"),
                };
                exits.lock().expect("exits lock").push(format!("agent {who} exited: {how}"));
                exited.notify_waiters();
            });
            launched.processes.push(Started { log, kill: Some(kill), waiter });
        }
        Ok(launched)
    }

    /// Resolves when a started agent exits (never, for agents started by
    /// someone else), with how and where its log is.
    pub(crate) async fn first_exit(&self) -> String {
        if let Some((docker, service)) = &self.service {
            // A task that failed or was rejected will not dial in.
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let tasks = docker.service_tasks(&service.name).await;
                if tasks.iter().any(|t| t.contains(" failed") || t.contains(" rejected")) {
                    return format!("an agent of swarm service `{}` failed: {}", service.name, tasks.join("; "));
                }
            }
        }
        loop {
            let notified = self.exited.notified();
            if let Some(e) = self.exits.lock().expect("exits lock").first() {
                return format!("{e} before joining the run: {}", self.where_to_look());
            }
            if self.processes.is_empty() {
                std::future::pending::<()>().await;
            }
            notified.await;
        }
    }

    pub(crate) fn describe(&self) -> String {
        if let Some((_, s)) = &self.service {
            return format!("swarm service `{}` of {} agents, image `{}`", s.name, s.replicas, s.image);
        }
        match self.processes.is_empty() {
            true => format!("waiting for {} agents started elsewhere", self.count),
            false => format!("{} {} agent processes started", self.count, self.kind),
        }
    }

    /// Where an agent that did not join says why.
    pub(crate) fn where_to_look(&self) -> String {
        if let Some((_, s)) = &self.service {
            return format!("`docker service ps --no-trunc {}` and `docker service logs {}` say why", s.name, s.name);
        }
        match self.processes.first() {
            Some(p) => format!("see {} (and the other agents' logs beside it)", p.log.display()),
            None => "start them with `faultline agent --connect HOST:PORT --key-file FILE` where HOST:PORT reaches \
                 --agent-listen and FILE holds the --agent-key-file key"
                .into(),
        }
    }

    /// Waits a moment for the agents to leave on their own (they were told
    /// goodbye), then kills what is left, and waits for every process.
    pub(crate) async fn stop(mut self) {
        if let Some((docker, service)) = self.service.take() {
            // The agents were told goodbye; a moment for them to leave, then
            // the service goes, and any task still running with it.
            tokio::time::sleep(Duration::from_millis(500)).await;
            if let Err(e) = docker.save_service_logs(&service.name, &self.log_dir).await {
                self.events.warn(&format!("the swarm agents' logs: {e:#}"));
            }
            if let Err(e) = docker.remove_service(&service.name).await {
                self.events.warn(&format!("{e:#}"));
            }
        }
        let all_gone = async {
            for p in &mut self.processes {
                let _ = (&mut p.waiter).await;
            }
        };
        if tokio::time::timeout(Duration::from_secs(5), all_gone).await.is_err() {
            for p in &mut self.processes {
                if let Some(kill) = p.kill.take() {
                    let _ = kill.send(());
                }
            }
            for p in &mut self.processes {
                if !p.waiter.is_finished() {
                    let _ = (&mut p.waiter).await;
                }
            }
        }
    }
}

impl Drop for Launched {
    /// A run that ends without stopping its launcher (a panic, a Ctrl-C
    /// while the agents joined) still removes the swarm service; local
    /// agent processes die with their waiters' runtime and with the
    /// coordinator.
    fn drop(&mut self) {
        if let Some((docker, service)) = self.service.take() {
            let removing = std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
                runtime.block_on(docker.remove_service(&service.name)).err()
            });
            if let Ok(Some(e)) = removing.join() {
                self.events.warn(&format!("{e:#}"));
            }
        }
    }
}
