//! The container operations faults are made of. Each returns only once the
//! effect is observed (through `inspect`, or the packet filter's own
//! listing) and says what it saw; an effect that does not show within
//! [`CONFIRM_TIMEOUT`] is an error. The undoing operations (`start`,
//! `unpause`, `reconnect`, `rejoin`) succeed without doing anything when there
//! is nothing to undo, so a healing ledger may call them blindly.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use bollard::exec::{CreateExecOptions, StartExecResults};
use bollard::models::{EndpointSettings, NetworkConnectRequest, NetworkDisconnectRequest};
use bollard::query_parameters::{
    KillContainerOptionsBuilder, RestartContainerOptionsBuilder, StopContainerOptionsBuilder,
};
use futures::StreamExt;

use crate::client::{message_of, Container, Docker, Network, State, CONFIRM_TIMEOUT};

/// What an operation observed, and how long from the request until it did.
#[derive(Debug, Clone)]
pub struct Confirmed {
    /// E.g. "paused", "not on network fl-…-kv (networks: none)".
    pub evidence: String,
    pub took: Duration,
}

/// The result of a command run inside a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutput {
    pub exit_code: i64,
    pub stdout: String,
    pub stderr: String,
}

impl ExecOutput {
    pub fn combined(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

/// The chains `isolate` installs in the container's own network namespace.
const CHAIN_IN: &str = "FAULTLINE-IN";
const CHAIN_OUT: &str = "FAULTLINE-OUT";

impl Docker {
    /// Polls `inspect` until `done` says yes; `what` names the expected state.
    async fn confirm(
        &self,
        c: &Container,
        what: &str,
        started: Instant,
        done: impl Fn(&State) -> bool,
    ) -> anyhow::Result<Confirmed> {
        let deadline = started + CONFIRM_TIMEOUT;
        loop {
            let state = self.state(c).await?;
            if done(&state) {
                return Ok(Confirmed { evidence: format!("{what}: {state}"), took: started.elapsed() });
            }
            if Instant::now() >= deadline {
                bail!(
                    "container `{}` was not {what} {} after the request; it is {state}",
                    c.name,
                    faultline_model::units::format_duration(CONFIRM_TIMEOUT)
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Sends `signal` (e.g. `SIGKILL`, `SIGTERM`, `KILL`) to the container's
    /// main process and waits until the container is no longer running.
    pub async fn kill(&self, c: &Container, signal: &str) -> anyhow::Result<Confirmed> {
        let started = Instant::now();
        self.signal(c, signal).await?;
        self.confirm(c, "stopped", started, |s| !s.running).await
    }

    /// Sends `signal` without waiting for any effect (for signals a server
    /// handles, such as SIGHUP); confirmed only in that Docker delivered it.
    pub async fn signal(&self, c: &Container, signal: &str) -> anyhow::Result<Confirmed> {
        let started = Instant::now();
        let options = KillContainerOptionsBuilder::new().signal(signal).build();
        self.api
            .kill_container(&c.id, Some(options))
            .await
            .map_err(|e| anyhow!("cannot send {signal} to `{}`: {}", c.name, message_of(&e)))?;
        Ok(Confirmed { evidence: format!("{signal} delivered"), took: started.elapsed() })
    }

    /// SIGTERM (the image's stop signal), SIGKILL after `grace`; waits until
    /// it is not running.
    pub async fn stop(&self, c: &Container, grace: Duration) -> anyhow::Result<Confirmed> {
        let started = Instant::now();
        let options = StopContainerOptionsBuilder::new().t(grace.as_secs() as i32).build();
        self.api
            .stop_container(&c.id, Some(options))
            .await
            .map_err(|e| anyhow!("cannot stop `{}`: {}", c.name, message_of(&e)))?;
        self.confirm(c, "stopped", started, |s| !s.running).await
    }

    /// Starts a stopped container; a running one is left alone.
    pub async fn start(&self, c: &Container) -> anyhow::Result<Confirmed> {
        let started = Instant::now();
        let state = self.state(c).await?;
        if state.running {
            return Ok(Confirmed { evidence: format!("already running: {state}"), took: started.elapsed() });
        }
        self.api
            .start_container(&c.id, None::<bollard::query_parameters::StartContainerOptions>)
            .await
            .map_err(|e| anyhow!("cannot start `{}`: {}", c.name, message_of(&e)))?;
        self.confirm(c, "running", started, |s| s.running).await
    }

    /// Stops (SIGKILL after `grace`) and starts again; confirmed by a new
    /// start time.
    pub async fn restart(&self, c: &Container, grace: Duration) -> anyhow::Result<Confirmed> {
        let started = Instant::now();
        let before = self.state(c).await?.started_at;
        let options = RestartContainerOptionsBuilder::new().t(grace.as_secs() as i32).build();
        self.api
            .restart_container(&c.id, Some(options))
            .await
            .map_err(|e| anyhow!("cannot restart `{}`: {}", c.name, message_of(&e)))?;
        self.confirm(c, "restarted", started, |s| s.running && s.started_at != before).await
    }

    /// Freezes every process of the container (cgroup freezer).
    pub async fn pause(&self, c: &Container) -> anyhow::Result<Confirmed> {
        let started = Instant::now();
        self.api.pause_container(&c.id).await.map_err(|e| anyhow!("cannot pause `{}`: {}", c.name, message_of(&e)))?;
        self.confirm(c, "paused", started, |s| s.paused).await
    }

    /// Thaws a paused container; one that is not paused is left alone.
    pub async fn unpause(&self, c: &Container) -> anyhow::Result<Confirmed> {
        let started = Instant::now();
        let state = self.state(c).await?;
        if !state.paused {
            return Ok(Confirmed { evidence: format!("was not paused: {state}"), took: started.elapsed() });
        }
        self.api
            .unpause_container(&c.id)
            .await
            .map_err(|e| anyhow!("cannot unpause `{}`: {}", c.name, message_of(&e)))?;
        self.confirm(c, "unpaused", started, |s| !s.paused).await
    }

    /// Takes the container off `network`: its address there is gone and
    /// nothing on that network reaches it (nor the host through it).
    pub async fn disconnect(&self, c: &Container, network: &Network) -> anyhow::Result<Confirmed> {
        let started = Instant::now();
        let request = NetworkDisconnectRequest { container: c.id.clone(), force: Some(false) };
        self.api
            .disconnect_network(&network.id, request)
            .await
            .map_err(|e| anyhow!("cannot disconnect `{}` from `{}`: {}", c.name, network.name, message_of(&e)))?;
        let name = network.name.clone();
        self.confirm(c, &format!("off network {name}"), started, |s| !s.networks.contains_key(&name)).await
    }

    /// Puts the container back on `network` under `aliases`; a container
    /// already on it is left alone. Docker may give it a new address: the
    /// evidence names it, and [`Docker::ip_on`] reads it.
    pub async fn reconnect(&self, c: &Container, network: &Network, aliases: &[String]) -> anyhow::Result<Confirmed> {
        let started = Instant::now();
        let state = self.state(c).await?;
        if state.networks.contains_key(&network.name) {
            return Ok(Confirmed {
                evidence: format!("already on {}: {state}", network.name),
                took: started.elapsed(),
            });
        }
        let request = NetworkConnectRequest {
            container: c.id.clone(),
            endpoint_config: Some(EndpointSettings { aliases: Some(aliases.to_vec()), ..Default::default() }),
        };
        self.api
            .connect_network(&network.id, request)
            .await
            .map_err(|e| anyhow!("cannot connect `{}` to `{}`: {}", c.name, network.name, message_of(&e)))?;
        let name = network.name.clone();
        // A stopped container joins without an address; it gets one at start.
        let running = state.running;
        self.confirm(c, &format!("on network {name}"), started, |s| {
            s.networks.get(&name).is_some_and(|ip| ip.is_some() || !running)
        })
        .await
    }

    /// Runs `cmd` inside the container; returns its exit code and output.
    /// A command still running after `timeout` is an error (it keeps
    /// running inside: Docker cannot kill an exec).
    pub async fn exec(&self, c: &Container, cmd: &[String], timeout: Duration) -> anyhow::Result<ExecOutput> {
        let shown = faultline_model::command_line::shown(cmd);
        let created = self
            .api
            .create_exec(
                &c.id,
                CreateExecOptions {
                    cmd: Some(cmd.to_vec()),
                    attach_stdout: Some(true),
                    attach_stderr: Some(true),
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| anyhow!("cannot run `{shown}` in `{}`: {}", c.name, message_of(&e)))?;
        let run = async {
            let mut out = ExecOutput { exit_code: -1, stdout: String::new(), stderr: String::new() };
            match self.api.start_exec(&created.id, None).await? {
                StartExecResults::Attached { mut output, .. } => {
                    while let Some(chunk) = output.next().await {
                        match chunk? {
                            bollard::container::LogOutput::StdErr { message } => {
                                out.stderr.push_str(&String::from_utf8_lossy(&message))
                            }
                            other => out.stdout.push_str(&String::from_utf8_lossy(other.as_ref())),
                        }
                    }
                }
                StartExecResults::Detached => {}
            }
            // The stream can end a moment before the engine records the exit code.
            loop {
                let inspect = self.api.inspect_exec(&created.id).await?;
                if inspect.running != Some(true) {
                    out.exit_code = inspect.exit_code.unwrap_or(-1);
                    return Ok::<_, bollard::errors::Error>(out);
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        match tokio::time::timeout(timeout, run).await {
            Ok(Ok(out)) => Ok(out),
            Ok(Err(e)) => Err(anyhow!("running `{shown}` in `{}` failed: {}", c.name, message_of(&e))),
            Err(_) => Err(anyhow!(
                "`{shown}` in `{}` did not finish within {}",
                c.name,
                faultline_model::units::format_duration(timeout)
            )),
        }
    }

    /// Like [`Docker::exec`], but a non-zero exit code is an error too.
    pub async fn exec_ok(&self, c: &Container, cmd: &[String], timeout: Duration) -> anyhow::Result<ExecOutput> {
        let out = self.exec(c, cmd, timeout).await?;
        if out.exit_code != 0 {
            bail!(
                "`{}` in `{}` exited with {}: {}",
                faultline_model::command_line::shown(cmd),
                c.name,
                out.exit_code,
                out.combined().trim()
            );
        }
        Ok(out)
    }

    /// Cuts the container off from every address of `network` except the
    /// gateway (the host, where faultline's clients run): its peers can no
    /// longer reach it nor it them, while the clients still can. Packet
    /// filter rules in the container's own network namespace; needs the
    /// `NET_ADMIN` capability (faultline's docker provider grants it).
    /// Established connections to peers stop too.
    pub async fn isolate(&self, c: &Container, network: &Network) -> anyhow::Result<Confirmed> {
        self.cut(c, std::slice::from_ref(&network.subnet), &[network.gateway.to_string()]).await
    }

    /// Drops all traffic between the container and the addresses (or CIDR
    /// ranges) in `peers`, except to and from those in `keep`. Replaces an
    /// earlier cut of the same container.
    pub async fn cut(&self, c: &Container, peers: &[String], keep: &[String]) -> anyhow::Result<Confirmed> {
        let started = Instant::now();
        for a in peers.iter().chain(keep) {
            valid_address(a)?;
        }
        let mut script = String::from("set -e\n");
        for (chain, hook) in [(CHAIN_IN, "INPUT"), (CHAIN_OUT, "OUTPUT")] {
            let dir = if hook == "INPUT" { "-s" } else { "-d" };
            script.push_str(&format!("iptables -N {chain} 2>/dev/null || iptables -F {chain}\n"));
            for k in keep {
                script.push_str(&format!("iptables -A {chain} {dir} {k} -j RETURN\n"));
            }
            for p in peers {
                script.push_str(&format!("iptables -A {chain} {dir} {p} -j DROP\n"));
            }
            script.push_str(&format!("iptables -C {hook} -j {chain} 2>/dev/null || iptables -I {hook} 1 -j {chain}\n"));
        }
        self.exec_ok(c, &sh(&script), Duration::from_secs(10)).await.map_err(|e| {
            anyhow!("{e:#} (cutting a container's links needs iptables in its image and the NET_ADMIN capability)")
        })?;
        // Confirm from the kernel's own listing that both chains drop and are hooked in.
        let rules = self.exec_ok(c, &sh("iptables -S"), Duration::from_secs(10)).await?.stdout;
        for (chain, hook) in [(CHAIN_IN, "INPUT"), (CHAIN_OUT, "OUTPUT")] {
            let hooked = rules.lines().any(|l| l == format!("-A {hook} -j {chain}"));
            let drops = peers.iter().all(|p| {
                rules.lines().any(|l| {
                    l.starts_with(&format!("-A {chain} "))
                        && l.ends_with("-j DROP")
                        && l.contains(p.split('/').next().unwrap_or(p))
                })
            });
            if !hooked || !drops {
                bail!("the packet filter of `{}` does not show the cut; its rules:\n{rules}", c.name);
            }
        }
        let kept = if keep.is_empty() { String::new() } else { format!(" except {}", keep.join(", ")) };
        Ok(Confirmed { evidence: format!("dropping traffic with {}{kept}", peers.join(", ")), took: started.elapsed() })
    }

    /// Removes a cut; a container without one is left alone.
    pub async fn rejoin(&self, c: &Container) -> anyhow::Result<Confirmed> {
        let started = Instant::now();
        let mut script = String::new();
        for (chain, hook) in [(CHAIN_IN, "INPUT"), (CHAIN_OUT, "OUTPUT")] {
            script.push_str(&format!(
                "while iptables -D {hook} -j {chain} 2>/dev/null; do :; done\niptables -F {chain} 2>/dev/null; iptables -X {chain} 2>/dev/null\n"
            ));
        }
        script.push_str("iptables -S");
        let rules = self.exec_ok(c, &sh(&script), Duration::from_secs(10)).await?.stdout;
        if rules.contains(CHAIN_IN) || rules.contains(CHAIN_OUT) {
            bail!("the packet filter of `{}` still shows the cut; its rules:\n{rules}", c.name);
        }
        Ok(Confirmed { evidence: "no faultline packet filter rules".into(), took: started.elapsed() })
    }
}

fn sh(script: &str) -> Vec<String> {
    vec!["sh".into(), "-c".into(), script.into()]
}

/// An IPv4 address or CIDR range; nothing else reaches a shell.
fn valid_address(a: &str) -> anyhow::Result<()> {
    let (ip, bits) = match a.split_once('/') {
        Some((ip, bits)) => (ip, Some(bits)),
        None => (a, None),
    };
    let ok = ip.parse::<Ipv4Addr>().is_ok() && bits.is_none_or(|b| b.parse::<u8>().is_ok_and(|b| b <= 32));
    if !ok {
        bail!("`{a}` is not an IPv4 address or CIDR range");
    }
    Ok(())
}
