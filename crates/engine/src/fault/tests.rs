//! The fault registry and the scheduler's ledger, proven with a fault that
//! exists only here: `mark`, a kind's own fault of a kind that exists only
//! here (`marker`), registered the way MongoDB registers `stepdown`. The
//! spec loader takes it from the registration (its fields, that it heals),
//! the scheduler applies it at its time and heals it through the undo it
//! returned, exactly once, also when another fault's apply fails.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::run_schedule;
use crate::provider::RunningTarget;
use crate::spec::{Action, Registered};
use faultline_kind::fault::{Applied, Apply, Fault, Healed, KindFaults, Server, Undo};
use faultline_kind::registry::{Kind, Kinds, Listed};
use faultline_kind::{Connection, ServerInfo, TargetDriver};

/// Appends `applied NAME` to its log for each server; undone by appending
/// `healed NAME`. `fail: true` fails after the first server, half-way, and
/// undoes what it did, as a backend must: a failed fault leaves nothing in
/// force, so the ledger has nothing to heal for it.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Mark {
    log: String,
    #[serde(default)]
    fail: bool,
}

impl Action for Mark {
    const NAME: &'static str = "mark";
    const HEALS: bool = true;
}

fn append(log: &str, line: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(log)?;
    Ok(writeln!(file, "{line}")?)
}

#[async_trait::async_trait]
impl Apply<[Server]> for Mark {
    async fn apply(&self, on: &[Server]) -> anyhow::Result<Applied> {
        for (i, server) in on.iter().enumerate() {
            append(&self.log, &format!("applied {}", server.name))?;
            if self.fail {
                Unmark { log: self.log.clone(), servers: on[..=i].to_vec() }.heal().await?;
                anyhow::bail!("the marker failed half-way");
            }
        }
        let hit = on.iter().map(|s| s.name.clone()).collect();
        Ok(Applied::undone_by(
            hit,
            format!("marked {}", on.len()),
            Unmark { log: self.log.clone(), servers: on.to_vec() },
        ))
    }
}

struct Unmark {
    log: String,
    servers: Vec<Server>,
}

#[async_trait::async_trait]
impl Undo for Unmark {
    async fn heal(&self) -> anyhow::Result<Healed> {
        for server in &self.servers {
            append(&self.log, &format!("healed {}", server.name))?;
        }
        Ok(format!("unmarked {}", self.servers.len()).into())
    }
}

static MARKS: &[&dyn Fault<[Server]>] = &[&Registered::<Mark>::NEW];

/// A kind whose only capability is its own fault.
struct Marker;

crate::test_kind::kind_info_for_tests!(Marker, command: "true", supports: |_| true);

#[async_trait::async_trait]
impl TargetDriver for Marker {
    fn listen_args(&self, _: u16, _: &Path) -> Vec<String> {
        Vec::new()
    }
    fn uri(&self, host: &str, port: u16) -> String {
        format!("marker://{host}:{port}")
    }
    async fn ready(&self, _: &str) -> anyhow::Result<ServerInfo> {
        Ok(ServerInfo { version: "marker".into() })
    }
    async fn connect(&self, _: &str, _: Arc<faultline_kind::workload::Workload>) -> anyhow::Result<Connection> {
        anyhow::bail!("the marker kind takes no load")
    }
    async fn read_values(&self, _: &str, keys: &[Vec<u8>]) -> anyhow::Result<Vec<Option<Vec<u8>>>> {
        Ok(vec![None; keys.len()])
    }
    fn kind_faults(&self) -> Option<&dyn KindFaults> {
        Some(self)
    }
}

#[async_trait::async_trait]
impl KindFaults for Marker {
    async fn apply(
        &self,
        action: &str,
        fields: &faultline_spec::fault::Fields,
        servers: &[Server],
    ) -> anyhow::Result<Applied> {
        faultline_kind::fault::apply(MARKS, "marker", action, fields, servers).await
    }
}

static HELD: [Listed; 1] = [Listed::Held(Kind {
    name: "marker",
    driver: |_| Ok(Arc::new(Marker)),
    members: None,
    options: None,
    faults: || faultline_kind::fault::declared(MARKS),
    remove_listed: None,
})];

static KINDS: Kinds = Kinds { kinds: &HELD, checkers: || &[], provider_faults: super::provider_faults };

fn spec(faults: &str) -> Result<crate::spec::Spec, crate::spec::SpecError> {
    let text = format!(
        "name: registry\ntargets:\n  m: {{kind: marker, provider: external, uri: 'marker://127.0.0.1:1'}}\n\
         workloads:\n  w: {{ops: {{get: 1}}}}\nprofiles:\n  p: {{closed: 1x1}}\n\
         scenarios:\n  - name: s\n    target: m\n    workload: w\n    profiles: [p]\n    faults:\n{faults}"
    );
    crate::spec::parse(Path::new("registry.yaml"), &text, &[], &KINDS).map(|loaded| loaded.spec)
}

#[test]
fn the_spec_loader_knows_a_registered_fault_by_its_registration() {
    let every: Vec<&str> = crate::spec::Catalog::every_fault(&KINDS).iter().map(|f| f.name()).collect();
    assert!(every.contains(&"mark") && every.contains(&"kill") && every.contains(&"isolate"), "{every:?}");
    assert!(spec("      - {name: f, at: 1s, action: mark, target: m, log: x, heal_after: 1s}\n").is_ok());
    let e = spec("      - {name: f, at: 1s, action: mark, target: m, log: x, colour: red}\n").unwrap_err();
    assert_eq!(e.field.as_deref(), Some("scenarios[0].faults[0].colour"));
    assert!(e.message.starts_with("unknown field `colour`, expected one of"), "{e}");
    assert!(e.message.contains("`log`") && e.message.contains("`fail`"), "{e}");
    let e = spec("      - {name: f, at: 1s, action: mark, target: m}\n").unwrap_err();
    assert_eq!(e.field.as_deref(), Some("scenarios[0].faults[0]"), "{e}");
    assert!(e.message.contains("missing field `log`"), "{e}");
    // The provider's faults are not an external target's.
    let e = spec("      - {name: f, at: 1s, action: kill, target: m}\n").unwrap_err();
    assert_eq!(e.message, "`m` is external: faultline can only send it its kind's own faults (marker's: mark)");
}

/// A kind registered without a topology (`members: None`) runs in no
/// container: `provider: docker` is a spec error naming the field.
#[test]
fn a_kind_without_a_topology_is_refused_on_docker() {
    let text = "name: n\ntargets:\n  m: {kind: marker, provider: docker, image: x}\nworkloads:\n  w: {ops: {get: 1}}\n\
                profiles:\n  p: {closed: 1x1}\nscenarios:\n  - {name: s, target: m, workload: w, profiles: [p]}\n";
    let e = crate::spec::parse(Path::new("docker.yaml"), text, &[], &KINDS).map(drop).expect_err("refused");
    assert_eq!(e.field.as_deref(), Some("targets.m.provider"), "{e}");
    assert!(e.message.contains("`marker` targets run in no container"), "{e}");
}

#[tokio::test]
async fn the_ledger_heals_each_applied_fault_once_through_its_own_undo() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("marks.log");
    let log = log.to_str().unwrap();
    let spec = spec(&format!(
        "      - {{name: early, at: 0s, action: mark, target: m, log: '{log}', heal_after: 50ms}}\n\
         \x20     - {{name: broken, at: 20ms, action: mark, target: m, log: '{log}', fail: true}}\n\
         \x20     - {{name: late, at: 40ms, action: mark, target: m, log: '{log}'}}\n"
    ))
    .unwrap();
    let target = RunningTarget::reached("m", "marker://127.0.0.1:1", Arc::new(Marker));
    let start = Instant::now();
    let faults = &spec.scenarios[0].faults;
    let stop_at = start + Duration::from_millis(300);
    let records = run_schedule(&spec, &KINDS, &target, faults, start, stop_at, CancellationToken::new()).await;

    let by_name = |name: &str| records.iter().find(|r| r.name == name).unwrap();
    let early = by_name("early");
    assert_eq!((early.action.as_str(), early.hit.as_slice()), ("mark", &["m".to_string()][..]));
    assert_eq!((early.evidence.as_str(), early.heal_evidence.as_str()), ("marked 1", "unmarked 1"));
    let (confirmed, healed) = (early.confirmed_s.unwrap(), early.healed_s.unwrap());
    assert!(healed - confirmed >= 0.05 && healed < 0.3, "healed after heal_after, before the end: {early:?}");
    let broken = by_name("broken");
    assert!(broken.confirmed_s.is_none() && broken.healed_s.is_none(), "{broken:?}");
    assert!(broken.error.as_deref().unwrap().contains("failed half-way"), "{broken:?}");
    let late = by_name("late");
    assert!(late.healed_s.unwrap() >= 0.3, "no heal_after: healed at the end of the cell: {late:?}");
    let lines = std::fs::read_to_string(log).unwrap();
    let want = "applied m\napplied m\nhealed m\napplied m\nhealed m\nhealed m\n";
    assert_eq!(lines, want, "each fault healed once: the broken one by itself, the others by the ledger");
}

/// Which instances run on the fault filesystem, and how: only those that
/// serve a scenario with a disk fault (a scenario with its own instance
/// keeps the layer to itself, so the others measure the bare disk);
/// write-through only for a fault that answers each write.
#[test]
fn only_an_instance_with_a_disk_fault_runs_on_the_layer_cached_as_its_faults_need() {
    let text = "name: layer\ntargets:\n  m: {kind: marker, provider: process, args: ['{mode}']}\n\
         workloads:\n  w: {ops: {get: 1}}\nprofiles:\n  p: {closed: 1x1}\n\
         scenarios:\n\
         \x20 - {name: bare, target: m, workload: w, profiles: [p], matrix: {mode: [a]}}\n\
         \x20 - name: out\n    target: m\n    workload: w\n    profiles: [p]\n    matrix: {mode: [a]}\n    faults:\n\
         \x20     - {name: p, at: 1s, action: power-loss, names: strict, target: m}\n      - {name: s, at: 1s, action: slow-disk, delay: 5ms, target: m}\n\
         \x20 - name: full\n    target: m\n    workload: w\n    profiles: [p]\n    matrix: {mode: [a]}\n    faults:\n\
         \x20     - {name: f, at: 1s, action: disk-error, on: write, target: m}\n";
    let loaded = crate::spec::parse(Path::new("layer.yaml"), text, &[], &KINDS).unwrap();
    let plan = crate::plan::build(&loaded, &crate::plan::PlanOptions::default()).unwrap();
    let layer = |scenario: &str| {
        let cell = plan.cells.iter().find(|c| c.scenario == scenario).unwrap();
        let its = plan.cells.iter().filter(|c| c.instance == cell.instance);
        super::fault_filesystem("m", its.map(|c| (c.spec(&loaded.spec), c.scenario.as_str())))
    };
    use faultline_faultfs::Layer;
    use faultline_model::faults::Caching::{WriteBack, WriteThrough};
    assert_eq!(layer("bare"), None);
    let out = Layer { caching: WriteBack, strict_names: true };
    assert_eq!(layer("out"), Some(out), "power loss and slow fsyncs: the kernel may cache; strict names kept");
    let full = Layer { caching: WriteThrough, strict_names: false };
    assert_eq!(layer("full"), Some(full), "failing writes: each must reach the layer");
}
