//! Agents as a Docker Swarm service (`faultline run --agents swarm:N`): a
//! replicated service of N tasks, each a container running `faultline agent
//! --connect` to the coordinator. Swarm places the tasks; faultline only
//! asks for them, and removes the service when the run ends (or `faultline
//! teardown` does, by the run's label, which the service and its task
//! containers carry like every container faultline makes).
//!
//! - The tasks use the host's network, so an agent reaches the coordinator
//!   and the targets (processes, containers' addresses, external servers)
//!   as a local agent would.
//! - No task is ever restarted: an agent lost mid-cell fails its cell, and
//!   a new one could not join a run already under way.
//! - The image holds this very faultline binary (the coordinator takes no
//!   other build). Without `--agent-image`, it is made here, without a
//!   registry or a builder: a container of a local base image, the binary
//!   copied in, committed as `faultline/agent:<sha256 of the binary>`.
//! - The run's agent key reaches the tasks as a swarm secret (kept
//!   encrypted in the swarm's Raft log, mounted owner-only at
//!   /run/secrets/faultline-agent-key), never in the service's environment
//!   or arguments, which `docker service inspect` shows; it is removed with
//!   the service.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{anyhow, bail, Context};
use bollard::models::{
    ContainerConfig, ContainerCreateBody, NetworkAttachmentConfig, SecretSpec, ServiceSpec, ServiceSpecMode,
    ServiceSpecModeReplicated, TaskSpec, TaskSpecContainerSpec, TaskSpecContainerSpecFile,
    TaskSpecContainerSpecSecrets, TaskSpecRestartPolicy, TaskSpecRestartPolicyConditionEnum,
};
use bollard::query_parameters::{
    CommitContainerOptions, CreateContainerOptionsBuilder, ListContainersOptionsBuilder, ListImagesOptions,
    ListServicesOptionsBuilder, ListTasksOptionsBuilder, RemoveContainerOptionsBuilder, RemoveImageOptions,
    UploadToContainerOptions,
};

use crate::client::{message_of, status_of, Docker, Labels};

/// Where the agent image keeps faultline: on the default PATH.
const AGENT_BINARY_DIR: &str = "/usr/local/bin";
/// Agent images kept (this build's and the newest others'): enough for
/// the builds a team alternates between, not one per build ever made.
const KEEP_AGENT_IMAGES: usize = 3;
/// The agent key's file in each task (under /run/secrets).
const KEY_FILE: &str = "faultline-agent-key";

/// The secret holding a service's agent key.
fn key_secret(service: &str) -> String {
    format!("{service}-key")
}

/// The service that runs a run's agents.
pub struct AgentService {
    pub name: String,
    pub image: String,
    pub replicas: u32,
}

impl Docker {
    /// Fails unless this engine is a swarm manager, saying how to make it one.
    pub async fn require_swarm_manager(&self) -> anyhow::Result<()> {
        match self.api.inspect_swarm().await {
            Ok(_) => Ok(()),
            Err(e) => bail!(
                "the Docker engine is not a swarm manager ({}): `docker swarm init` makes this machine a \
                 single-node swarm (and `docker swarm leave --force` undoes it)",
                message_of(&e)
            ),
        }
    }

    /// An image holding the faultline `binary` (whose SHA-256 is `sha256`),
    /// made from `base` when it is not here yet. The container it is made
    /// in carries the run's `labels` and is removed however this ends (a
    /// Ctrl-C drops this future half-way; `faultline teardown` finds it
    /// by the labels should the process die).
    pub async fn agent_image(
        &self,
        binary: &Path,
        sha256: &str,
        base: &str,
        labels: &Labels,
    ) -> anyhow::Result<String> {
        let tag = sha256.get(..12).context("the binary's digest is too short")?;
        let image = format!("faultline/agent:{tag}");
        if self.api.inspect_image(&image).await.is_ok() {
            return Ok(image);
        }
        self.require_image(base).await.with_context(|| format!("the agents' image is made from `{base}`"))?;
        let bytes = std::fs::read(binary).with_context(|| format!("reading {}", binary.display()))?;
        let body =
            ContainerCreateBody { image: Some(base.to_string()), labels: Some(labels.to_map()), ..Default::default() };
        let created = self
            .api
            .create_container(Some(CreateContainerOptionsBuilder::new().build()), body)
            .await
            .map_err(|e| anyhow!("creating a container of `{base}`: {}", message_of(&e)))?;
        let scratch = Scratch { docker: self.clone(), id: Some(created.id.clone()) };
        let made = async {
            let upload = UploadToContainerOptions { path: AGENT_BINARY_DIR.to_string(), ..Default::default() };
            self.api
                .upload_to_container(&created.id, Some(upload), bollard::body_full(tar_of("faultline", &bytes).into()))
                .await
                .map_err(|e| anyhow!("copying faultline into the image: {}", message_of(&e)))?;
            let options = CommitContainerOptions {
                container: Some(created.id.clone()),
                repo: Some("faultline/agent".into()),
                tag: Some(tag.to_string()),
                comment: Some(format!("faultline agent, binary sha256 {sha256}")),
                pause: false,
                ..Default::default()
            };
            let config = ContainerConfig {
                entrypoint: Some(vec![format!("{AGENT_BINARY_DIR}/faultline")]),
                cmd: Some(vec!["--help".into()]),
                ..Default::default()
            };
            self.api
                .commit_container(options, config)
                .await
                .map_err(|e| anyhow!("committing the image: {}", message_of(&e)))
        }
        .await;
        scratch.remove().await;
        made?;
        self.prune_agent_images(&image).await;
        Ok(image)
    }

    /// Removes the agent images of other builds but the newest few: every
    /// new binary makes one (about 280 MB), which nothing else removes. An
    /// image a container still uses is left (Docker refuses, and that is
    /// right).
    async fn prune_agent_images(&self, keep: &str) {
        let filters = HashMap::from([("reference".to_string(), vec!["faultline/agent".to_string()])]);
        let options = ListImagesOptions { filters: Some(filters), ..Default::default() };
        let Ok(mut images) = self.api.list_images(Some(options)).await else { return };
        images.sort_by_key(|i| std::cmp::Reverse(i.created));
        let tags = images.iter().flat_map(|i| i.repo_tags.iter()).filter(|t| t.starts_with("faultline/agent:"));
        for tag in tags.filter(|t| t.as_str() != keep).skip(KEEP_AGENT_IMAGES - 1) {
            let _ =
                self.api.remove_image(tag, Some(RemoveImageOptions { force: false, ..Default::default() }), None).await;
        }
    }

    /// Starts `replicas` agents of `image` dialing `connect` with the
    /// run's agent key (`key`, its hex), named `swarm-<slot>`, marked with
    /// the run's `labels`.
    pub async fn start_agent_service(
        &self,
        name: &str,
        image: &str,
        replicas: u32,
        connect: &str,
        key: &str,
        labels: &Labels,
    ) -> anyhow::Result<AgentService> {
        use base64::Engine as _;
        let labels = labels.to_map();
        let secret = key_secret(name);
        let secret_id = self
            .api
            .create_secret(SecretSpec {
                name: Some(secret.clone()),
                labels: Some(labels.clone()),
                data: Some(base64::engine::general_purpose::STANDARD.encode(key)),
                ..Default::default()
            })
            .await
            .map_err(|e| anyhow!("creating the agents' key as swarm secret `{secret}`: {}", message_of(&e)))?
            .id;
        let spec = ServiceSpec {
            name: Some(name.to_string()),
            labels: Some(labels.clone()),
            task_template: Some(TaskSpec {
                container_spec: Some(TaskSpecContainerSpec {
                    image: Some(image.to_string()),
                    command: Some(vec!["faultline".into()]),
                    args: Some(vec!["agent".into(), "--connect".into(), connect.to_string()]),
                    env: Some(vec![
                        "FAULTLINE_AGENT_NAME=swarm-{{.Task.Slot}}".into(),
                        format!("FAULTLINE_AGENT_KEY_FILE=/run/secrets/{KEY_FILE}"),
                    ]),
                    secrets: Some(vec![TaskSpecContainerSpecSecrets {
                        file: Some(TaskSpecContainerSpecFile {
                            name: Some(KEY_FILE.into()),
                            uid: Some("0".into()),
                            gid: Some("0".into()),
                            mode: Some(0o400),
                        }),
                        secret_id: Some(secret_id),
                        secret_name: Some(secret.clone()),
                    }]),
                    labels: Some(labels),
                    ..Default::default()
                }),
                restart_policy: Some(TaskSpecRestartPolicy {
                    condition: Some(TaskSpecRestartPolicyConditionEnum::NONE),
                    ..Default::default()
                }),
                networks: Some(vec![NetworkAttachmentConfig { target: Some("host".into()), ..Default::default() }]),
                ..Default::default()
            }),
            mode: Some(ServiceSpecMode {
                replicated: Some(ServiceSpecModeReplicated { replicas: Some(i64::from(replicas)) }),
                ..Default::default()
            }),
            ..Default::default()
        };
        if let Err(e) = self.api.create_service(spec, None).await {
            let _ = self.api.delete_secret(&secret).await;
            bail!("creating the agents' swarm service `{name}`: {}", message_of(&e));
        }
        Ok(AgentService { name: name.to_string(), image: image.to_string(), replicas })
    }

    /// What each of a service's tasks is doing, in words: for an error
    /// when the agents do not join.
    pub async fn service_tasks(&self, service: &str) -> Vec<String> {
        let filters = HashMap::from([("service".to_string(), vec![service.to_string()])]);
        match self.api.list_tasks(Some(ListTasksOptionsBuilder::new().filters(&filters).build())).await {
            Ok(tasks) => tasks
                .into_iter()
                .map(|t| {
                    let status = t.status.unwrap_or_default();
                    let state = status.state.map(|s| s.to_string()).unwrap_or_default();
                    let why = status.err.or(status.message).unwrap_or_default();
                    format!("task {}: {state} {why}", t.slot.unwrap_or_default())
                })
                .collect(),
            Err(e) => vec![format!("cannot list its tasks: {}", message_of(&e))],
        }
    }

    /// Saves each task container's logs as `dir/agent-swarm-<slot>.log`,
    /// as a local agent's log is kept: before the service (and its
    /// containers with it) is removed.
    pub async fn save_service_logs(&self, service: &str, dir: &Path) -> anyhow::Result<()> {
        let filters = HashMap::from([("label".to_string(), vec![format!("com.docker.swarm.service.name={service}")])]);
        let options = ListContainersOptionsBuilder::new().all(true).filters(&filters).build();
        let containers = self
            .api
            .list_containers(Some(options))
            .await
            .map_err(|e| anyhow!("listing swarm service `{service}`'s containers: {}", message_of(&e)))?;
        for c in containers {
            let labels = c.labels.unwrap_or_default();
            let slot = labels.get("com.docker.swarm.task.name").and_then(|t| t.split('.').nth(1)).unwrap_or("unknown");
            let container = crate::Container { id: c.id.unwrap_or_default(), name: format!("{service}.{slot}") };
            self.save_logs(&container, &dir.join(format!("agent-swarm-{slot}.log"))).await?;
        }
        Ok(())
    }

    /// Removes a service and its key's secret, and waits (up to 30 s)
    /// until the swarm has removed its tasks' containers too: a run that
    /// ends leaves nothing.
    pub async fn remove_service(&self, name: &str) -> anyhow::Result<()> {
        match self.api.delete_service(name).await {
            Ok(()) => {}
            Err(e) if status_of(&e) == Some(404) => {}
            Err(e) => return Err(anyhow!("removing swarm service `{name}`: {}", message_of(&e))),
        }
        // The service held the secret: it goes once the service is gone.
        match self.api.delete_secret(&key_secret(name)).await {
            Ok(()) => {}
            Err(e) if status_of(&e) == Some(404) => {}
            Err(e) => return Err(anyhow!("removing swarm secret `{}`: {}", key_secret(name), message_of(&e))),
        }
        let filters = HashMap::from([("label".to_string(), vec![format!("com.docker.swarm.service.name={name}")])]);
        let options = ListContainersOptionsBuilder::new().all(true).filters(&filters).build();
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            match self.api.list_containers(Some(options.clone())).await {
                Ok(left) if left.is_empty() => return Ok(()),
                Ok(left) if tokio::time::Instant::now() >= deadline => {
                    bail!(
                        "swarm service `{name}` removed, but {} of its containers are still there after 30s",
                        left.len()
                    )
                }
                Ok(_) => tokio::time::sleep(std::time::Duration::from_millis(200)).await,
                Err(e) => bail!("listing swarm service `{name}`'s containers: {}", message_of(&e)),
            }
        }
    }

    /// The swarm services carrying faultline's labels (all, or one run's).
    pub(crate) async fn owned_services(
        &self,
        filters: &HashMap<String, Vec<String>>,
    ) -> anyhow::Result<Vec<(String, HashMap<String, String>)>> {
        // A plain engine (not a swarm manager) has no services to list.
        if self.api.inspect_swarm().await.is_err() {
            return Ok(Vec::new());
        }
        let services = self
            .api
            .list_services(Some(ListServicesOptionsBuilder::new().filters(filters).build()))
            .await
            .map_err(|e| anyhow!("cannot list swarm services: {}", message_of(&e)))?;
        Ok(services
            .into_iter()
            .filter_map(|s| {
                let spec = s.spec?;
                Some((spec.name?, spec.labels.unwrap_or_default()))
            })
            .collect())
    }
}

/// The container an agent image is made in: removed when done, or on drop
/// (from a thread of its own, as the drop may come inside a runtime).
struct Scratch {
    docker: Docker,
    id: Option<String>,
}

impl Scratch {
    async fn remove(mut self) {
        if let Some(id) = self.id.take() {
            remove_scratch(&self.docker, &id).await;
        }
    }
}

async fn remove_scratch(docker: &Docker, id: &str) {
    let options = RemoveContainerOptionsBuilder::new().force(true).build();
    let _ = docker.api.remove_container(id, Some(options)).await;
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            let docker = self.docker.clone();
            let removing = std::thread::spawn(move || {
                if let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    runtime.block_on(remove_scratch(&docker, &id));
                }
            });
            let _ = removing.join();
        }
    }
}

/// A tar archive of one executable file.
fn tar_of(name: &str, bytes: &[u8]) -> Vec<u8> {
    let mut header = [0u8; 512];
    header[..name.len()].copy_from_slice(name.as_bytes());
    let octal = |field: &mut [u8], value: u64| {
        let text = format!("{value:0width$o}\0", width = field.len() - 1);
        field.copy_from_slice(text.as_bytes());
    };
    octal(&mut header[100..108], 0o755);
    octal(&mut header[108..116], 0);
    octal(&mut header[116..124], 0);
    octal(&mut header[124..136], bytes.len() as u64);
    octal(&mut header[136..148], 0);
    header[156] = b'0';
    header[257..263].copy_from_slice(b"ustar\0");
    header[263..265].copy_from_slice(b"00");
    // The checksum is taken with its own field as spaces.
    header[148..156].copy_from_slice(b"        ");
    let sum: u64 = header.iter().map(|b| u64::from(*b)).sum();
    let text = format!("{sum:06o}\0 ");
    header[148..156].copy_from_slice(text.as_bytes());
    let mut tar = header.to_vec();
    tar.extend_from_slice(bytes);
    tar.resize(tar.len().div_ceil(512) * 512 + 1024, 0);
    tar
}

#[cfg(test)]
mod tar_tests {
    use super::tar_of;

    /// The archive is what `tar` itself reads: one executable file.
    #[test]
    fn tar_reads_the_archive_back() {
        let dir = tempfile::tempdir().unwrap();
        let archive = dir.path().join("a.tar");
        std::fs::write(&archive, tar_of("faultline", b"#!/bin/sh\necho hi\n")).unwrap();
        let listed = std::process::Command::new("tar").arg("-tvf").arg(&archive).output().unwrap();
        let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
        assert!(listed.starts_with("-rwxr-xr-x") && listed.trim_end().ends_with("faultline"), "{listed}");
        let out =
            std::process::Command::new("tar").arg("-xf").arg(&archive).arg("-C").arg(dir.path()).status().unwrap();
        assert!(out.success());
        assert_eq!(std::fs::read(dir.path().join("faultline")).unwrap(), b"#!/bin/sh\necho hi\n");
    }
}
