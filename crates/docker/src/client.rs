//! A thin, typed layer over the Docker engine API (bollard, local unix socket
//! only): networks, containers with limits, readiness waits. The container
//! operations faults are made of are in ops.rs, removal by label in
//! teardown.rs; every operation that changes a container's state returns
//! only after `inspect` (or the kernel, for packet filters) shows the change
//! took effect, so a fault that "happened" really did.
//!
//! Everything faultline creates carries [`Labels`]: the owner label
//! `faultline.owner=faultline`, the run id, the target and the pid of the
//! faultline process, so [`Docker::remove_labeled`] (and `faultline
//! teardown`) can find it again after a crash.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::Path;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use bollard::errors::Error as ApiError;
use bollard::models::{ContainerCreateBody, EndpointSettings, HostConfig, NetworkCreateRequest, NetworkingConfig};
use bollard::query_parameters::{CreateContainerOptionsBuilder, LogsOptionsBuilder};
use futures::StreamExt;

pub const OWNER_LABEL: &str = "faultline.owner";
pub const OWNER: &str = "faultline";
pub const RUN_LABEL: &str = "faultline.run";
pub const TARGET_LABEL: &str = "faultline.target";
pub const PID_LABEL: &str = "faultline.pid";
pub const MEMBER_LABEL: &str = "faultline.member";

/// How long a state change may take before an operation reports it did not
/// happen.
pub const CONFIRM_TIMEOUT: Duration = Duration::from_secs(10);

/// The labels that mark what one run (and optionally one target of it)
/// created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Labels {
    pub run: String,
    pub target: Option<String>,
}

impl Labels {
    /// A whole run's resources.
    pub fn run(run: &str) -> Labels {
        Labels { run: run.to_string(), target: None }
    }

    pub fn target(run: &str, target: &str) -> Labels {
        Labels { run: run.to_string(), target: Some(target.to_string()) }
    }

    /// The labels to put on a new resource.
    pub fn to_map(&self) -> HashMap<String, String> {
        let mut m = HashMap::from([
            (OWNER_LABEL.to_string(), OWNER.to_string()),
            (RUN_LABEL.to_string(), self.run.clone()),
            (PID_LABEL.to_string(), std::process::id().to_string()),
        ]);
        if let Some(t) = &self.target {
            m.insert(TARGET_LABEL.to_string(), t.clone());
        }
        m
    }
}

/// A connection to the local Docker engine.
#[derive(Clone)]
pub struct Docker {
    /// The engine's client; ops.rs and teardown.rs use it directly.
    pub(crate) api: bollard::Docker,
}

/// A container faultline created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Container {
    pub id: String,
    pub name: String,
}

/// A network faultline created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Network {
    pub id: String,
    pub name: String,
    /// CIDR, as Docker assigned it, e.g. `172.18.0.0/16`.
    pub subnet: String,
    /// The host's address on the network: traffic from faultline's load
    /// generator comes from here.
    pub gateway: Ipv4Addr,
}

/// What a container should be.
#[derive(Debug, Clone, Default)]
pub struct ContainerSpec {
    /// Container name (unique on the Docker host).
    pub name: String,
    /// Host name inside the container; also its alias on `network`.
    pub hostname: String,
    pub image: String,
    /// Replaces the image's CMD (the entrypoint, if any, stays).
    pub cmd: Vec<String>,
    /// `NAME=value`.
    pub env: Vec<String>,
    pub labels: HashMap<String, String>,
    /// Bytes.
    pub memory: Option<u64>,
    pub cpus: Option<f64>,
    /// Mount point → options (`size=64m`, may be empty).
    pub tmpfs: Vec<(String, String)>,
    /// Linux capabilities, e.g. `NET_ADMIN` (for packet filters inside).
    pub cap_add: Vec<String>,
    /// Host directories bound into it, `HOST:CONTAINER`.
    pub binds: Vec<String>,
    /// Network name to attach to at creation.
    pub network: String,
    pub aliases: Vec<String>,
}

/// A container's state, as `inspect` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    pub status: String,
    pub running: bool,
    pub paused: bool,
    pub exit_code: i64,
    pub oom_killed: bool,
    pub started_at: String,
    /// Network name → the container's IPv4 address on it.
    pub networks: std::collections::BTreeMap<String, Option<Ipv4Addr>>,
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.status)?;
        if !self.running && self.status != "created" {
            write!(f, " (exit code {}{})", self.exit_code, if self.oom_killed { ", OOM-killed" } else { "" })?;
        }
        let nets: Vec<String> = self
            .networks
            .iter()
            .map(|(n, ip)| format!("{n}={}", ip.map(|i| i.to_string()).unwrap_or_else(|| "-".into())))
            .collect();
        write!(f, ", networks: {}", if nets.is_empty() { "none".to_string() } else { nets.join(" ") })
    }
}

/// The HTTP status of an engine error, if it was one.
pub(crate) fn status_of(e: &ApiError) -> Option<u16> {
    match e {
        ApiError::DockerResponseServerError { status_code, .. } => Some(*status_code),
        _ => None,
    }
}

/// The engine's own message, without bollard's wrapping.
pub(crate) fn message_of(e: &ApiError) -> String {
    match e {
        ApiError::DockerResponseServerError { message, .. } => message.trim().to_string(),
        other => other.to_string(),
    }
}

impl Docker {
    /// Connects to the engine at `DOCKER_HOST` (a `unix://` socket) or
    /// `/var/run/docker.sock`, and agrees on an API version with it.
    pub async fn connect() -> anyhow::Result<Docker> {
        let place = std::env::var("DOCKER_HOST").unwrap_or_else(|_| "unix:///var/run/docker.sock".into());
        let unreachable = |why: String| {
            anyhow!(
                "cannot reach the Docker engine at {place}: {why} (is dockerd running and may this user use its socket? \
                 faultline speaks to a local unix socket only)"
            )
        };
        if !place.starts_with("unix://") && place.contains("://") {
            return Err(unreachable("only unix:// sockets are supported".into()));
        }
        let api = bollard::Docker::connect_with_unix_defaults()
            .map_err(|e| unreachable(e.to_string()))?
            .with_timeout(Duration::from_secs(60));
        let api = tokio::time::timeout(Duration::from_secs(10), api.negotiate_version())
            .await
            .map_err(|_| unreachable("no answer within 10s".into()))?
            .map_err(|e| unreachable(e.to_string()))?;
        Ok(Docker { api })
    }

    /// The raw API, for what this layer does not wrap.
    pub fn api(&self) -> &bollard::Docker {
        &self.api
    }

    /// Fails unless `image` is on this machine; no registry is asked.
    pub async fn require_image(&self, image: &str) -> anyhow::Result<()> {
        match self.api.inspect_image(image).await {
            Ok(_) => Ok(()),
            Err(e) if status_of(&e) == Some(404) => Err(anyhow!("{}", missing_image_message(image))),
            Err(e) => Err(anyhow!("cannot inspect image `{image}`: {}", message_of(&e))),
        }
    }

    /// Creates a bridge network. `internal` ones have no route out of the
    /// host; the host itself still reaches the containers on it through the
    /// gateway address.
    pub async fn create_network(&self, name: &str, labels: &Labels, internal: bool) -> anyhow::Result<Network> {
        let request = NetworkCreateRequest {
            name: name.to_string(),
            driver: Some("bridge".into()),
            internal: Some(internal),
            labels: Some(labels.to_map()),
            ..Default::default()
        };
        let created = self
            .api
            .create_network(request)
            .await
            .map_err(|e| anyhow!("cannot create network `{name}`: {}", message_of(&e)))?;
        let inspect = self
            .api
            .inspect_network(&created.id, None::<bollard::query_parameters::InspectNetworkOptions>)
            .await
            .map_err(|e| anyhow!("cannot inspect network `{name}`: {}", message_of(&e)))?;
        let config = inspect.ipam.and_then(|i| i.config).and_then(|c| c.into_iter().next());
        let subnet = config.as_ref().and_then(|c| c.subnet.clone()).unwrap_or_default();
        let gateway = config.and_then(|c| c.gateway).and_then(|g| g.parse().ok()).with_context(|| {
            format!("network `{name}` has no IPv4 gateway; faultline needs one to reach its containers")
        })?;
        Ok(Network { id: created.id, name: name.to_string(), subnet, gateway })
    }

    /// Removes a network (teardown removes networks by label; this is for
    /// callers that made their own).
    pub async fn remove_network(&self, id_or_name: &str) -> anyhow::Result<()> {
        match self.api.remove_network(id_or_name).await {
            Ok(()) => Ok(()),
            Err(e) if status_of(&e) == Some(404) => Ok(()),
            Err(e) => Err(anyhow!("cannot remove network `{id_or_name}`: {}", message_of(&e))),
        }
    }

    /// Creates and starts a container; returns once Docker reports it
    /// running (not that the program inside is ready: see [`Docker::wait_ready`]).
    pub async fn run(&self, spec: &ContainerSpec) -> anyhow::Result<Container> {
        let host_config = HostConfig {
            memory: spec.memory.map(|m| m as i64),
            nano_cpus: spec.cpus.map(|c| (c * 1e9).round() as i64),
            tmpfs: (!spec.tmpfs.is_empty()).then(|| spec.tmpfs.iter().cloned().collect()),
            cap_add: (!spec.cap_add.is_empty()).then(|| spec.cap_add.clone()),
            binds: (!spec.binds.is_empty()).then(|| spec.binds.clone()),
            network_mode: Some(spec.network.clone()),
            ..Default::default()
        };
        let endpoint = EndpointSettings { aliases: Some(spec.aliases.clone()), ..Default::default() };
        let body = ContainerCreateBody {
            hostname: Some(spec.hostname.clone()),
            image: Some(spec.image.clone()),
            cmd: (!spec.cmd.is_empty()).then(|| spec.cmd.clone()),
            env: (!spec.env.is_empty()).then(|| spec.env.clone()),
            labels: Some(spec.labels.clone()),
            host_config: Some(host_config),
            networking_config: Some(NetworkingConfig {
                endpoints_config: Some(HashMap::from([(spec.network.clone(), endpoint)])),
            }),
            ..Default::default()
        };
        let options = CreateContainerOptionsBuilder::new().name(&spec.name).build();
        let created = self.api.create_container(Some(options), body).await.map_err(|e| {
            let message = message_of(&e);
            if status_of(&e) == Some(404) && message.contains("image") {
                anyhow!("{}", missing_image_message(&spec.image))
            } else {
                anyhow!("cannot create container `{}`: {message}", spec.name)
            }
        })?;
        let container = Container { id: created.id, name: spec.name.clone() };
        self.api
            .start_container(&container.id, None::<bollard::query_parameters::StartContainerOptions>)
            .await
            .map_err(|e| anyhow!("cannot start container `{}`: {}", spec.name, message_of(&e)))?;
        Ok(container)
    }

    /// The container's state now.
    pub async fn state(&self, c: &Container) -> anyhow::Result<State> {
        let i = self
            .api
            .inspect_container(&c.id, None::<bollard::query_parameters::InspectContainerOptions>)
            .await
            .map_err(|e| anyhow!("cannot inspect container `{}`: {}", c.name, message_of(&e)))?;
        let s = i.state.unwrap_or_default();
        let networks = i
            .network_settings
            .and_then(|n| n.networks)
            .unwrap_or_default()
            .into_iter()
            .map(|(name, e)| (name, e.ip_address.and_then(|ip| ip.parse().ok())))
            .collect();
        Ok(State {
            status: s.status.map(|s| s.to_string()).unwrap_or_default(),
            running: s.running.unwrap_or(false),
            paused: s.paused.unwrap_or(false),
            exit_code: s.exit_code.unwrap_or(0),
            oom_killed: s.oom_killed.unwrap_or(false),
            started_at: s.started_at.unwrap_or_default(),
            networks,
        })
    }

    /// The container's address on `network`, if it is attached.
    pub async fn ip_on(&self, c: &Container, network: &str) -> anyhow::Result<Option<Ipv4Addr>> {
        Ok(self.state(c).await?.networks.get(network).copied().flatten())
    }

    /// Everything the container wrote to stdout and stderr.
    pub async fn logs(&self, c: &Container) -> anyhow::Result<Vec<u8>> {
        let options = LogsOptionsBuilder::new().stdout(true).stderr(true).build();
        let mut stream = self.api.logs(&c.id, Some(options));
        let mut out = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| anyhow!("cannot read the logs of `{}`: {}", c.name, message_of(&e)))?;
            out.extend_from_slice(chunk.as_ref());
        }
        Ok(out)
    }

    /// Writes the container's logs to `path` (creating its directory).
    pub async fn save_logs(&self, c: &Container, path: &Path) -> anyhow::Result<()> {
        let logs = self.logs(c).await?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        }
        std::fs::write(path, logs).with_context(|| format!("cannot write {}", path.display()))
    }

    /// The last `n` lines of the container's logs, for error messages.
    pub async fn log_tail(&self, c: &Container, n: usize) -> String {
        match self.logs(c).await {
            Ok(bytes) => {
                let text = String::from_utf8_lossy(&bytes);
                let lines: Vec<&str> = text.lines().collect();
                let shown = lines[lines.len().saturating_sub(n)..].join("\n");
                if shown.is_empty() {
                    "  (empty)".into()
                } else {
                    shown
                }
            }
            Err(e) => format!("  (no logs: {e:#})"),
        }
    }

    /// Waits until `check` passes, the container stops running, or
    /// `timeout` passes. The error says which, with the last check failure.
    pub async fn wait_ready(&self, c: &Container, check: &ReadyCheck, timeout: Duration) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut delay = Duration::from_millis(50);
        let mut last = String::from("not checked yet");
        loop {
            let state = self.state(c).await?;
            if !state.running {
                bail!("container `{}` stopped before it was ready: {state}", c.name);
            }
            if !state.paused {
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                match tokio::time::timeout(left.max(Duration::from_millis(1)), self.check_once(c, check)).await {
                    Ok(Ok(())) => return Ok(()),
                    Ok(Err(e)) => last = format!("{e:#}"),
                    Err(_) => last = "the check itself did not finish".into(),
                }
            }
            if tokio::time::Instant::now() + delay >= deadline {
                bail!(
                    "container `{}` was not ready within {} ({check}); last check: {last}",
                    c.name,
                    faultline_model::units::format_duration(timeout)
                );
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_millis(500));
        }
    }

    async fn check_once(&self, c: &Container, check: &ReadyCheck) -> anyhow::Result<()> {
        match check {
            ReadyCheck::Command(cmd) => {
                let out = self.exec(c, cmd, Duration::from_secs(5)).await?;
                if out.exit_code == 0 {
                    Ok(())
                } else {
                    bail!("exit code {}: {}", out.exit_code, out.combined().trim())
                }
            }
            ReadyCheck::Port { network, port } => {
                let ip = self.ip_on(c, network).await?.with_context(|| format!("not on network `{network}`"))?;
                tokio::time::timeout(Duration::from_secs(2), tokio::net::TcpStream::connect((ip, *port)))
                    .await
                    .map_err(|_| anyhow!("connecting to {ip}:{port} timed out"))?
                    .with_context(|| format!("cannot connect to {ip}:{port}"))?;
                Ok(())
            }
            ReadyCheck::Log(needle) => {
                let logs = self.logs(c).await?;
                if String::from_utf8_lossy(&logs).contains(needle.as_str()) {
                    Ok(())
                } else {
                    bail!("the log has no line with {needle:?} yet")
                }
            }
        }
    }
}

/// When a container counts as ready.
#[derive(Debug, Clone, PartialEq)]
pub enum ReadyCheck {
    /// A command run inside exits with 0.
    Command(Vec<String>),
    /// A TCP connection from the host to the container's address on
    /// `network` succeeds.
    Port { network: String, port: u16 },
    /// The container's output contains this text.
    Log(String),
}

impl std::fmt::Display for ReadyCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadyCheck::Command(c) => write!(f, "ready command `{}`", faultline_model::command_line::shown(c)),
            ReadyCheck::Port { port, .. } => write!(f, "ready when port {port} answers"),
            ReadyCheck::Log(l) => write!(f, "ready when the log shows {l:?}"),
        }
    }
}

/// No registry is reachable here: say how to get the image.
pub fn missing_image_message(image: &str) -> String {
    let how = match image.strip_prefix("faultline/").and_then(|rest| rest.split(':').next()) {
        // No MongoDB server package can be had here: the user brings one.
        Some("mongodb") => "build it from a MongoDB server package or tarball you have: `sudo fixtures/images/build.sh mongodb /path/to/mongodb-server.deb|.tgz` (see fixtures/images/README.md)".to_string(),
        Some(name) => format!("build it with `sudo fixtures/images/build.sh {name}` (see fixtures/images/README.md)"),
        None => "`docker pull` or `docker load` it first, or build one with fixtures/images/build.sh".to_string(),
    };
    format!("image `{image}` is not on this machine, and faultline never pulls (no registry is reachable): {how}")
}
