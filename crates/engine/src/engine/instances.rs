//! The running targets of a run, one per *instance*: a target, or, when its
//! fields use matrix dimensions, the target with their values in one
//! scenario (`cand[fsync=always]@write-path` is a server started with
//! `--appendfsync always` for that scenario, fresh, with data of its own). An instance is started
//! when the plan first needs it — with the other instances of its scenario's
//! matrix point, so competitors sit idle beside each other — and stopped
//! after the last cell that uses it; with `isolation: own-cells`, only for
//! each of its own cells. Each process instance gets a working directory of
//! its own under the run directory, kept across its restarts.

use std::collections::HashMap;
use std::path::PathBuf;

use indexmap::IndexMap;

use crate::plan::{Cell, Plan};
use crate::provider::{self, RunningTarget};
use crate::spec::matrix::Isolation;
use crate::spec::{ProviderKind, Spec};
use faultline_model::results::TargetInfo;

pub struct Instances {
    running: IndexMap<String, RunningTarget>,
    /// Index of the last cell that uses each instance.
    last_use: HashMap<String, usize>,
    /// Instances that failed to start, with why: their cells are skipped.
    failed: HashMap<String, String>,
    /// Instances frozen for the current cell (`isolation: stop`).
    frozen: Vec<i32>,
}

use faultline_model::labels::instance_file_name as file_name;

impl Instances {
    pub fn new(plan: &Plan) -> Instances {
        // An instance stays up to the end of the last scenario point that
        // uses it: the variants of a point see the same company to the end.
        let group = |c: &Cell| (c.scenario.clone(), faultline_model::labels::matrix_suffix(c.matrix()));
        let mut group_end: HashMap<(String, String), usize> = HashMap::new();
        for (i, c) in plan.cells.iter().enumerate() {
            group_end.insert(group(c), i);
        }
        let mut last_use: HashMap<String, usize> = HashMap::new();
        for c in &plan.cells {
            let end = group_end[&group(c)];
            let last = last_use.entry(c.instance.clone()).or_insert(end);
            *last = (*last).max(end);
        }
        Instances { running: IndexMap::new(), last_use, failed: HashMap::new(), frozen: Vec::new() }
    }

    pub fn get(&self, instance: &str) -> Option<&RunningTarget> {
        self.running.get(instance)
    }

    /// Starts what cell `index` needs: its own instance, and (unless each
    /// target runs only for its own cells) the other instances of its
    /// scenario's matrix point. Returns what started, for the results.
    pub async fn bring_up(
        &mut self,
        engine: &super::Engine<'_>,
        plan: &Plan,
        index: usize,
    ) -> Vec<Result<TargetInfo, String>> {
        let cell = &plan.cells[index];
        let isolation = scenario_of(engine.spec, cell).isolation;
        let mut wanted: Vec<&Cell> = vec![cell];
        if isolation != Isolation::OwnCells {
            wanted.extend(
                plan.cells[index..].iter().filter(|c| c.scenario == cell.scenario && c.matrix() == cell.matrix()),
            );
        }
        let mut started = Vec::new();
        for c in wanted {
            if self.running.contains_key(&c.instance) || self.failed.contains_key(&c.instance) {
                continue;
            }
            let spec = c.spec(engine.spec);
            let target_spec = &spec.targets[&c.target];
            engine.events.say(
                &format!("starting target `{}` ({} via {:?})", c.instance, target_spec.kind, target_spec.provider)
                    .to_lowercase(),
            );
            // Absolute, as `{target_dir}` and `{run_dir}` are handed to the server.
            let run_dir = std::path::absolute(engine.run_dir).unwrap_or_else(|_| engine.run_dir.to_path_buf());
            let work_dir = run_dir.join("targets").join(file_name(&c.instance));
            let dirs = provider::TargetDirs {
                work_dir: &work_dir,
                fault_disk: crate::fault::fault_filesystem(
                    &c.target,
                    plan.cells
                        .iter()
                        .filter(|x| x.instance == c.instance)
                        .map(|x| (x.spec(engine.spec), x.scenario.as_str())),
                ),
                run_dir: &run_dir,
                log_dir: engine.log_dir,
                log_name: &file_name(&c.instance),
            };
            let driver = match engine.kinds.driver(&target_spec.kind, target_spec.options.as_ref()) {
                Ok(d) => d,
                Err((field, e)) => {
                    let message = format!("target `{}`: options.{field}: {e}", c.instance);
                    self.failed.insert(c.instance.clone(), message.clone());
                    started.push(Err(message));
                    continue;
                }
            };
            let starting = provider::start(&c.target, target_spec, driver, engine.kinds, &dirs);
            let result = tokio::select! {
                r = starting => r,
                _ = engine.cancel.cancelled() => Err(anyhow::anyhow!("interrupted while starting target `{}`", c.instance)),
            };
            match result {
                Ok(t) => {
                    engine.events.say(&format!("target `{}` is up: {} at {}", c.instance, t.server.version, t.uri));
                    let info = describe(c, spec, &t, (t.provider == ProviderKind::Process).then_some(work_dir));
                    self.running.insert(c.instance.clone(), t);
                    started.push(Ok(info));
                }
                Err(e) => {
                    let message = format!("{e:#}");
                    self.failed.insert(c.instance.clone(), message.clone());
                    started.push(Err(message));
                }
            }
        }
        started
    }

    /// `isolation: stop`: freezes every other process instance for the cell.
    pub fn freeze_others(&mut self, cell: &Cell) -> Vec<String> {
        let mut frozen = Vec::new();
        for (name, t) in &self.running {
            if *name == cell.instance {
                continue;
            }
            let groups = t.provided().process_groups();
            for pgid in &groups {
                if provider::process_group::signal(*pgid, libc::SIGSTOP).is_ok() {
                    self.frozen.push(*pgid);
                }
            }
            if !groups.is_empty() {
                frozen.push(name.clone());
            }
        }
        frozen
    }

    pub fn thaw(&mut self) {
        for pgid in self.frozen.drain(..) {
            let _ = provider::process_group::signal(pgid, libc::SIGCONT);
        }
    }

    /// After cell `index`: stops the instances no later cell uses (and,
    /// with `isolation: own-cells`, the cell's own).
    pub async fn wind_down(&mut self, engine: &super::Engine<'_>, cell: &Cell, index: usize) {
        self.thaw();
        let own_cells = scenario_of(engine.spec, cell).isolation == Isolation::OwnCells;
        let done: Vec<String> = self
            .running
            .keys()
            .filter(|name| {
                self.last_use.get(*name).is_none_or(|last| *last <= index) || (own_cells && **name == cell.instance)
            })
            .cloned()
            .collect();
        for name in done {
            if let Some(t) = self.running.shift_remove(&name) {
                t.stop(&engine.events).await;
            }
        }
    }

    pub async fn stop_all(mut self, events: &crate::events::Events) {
        self.thaw();
        for (_, t) in self.running.drain(..) {
            t.stop(events).await;
        }
    }
}

fn scenario_of<'a>(spec: &'a Spec, cell: &Cell) -> &'a crate::spec::ScenarioSpec {
    spec.scenarios.iter().find(|s| s.name == cell.scenario).expect("the plan's scenarios come from the spec")
}

/// What the results say about an instance: what it is, how it was started,
/// and the checksum of the binary it ran.
fn describe(cell: &Cell, spec: &Spec, t: &RunningTarget, work_dir: Option<PathBuf>) -> TargetInfo {
    let target_spec = &spec.targets[&cell.target];
    let binary = t.provided().program().map(crate::provenance::binary);
    TargetInfo {
        name: cell.target.clone(),
        kind: target_spec.kind.as_str().to_string(),
        provider: format!("{:?}", t.provider).to_lowercase(),
        uri: t.uri.clone(),
        server: t.server.version.clone(),
        instance: (cell.instance != cell.target).then(|| cell.instance.clone()),
        args: target_spec.args.clone(),
        work_dir: work_dir.map(|d| d.display().to_string()),
        binary,
        image: target_spec.image.clone(),
        fault_filesystem: t.fault_filesystem.is_some(),
        fault_filesystem_caching: t.fault_filesystem,
        probes: Vec::new(),
    }
}
