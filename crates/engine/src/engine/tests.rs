//! Cells through every phase of the engine (bring-up, the window, merge,
//! summarize, judge, finish) against a kind that exists only here: an
//! in-memory key-value store behind the request interface, reached as an
//! external target. No server and no network, so a change to the cell's
//! path is caught in seconds, not only by the end-to-end suite. A lossy
//! variant acknowledges writes it then drops: the checkers' verdict is
//! earned from the history the lanes recorded, never assumed. The same
//! kind and [`Bench`] serve the tests of each phase alone (cell/tests.rs).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use super::cell::CellRun;
use super::load_threads::LoadThreads;
use super::place::Place;
use super::{Engine, EngineOutcome};
use crate::events::{Events, Recorded};
use crate::provider::RunningTarget;
use crate::spec::LoadedSpec;
use faultline_kind::registry::{Kind, Kinds, Listed};
use faultline_kind::workload::{Op, Workload};
use faultline_kind::{Connection, ReadValue, RequestClient, Response, ServerInfo, TargetDriver};
use faultline_model::checks::CheckStatus;
use faultline_model::ops::OpKind;
use faultline_model::results::{CellResult, CellStatus};

/// A store's keys and values.
type Store = HashMap<Vec<u8>, Vec<u8>>;

/// Every store, by the URI that names it (each test its own), with how
/// many ops its clients were asked to execute.
static STORES: Mutex<Vec<(String, Store, u64)>> = Mutex::new(Vec::new());

fn with_entry<T>(uri: &str, f: impl FnOnce(&mut Store, &mut u64) -> T) -> T {
    let mut stores = STORES.lock().unwrap_or_else(|e| e.into_inner());
    let at = match stores.iter().position(|(u, _, _)| u == uri) {
        Some(at) => at,
        None => {
            stores.push((uri.to_string(), HashMap::new(), 0));
            stores.len() - 1
        }
    };
    let (_, store, executed) = &mut stores[at];
    f(store, executed)
}

fn with_store<T>(uri: &str, f: impl FnOnce(&mut Store) -> T) -> T {
    with_entry(uri, |store, _| f(store))
}

/// How many ops the clients of the store at `uri` were asked to execute.
pub(crate) fn executed(uri: &str) -> u64 {
    with_entry(uri, |_, executed| *executed)
}

/// A key-value store in this process: `memory://NAME`, or
/// `memory://lossy-NAME` for one that drops every other write it
/// acknowledges, `memory://refuse-NAME` for one that takes no connection,
/// `memory://panicky-NAME` for one whose client crashes on its first op.
struct Memory;

crate::test_kind::kind_info_for_tests!(Memory, command: "true", supports: |op| matches!(op, OpKind::Get | OpKind::Set));

#[async_trait::async_trait]
impl TargetDriver for Memory {
    fn listen_args(&self, _: u16, _: &Path) -> Vec<String> {
        Vec::new()
    }
    fn uri(&self, host: &str, port: u16) -> String {
        format!("memory://{host}-{port}")
    }
    async fn ready(&self, _: &str) -> anyhow::Result<ServerInfo> {
        Ok(ServerInfo { version: "memory".into() })
    }
    async fn connect(&self, uri: &str, workload: Arc<Workload>) -> anyhow::Result<Connection> {
        anyhow::ensure!(!uri.starts_with("memory://refuse"), "{uri} takes no connection");
        let lossy = uri.starts_with("memory://lossy");
        let client = Client { uri: uri.to_string(), workload, lossy, writes: AtomicU64::new(0) };
        Ok(Connection::Requests(Arc::new(client)))
    }
    async fn read_values(&self, uri: &str, keys: &[Vec<u8>]) -> anyhow::Result<Vec<Option<Vec<u8>>>> {
        Ok(with_store(uri, |store| keys.iter().map(|k| store.get(k).cloned()).collect()))
    }
}

/// One connection's client.
struct Client {
    uri: String,
    workload: Arc<Workload>,
    lossy: bool,
    writes: AtomicU64,
}

#[async_trait::async_trait]
impl RequestClient for Client {
    async fn execute(&self, op: &Op) -> Response {
        with_entry(&self.uri, |_, executed| *executed += 1);
        assert!(!self.uri.starts_with("memory://panicky"), "the client of {} crashes", self.uri);
        // As a client of a server over a network would: answers that are
        // always ready would keep the lanes from ever yielding their thread.
        tokio::task::yield_now().await;
        let mut key = Vec::new();
        self.workload.put_key(op.kind, op.key, &mut key);
        match op.kind {
            OpKind::Get => Ok(with_store(&self.uri, |store| match store.get(&key) {
                Some(value) => ReadValue::Bytes(value.clone()),
                None => ReadValue::Nil,
            })),
            _ => {
                let mut value = Vec::new();
                self.workload.put_value(op, &mut value);
                let dropped = self.lossy && self.writes.fetch_add(1, Ordering::Relaxed) % 2 == 1;
                if !dropped {
                    with_store(&self.uri, |store| store.insert(key, value));
                }
                Ok(ReadValue::None)
            }
        }
    }
}

static HELD: [Listed; 1] = [Listed::Held(Kind {
    name: "memory",
    driver: |_| Ok(Arc::new(Memory)),
    members: None,
    options: None,
    faults: Vec::new,
    remove_listed: None,
})];

static KINDS: Kinds = Kinds {
    kinds: &HELD,
    checkers: faultline_check::checker::declared,
    provider_faults: crate::fault::provider_faults,
};

/// A spec of one scenario of gets and sets on the in-memory store at `uri`
/// (both checkers on), planned, with all an engine needs to run it and a
/// record of what the run said.
pub(crate) struct Bench {
    loaded: LoadedSpec,
    plan: crate::plan::Plan,
    dir: tempfile::TempDir,
    logs: PathBuf,
    history: PathBuf,
    said: Arc<Recorded>,
    load_threads: LoadThreads,
    plugins: faultline_plugin::SpecPlugins,
    uri: String,
}

impl Bench {
    /// `profile` is the profile's YAML (`{closed: 2x4}`), `timing` the
    /// spec's (`{warmup: 100ms, duration: 400ms}`), `probes` the scenario's
    /// list (`[]` for none).
    pub(crate) fn new(uri: &str, profile: &str, timing: &str, probes: &str) -> Bench {
        let text = format!(
            "name: cells\ntargets:\n  kv: {{kind: memory, provider: external, uri: '{uri}'}}\n\
             workloads:\n  w: {{ops: {{get: 50, set: 50}}, keys: {{count: 20}}, value_size: 32B}}\n\
             profiles:\n  p: {profile}\ntiming: {timing}\n\
             checkers: [lost-acknowledged-write, stale-read-after-ack]\n\
             scenarios:\n  - {{name: s, target: kv, workload: w, profiles: [p], probes: {probes}}}\n"
        );
        let loaded = crate::spec::parse(Path::new("cells.yaml"), &text, &[], &KINDS).unwrap();
        let plan = crate::plan::build(&loaded, &crate::plan::PlanOptions::default()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (logs, history) = (dir.path().join("logs"), dir.path().join("history"));
        std::fs::create_dir_all(&logs).unwrap();
        std::fs::create_dir_all(&history).unwrap();
        Bench {
            loaded,
            plan,
            dir,
            logs,
            history,
            said: Arc::new(Recorded::default()),
            load_threads: LoadThreads::start(1).unwrap(),
            plugins: faultline_plugin::SpecPlugins::none(),
            uri: uri.to_string(),
        }
    }

    pub(crate) fn engine(&self) -> Engine<'_> {
        Engine {
            spec: &self.loaded.spec,
            plan: &self.plan,
            run_dir: self.dir.path(),
            log_dir: &self.logs,
            history_dir: &self.history,
            run_tag: 7,
            cancel: CancellationToken::new(),
            events: Events::new(Arc::clone(&self.said) as _),
            plugins: &self.plugins,
            load_threads: &self.load_threads,
            kinds: &KINDS,
            place: Place::Alone,
        }
    }

    /// The store as the engine reaches it once it is up.
    pub(crate) fn running(&self) -> RunningTarget {
        RunningTarget::reached("kv", &self.uri, Arc::new(Memory))
    }

    /// The plan's one cell, as its phases read it.
    pub(crate) fn cell<'a>(&'a self, engine: &'a Engine<'a>, running: &'a RunningTarget) -> CellRun<'a> {
        let spec = &self.loaded.spec;
        let workload = Workload::new(&spec.workloads["w"], spec.seed, engine.run_tag);
        let cell = &self.plan.cells[0];
        CellRun {
            engine,
            cell,
            position: (1, 1),
            running,
            workload: Arc::new(workload),
            remaining_after: Default::default(),
        }
    }

    /// What the run said, line by line.
    pub(crate) fn said(&self) -> Vec<String> {
        self.said.lines.lock().unwrap().clone()
    }
}

/// Runs one scenario of gets and sets on `uri` through the engine, closed
/// 2x4 for 400 ms after 100 ms of warm-up, both checkers on; the run's
/// story comes back with the outcome.
async fn run(uri: &str) -> (EngineOutcome, Vec<String>) {
    let bench = Bench::new(uri, "{closed: 2x4}", "{warmup: 100ms, duration: 400ms}", "[]");
    let outcome = bench.engine().run().await;
    (outcome, bench.said())
}

fn check_status(cell: &CellResult, checker: &str) -> (CheckStatus, u64, u64) {
    let found = cell.checks.iter().find(|c| c.checker == checker).unwrap_or_else(|| panic!("{checker}: {cell:?}"));
    (found.status, found.checked, found.violations)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cell_runs_every_phase_and_its_history_is_judged_clean() {
    let (outcome, said) = run("memory://clean").await;
    assert!(outcome.errors.is_empty() && !outcome.interrupted, "{:?}", outcome.errors);
    assert_eq!(outcome.cells.len(), 1);
    let cell = &outcome.cells[0];
    assert_eq!(cell.status, CellStatus::Completed, "{:?}: {said:?}", cell.error);
    let stats = cell.stats.as_ref().expect("a completed cell has stats");
    assert!(stats.ok > 0 && stats.failed == 0, "{stats:?}");
    for op in ["get", "set"] {
        assert!(stats.per_op.get(op).is_some_and(|s| s.ok > 0), "{op}: {:?}", stats.per_op);
    }
    for checker in ["lost-acknowledged-write", "stale-read-after-ack"] {
        let (status, checked, violations) = check_status(cell, checker);
        assert_eq!((status, violations), (CheckStatus::Ok, 0), "{checker}");
        assert!(checked > 0, "{checker} judged something");
    }
    assert_eq!(outcome.targets.len(), 1);
    assert_eq!(outcome.targets[0].server, "memory");
}

/// The store acknowledges every write and keeps every other one: the
/// history shows acknowledged writes the final state lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_acknowledged_and_dropped_are_found_lost() {
    let (outcome, said) = run("memory://lossy").await;
    let cell = &outcome.cells[0];
    assert_eq!(cell.status, CellStatus::Completed, "{:?}: {said:?}", cell.error);
    let (status, checked, violations) = check_status(cell, "lost-acknowledged-write");
    assert_eq!(status, CheckStatus::Violated, "checked {checked}");
    assert!(violations > 0 && violations <= checked, "{violations} of {checked}");
}
