//! Against the real engine and the real faultline/redis image (build it with
//! `sudo fixtures/images/build.sh redis`): every container operation and its
//! confirmation, readiness waits, limits, the drop guard, and role
//! resolution through the docker provider. Specs are loaded against a
//! catalog of the Redis kind alone (the build's list of kinds is the
//! runner's). Each test's containers and network carry a run label of its
//! own and every count is of that label, so the tests run side by side.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use super::*;
use faultline_model::ops::TargetKind;
use faultline_spec::{Catalog, KindInfo, Spec};

/// The Redis kind, the one these tests' targets are (and no checker: these
/// specs name none).
struct RedisOnly;

impl Catalog for RedisOnly {
    fn checkers(&self) -> &[&'static dyn faultline_spec::CheckerInfo] {
        &[]
    }

    fn names(&self) -> Vec<&'static str> {
        vec![faultline_kind_redis::KIND.name]
    }

    fn options_schema(&self, _: &str, generator: &mut schemars::SchemaGenerator) -> Option<schemars::Schema> {
        faultline_kind_redis::KIND.options.map(|schema_of| schema_of(generator))
    }

    fn kind(
        &self,
        kind: &TargetKind,
        options: Option<&serde_json::Value>,
    ) -> Result<Arc<dyn KindInfo>, faultline_spec::options::OptionsError> {
        assert_eq!(kind.as_str(), faultline_kind_redis::KIND.name);
        (faultline_kind_redis::KIND.driver)(options).map(|d| d as Arc<dyn KindInfo>)
    }

    fn kind_faults(&self, _: &TargetKind) -> Vec<&'static dyn faultline_spec::FaultType> {
        Vec::new()
    }

    /// This crate's container faults; no process target in these specs.
    fn provider_faults(&self, provider: faultline_spec::ProviderKind) -> Vec<&'static dyn faultline_spec::FaultType> {
        match provider {
            faultline_spec::ProviderKind::Docker => fault::declared(),
            _ => Vec::new(),
        }
    }
}

/// A spec loaded against the Redis kind.
pub(crate) fn parse(path: &str, yaml: &str) -> Spec {
    faultline_spec::parse(std::path::Path::new(path), yaml, &[], &RedisOnly).unwrap().spec
}

pub(crate) const IMAGE: &str = "faultline/redis:bookworm";

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

fn unique(what: &str) -> String {
    format!("unit-{what}-{}-{:x}", std::process::id(), std::time::UNIX_EPOCH.elapsed().unwrap().as_millis() & 0xffffff)
}

fn redis_spec(labels: &Labels, network: &Network, host: &str) -> ContainerSpec {
    let mut l = labels.to_map();
    l.insert(MEMBER_LABEL.into(), host.into());
    ContainerSpec {
        binds: Vec::new(),
        name: format!("fl-{}-{host}", labels.run),
        hostname: host.into(),
        image: IMAGE.into(),
        cmd: ["redis-server", "--protected-mode", "no", "--save", "", "--appendonly", "no"].map(String::from).to_vec(),
        env: vec!["GREETING=hello there".into()],
        labels: l,
        memory: Some(64 << 20),
        cpus: Some(0.5),
        tmpfs: vec![("/data".into(), "size=8m".into())],
        cap_add: vec!["NET_ADMIN".into()],
        network: network.name.clone(),
        aliases: vec![host.into()],
    }
}

fn argv(s: &str) -> Vec<String> {
    vec!["sh".into(), "-c".into(), s.into()]
}

/// PING over a fresh connection from the host: answered (within a limit
/// only a hang reaches, for a 0.5-CPU container on a busy machine)...
async fn host_ping(ip: Ipv4Addr) -> Result<(), String> {
    host_ping_within(ip, Duration::from_secs(30)).await
}

/// ...or not answered within a short time, where nothing can answer (a
/// paused or disconnected member): a busy machine only makes that likelier.
async fn host_ping_fails(ip: Ipv4Addr) -> bool {
    host_ping_within(ip, Duration::from_millis(1500)).await.is_err()
}

async fn host_ping_within(ip: Ipv4Addr, limit: Duration) -> Result<(), String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let attempt = async {
        let mut s = tokio::net::TcpStream::connect((ip, 6379)).await.map_err(|e| e.to_string())?;
        s.write_all(b"PING\r\n").await.map_err(|e| e.to_string())?;
        let mut buf = [0u8; 7];
        s.read_exact(&mut buf).await.map_err(|e| e.to_string())?;
        if &buf == b"+PONG\r\n" {
            Ok(())
        } else {
            Err(format!("{:?}", String::from_utf8_lossy(&buf)))
        }
    };
    tokio::time::timeout(limit, attempt).await.map_err(|_| "timed out".to_string())?
}

/// Whether `from` reaches `to_ip`'s redis over the network.
async fn peer_ping(d: &Docker, from: &Container, to_ip: Ipv4Addr) -> bool {
    let out = d.exec(from, &argv(&format!("timeout 2 redis-cli -h {to_ip} ping")), Duration::from_secs(5)).await;
    out.is_ok_and(|o| o.exit_code == 0 && o.stdout.trim() == "PONG")
}

#[test]
fn every_container_operation_is_confirmed() {
    runtime().block_on(async {
        let d = Docker::connect().await.unwrap();
        d.require_image(IMAGE).await.unwrap();
        let labels = Labels::target(&unique("ops"), "t");
        let net = d.create_network(&format!("fl-{}", labels.run), &labels, true).await.unwrap();
        let a = d.run(&redis_spec(&labels, &net, "t-0")).await.unwrap();
        let b = d.run(&redis_spec(&labels, &net, "t-1")).await.unwrap();
        let result = async {
            // Readiness: each kind of check.
            d.wait_ready(&a, &ReadyCheck::Command(vec!["redis-cli".into(), "ping".into()]), Duration::from_secs(10))
                .await?;
            d.wait_ready(&a, &ReadyCheck::Port { network: net.name.clone(), port: 6379 }, Duration::from_secs(10))
                .await?;
            d.wait_ready(&b, &ReadyCheck::Log("Ready to accept connections".into()), Duration::from_secs(10)).await?;
            let err = d.wait_ready(&a, &ReadyCheck::Log("no such line".into()), Duration::from_millis(600)).await;
            assert!(format!("{:#}", err.unwrap_err()).contains("was not ready within 600ms"));

            // exec: exit code, stdout and stderr apart; env, limits and tmpfs as asked.
            let out = d.exec(&a, &argv("echo \"$GREETING\"; echo oops >&2; exit 3"), Duration::from_secs(5)).await?;
            assert_eq!(out, ExecOutput { exit_code: 3, stdout: "hello there\n".into(), stderr: "oops\n".into() });
            let mounts = d.exec_ok(&a, &argv("grep ' /data ' /proc/mounts"), Duration::from_secs(5)).await?;
            assert!(mounts.stdout.starts_with("tmpfs /data tmpfs"), "{}", mounts.stdout);
            let inspect = d.api().inspect_container(&a.id, None).await?;
            let host = inspect.host_config.unwrap();
            assert_eq!((host.memory, host.nano_cpus), (Some(64 << 20), Some(500_000_000)));
            assert!(inspect.config.unwrap().labels.unwrap().get(RUN_LABEL) == Some(&labels.run));

            let ip_a = d.ip_on(&a, &net.name).await?.unwrap();
            let ip_b = d.ip_on(&b, &net.name).await?.unwrap();
            assert!(host_ping(ip_a).await.is_ok(), "the host reaches a container on an internal network");
            assert!(peer_ping(&d, &b, ip_a).await);

            // pause / unpause
            let c = d.pause(&a).await?;
            assert!(d.state(&a).await?.paused, "{c:?}");
            assert!(host_ping_fails(ip_a).await, "a paused server does not answer");
            d.unpause(&a).await?;
            assert!(!d.state(&a).await?.paused);
            assert!(d.unpause(&a).await?.evidence.starts_with("was not paused"));
            assert!(host_ping(ip_a).await.is_ok());

            // isolate: peers cut off both ways, the host still reaches it.
            let c = d.isolate(&a, &net).await?;
            assert!(c.evidence.contains(&net.subnet) && c.evidence.contains(&net.gateway.to_string()), "{c:?}");
            assert!(!peer_ping(&d, &b, ip_a).await, "a peer still reaches the isolated member");
            assert!(!peer_ping(&d, &a, ip_b).await, "the isolated member still reaches a peer");
            assert!(host_ping(ip_a).await.is_ok(), "the clients' host must still reach it");
            d.rejoin(&a).await?;
            assert!(peer_ping(&d, &b, ip_a).await);
            assert!(d.rejoin(&a).await.is_ok(), "rejoin twice is harmless");

            // disconnect / reconnect
            let c = d.disconnect(&a, &net).await?;
            assert!(!d.state(&a).await?.networks.contains_key(&net.name), "{c:?}");
            assert!(host_ping_fails(ip_a).await, "nothing reaches a disconnected member");
            assert!(!peer_ping(&d, &b, ip_a).await);
            let c = d.reconnect(&a, &net, &["t-0".into()]).await?;
            let ip_again = d.ip_on(&a, &net.name).await?.expect("an address again");
            assert!(host_ping(ip_again).await.is_ok(), "{c:?}");
            assert!(peer_ping(&d, &b, ip_again).await);
            let by_alias = d.exec(&b, &argv("redis-cli -h t-0 ping"), Duration::from_secs(5)).await?;
            assert_eq!(by_alias.stdout.trim(), "PONG", "the alias is back: {by_alias:?}");

            // kill / start / stop / restart
            let c = d.kill(&a, "SIGKILL").await?;
            let s = d.state(&a).await?;
            assert!(!s.running && s.exit_code == 137, "{c:?} {s}");
            d.start(&a).await?;
            assert!(d.state(&a).await?.running);
            assert!(d.start(&a).await?.evidence.starts_with("already running"));
            d.stop(&a, Duration::from_secs(2)).await?;
            assert!(!d.state(&a).await?.running);
            d.start(&a).await?;
            let before = d.state(&a).await?.started_at;
            d.restart(&a, Duration::from_secs(1)).await?;
            let after = d.state(&a).await?;
            assert!(after.running && after.started_at != before);
            // As PID 1, redis-server ignores SIGTERM until it has installed
            // its handler: signal it once it answers.
            let ip = d.ip_on(&a, &net.name).await?.expect("an address after the restart");
            let restarted = std::time::Instant::now();
            while host_ping_fails(ip).await {
                assert!(restarted.elapsed() < Duration::from_secs(60), "not answering after the restart");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let c = d.kill(&a, "SIGTERM").await?;
            assert!(!d.state(&a).await?.running, "{c:?}");
            // Operations on a stopped container fail and say so.
            let err = d.pause(&a).await.unwrap_err();
            assert!(format!("{err:#}").contains("cannot pause"), "{err:#}");
            anyhow::Ok(())
        }
        .await;
        let removed = d.remove_labeled(&labels).await;
        result.unwrap();
        assert_eq!((removed.containers.len(), removed.networks.len()), (2, 1), "{removed:?}");
        assert!(removed.errors.is_empty(), "{removed:?}");
        assert!(d.list_owned(Some(&labels.run)).await.unwrap().is_empty());
    });
}

#[test]
fn the_drop_guard_removes_everything_when_a_task_panics() {
    runtime().block_on(async {
        let d = Docker::connect().await.unwrap();
        let labels = Labels::run(&unique("guard"));
        let task = {
            let (d, labels) = (d.clone(), labels.clone());
            tokio::spawn(async move {
                let _guard = TeardownGuard::new(labels.clone());
                let net = d.create_network(&format!("fl-{}", labels.run), &labels, true).await.unwrap();
                d.run(&redis_spec(&labels, &net, "g-0")).await.unwrap();
                assert_eq!(d.list_owned(Some(&labels.run)).await.unwrap().len(), 2);
                panic!("a bug while the target is up");
            })
        };
        assert!(task.await.unwrap_err().is_panic());
        assert!(d.list_owned(Some(&labels.run)).await.unwrap().is_empty(), "the guard left resources behind");
    });
}

#[test]
fn a_missing_image_says_how_to_build_it() {
    runtime().block_on(async {
        let d = Docker::connect().await.unwrap();
        let err = d.require_image("faultline/nosuch:bookworm").await.unwrap_err().to_string();
        assert!(err.contains("sudo fixtures/images/build.sh nosuch") && err.contains("never pulls"), "{err}");
        let err = d.require_image("example.org/other:1").await.unwrap_err().to_string();
        assert!(err.contains("docker load"), "{err}");
    });
}

mod roles {
    use super::*;
    use faultline_model::roles::Role;
    use faultline_spec::selector::Selector;

    const SPEC: &str = r#"name: roles
targets:
  kv:
    kind: redis
    provider: docker
    image: faultline/redis:bookworm
    members: 3
    ready_timeout: 30s
    companions:
      sentinels:
        count: 1
        port: 26379
        command: sh
        args: ["-c", "printf 'port 26379\nsentinel monitor kv {primary_ip} {port} {quorum}\n' > /tmp/s.conf && exec redis-sentinel /tmp/s.conf"]
workloads:
  w: {ops: {get: 1}}
profiles:
  p: {closed: 1x1}
scenarios:
  - {name: s, target: kv, workload: w, profiles: [p]}
"#;

    fn names(members: &[crate::members::Member]) -> Vec<&str> {
        members.iter().map(|m| m.name.as_str()).collect()
    }

    /// Roles are asked of the servers when resolved, so a promotion shows at once.
    #[test]
    fn roles_are_resolved_at_the_moment_they_are_asked_for() {
        let spec = parse("roles.yaml", SPEC);
        let dir = tempfile::tempdir().unwrap();
        let log_dir = dir.path().join("roles-run").join("logs");
        std::fs::create_dir_all(&log_dir).unwrap();
        runtime().block_on(async {
            let t = &spec.targets["kv"];
            let driver = (faultline_kind_redis::KIND.driver)(None).unwrap();
            let members = (faultline_kind_redis::KIND.members.expect("redis runs in containers"))();
            let target = crate::provider::start("kv", t, driver, members, &log_dir, None).await.unwrap();
            let topo = Arc::clone(&target.target.topology);
            let result = async {
                assert_eq!(topo.primary().await?.name, "kv-0");
                assert_eq!(names(&topo.resolve(&Selector::Replicas, 0).await?), ["kv-1", "kv-2"]);
                assert_eq!(names(&topo.resolve(&Selector::Member(2), 0).await?), ["kv-2"]);
                let sentinel = topo.resolve(&Selector::GroupMember("sentinels".into(), 0), 0).await?.remove(0);
                assert_eq!(topo.uri(&sentinel).await?, format!("redis://{}:26379", topo.ip(&sentinel).await?));
                let ask =
                    d_exec(&topo, "kv-sentinels-0", "redis-cli -p 26379 sentinel get-master-addr-by-name kv").await?;
                assert_eq!(ask.lines().next(), Some(topo.ip(&topo.members[0]).await?.to_string().as_str()));
                assert!(target.uri.ends_with(":6379") && target.server.version.starts_with("redis 7"));

                // A replica promoted by hand: two primaries now (a split brain), said as such.
                d_exec(&topo, "kv-1", "redis-cli replicaof no one").await?;
                assert_eq!(names(&topo.resolve(&Selector::Primary, 0).await?), ["kv-0", "kv-1"]);
                let err = topo.primary().await.unwrap_err().to_string();
                assert!(err.contains("has 2 primaries now: kv-0, kv-1"), "{err}");

                // A paused member answers nothing within the ask's limit (5 s,
                // the one a fault's selector is resolved with); the rest answer.
                topo.docker.pause(&topo.members[0].container).await?;
                let roles = topo.roles().await;
                assert!(roles[0].1.is_err() && roles[1].1.as_ref().ok() == Some(&Role::Primary), "{roles:?}");
                assert_eq!(topo.primary().await?.name, "kv-1");
                // Faults still in force at the end (a paused member, a cut one) do not stop the teardown.
                topo.docker.isolate(&topo.members[2].container, &topo.network).await?;
                anyhow::Ok(())
            }
            .await;
            assert_eq!(target.target.stop().await, Vec::<String>::new());
            result.unwrap();
            let d = Docker::connect().await.unwrap();
            let left = d.list_owned(Some(&faultline_kind::ledger::run_id(&log_dir))).await.unwrap();
            assert!(left.is_empty(), "{left:?}");
            for log in ["kv-0.log", "kv-2.log", "kv-sentinels-0.log"] {
                assert!(log_dir.join("kv").join(log).is_file(), "{log} not saved");
            }
        });
    }

    const DISK_SPEC: &str = r#"name: disk
targets:
  kv:
    kind: redis
    provider: docker
    image: faultline/redis:bookworm
    args: [--appendonly, "yes", --appendfsync, "FSYNC"]
workloads:
  w: {ops: {set: 1}}
profiles:
  p: {closed: 1x1}
scenarios:
  - {name: s, target: kv, workload: w, profiles: [p]}
"#;

    /// A member's data on the fault filesystem, bound into its container:
    /// a power loss throws away what Redis had not fsynced (`appendfsync
    /// no`) and keeps what it had (`always`); a full disk is what the
    /// server inside sees, until it heals.
    #[test]
    fn a_members_data_on_the_fault_filesystem_loses_only_what_was_not_fsynced() {
        // The power loss mounts afresh: the restarted container binds the new mount.
        let write_back =
            faultline_faultfs::Layer { caching: faultline_model::faults::Caching::WriteBack, strict_names: false };
        for (fsync, kept) in [("always", "5"), ("no", "0")] {
            let spec = parse("disk.yaml", &DISK_SPEC.replace("FSYNC", fsync));
            let dir = tempfile::tempdir().unwrap();
            let log_dir = dir.path().join("disk-run").join("logs");
            std::fs::create_dir_all(&log_dir).unwrap();
            let data = dir.path().join("disk-run/targets/kv");
            runtime().block_on(async {
                let t = &spec.targets["kv"];
                let driver = (faultline_kind_redis::KIND.driver)(None).unwrap();
                let members = (faultline_kind_redis::KIND.members.expect("redis runs in containers"))();
                let target = crate::provider::start("kv", t, driver, members, &log_dir, Some((&data, write_back)))
                    .await
                    .unwrap();
                let topo = Arc::clone(&target.target.topology);
                let fault = |action: &str| -> faultline_spec::FaultSpec {
                    serde_json::from_value(
                        serde_json::json!({"name": "f", "at": "1s", "action": action, "target": "kv.member[0]"}),
                    )
                    .unwrap()
                };
                let result = async {
                    d_exec(&topo, "kv-0", "sh -c 'for i in 1 2 3 4 5; do redis-cli set k$i v; done'").await?;
                    let applied = crate::fault::apply(&topo, &fault("power-loss"), &spec).await?;
                    assert!(applied.evidence.contains("thrown away") && applied.undo.is_none(), "{}", applied.evidence);
                    let mut answer = String::new();
                    for _ in 0..100 {
                        answer = d_exec(&topo, "kv-0", "redis-cli dbsize").await.unwrap_or_default();
                        if !answer.trim().is_empty() && !answer.contains("LOADING") {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    assert_eq!(answer.trim(), kept, "appendfsync {fsync}: {}", applied.evidence);
                    let full = crate::fault::apply(&topo, &fault("disk-full"), &spec).await?;
                    assert!(full.evidence.contains("ENOSPC"), "{}", full.evidence);
                    let refused =
                        d_exec(&topo, "kv-0", "sh -c 'exec 2>&1; echo x > /faultline-data/probe; echo $?'").await?;
                    assert!(refused.contains("No space left on device"), "{refused}");
                    let healed = full.undo.unwrap().heal().await?;
                    assert!(healed.evidence.contains("healthy"), "{}", healed.evidence);
                    anyhow::Ok(())
                }
                .await;
                assert_eq!(target.target.stop().await, Vec::<String>::new());
                result.unwrap();
                let mounted = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
                assert!(!mounted.contains(&data.display().to_string()), "unmounted when the target stopped");
            });
        }
    }

    async fn d_exec(topo: &crate::members::Topology, name: &str, cmd: &str) -> anyhow::Result<String> {
        let m = topo.all().find(|m| m.name == name).unwrap();
        Ok(topo.docker.exec_ok(&m.container, &argv(cmd), Duration::from_secs(10)).await?.stdout)
    }
}
