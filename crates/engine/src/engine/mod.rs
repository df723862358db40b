//! The engine: brings the plan's targets up, drives each cell with the
//! closed- or open-loop executor under deadlines and the hang watchdog, and
//! takes everything down again, whatever happens. A cell's own way, from
//! bring-up to its result, is the list of phases in `run_cell` (cell/).

pub mod agent;
mod books;
mod capacity;
pub mod cell;
mod fanout;
mod host_watch;
mod instances;
pub mod load_threads;
mod pipeline;
pub mod place;
mod requests;
mod role_watch;
pub mod rounds;
mod schedule;
#[cfg(test)]
mod test_lane;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::events::Events;
use crate::plan::{Cell, Plan};
use crate::plugin::SpecPlugins;
use crate::probe::ProbeTarget;
use crate::provider::RunningTarget;
use crate::spec::matrix::Isolation;
use crate::spec::probe::ProbeSpec;
use crate::spec::Spec;
use faultline_kind::registry::Kinds;
use faultline_kind::workload::Workload;
use faultline_model::probes::{ProbeOutput, ProbeWhen};
use faultline_model::results::{CellResult, CellStatus, TargetInfo};
use instances::Instances;

/// What a run measured: every cell's result, the targets it ran on, the
/// run's own errors, and whether it was interrupted. Judging it is
/// faultline-judge's.
pub struct EngineOutcome {
    pub cells: Vec<CellResult>,
    pub targets: Vec<TargetInfo>,
    pub errors: Vec<String>,
    pub interrupted: bool,
}

pub struct Engine<'a> {
    pub spec: &'a Spec,
    pub plan: &'a Plan,
    /// Where targets get their working directories (`targets/`) and
    /// probes their outputs (`probes/`).
    pub run_dir: &'a Path,
    pub log_dir: &'a Path,
    /// Where cells record their histories when the spec names checkers.
    pub history_dir: &'a Path,
    /// Random per run and written into recorded values, so data an earlier
    /// run left in a target never passes for this run's writes.
    pub run_tag: u32,
    pub cancel: CancellationToken,
    pub events: Events,
    pub plugins: &'a SpecPlugins,
    /// Where the pipelined lanes run (the request/response lanes stay on
    /// the main runtime with their drivers' own tasks).
    pub load_threads: &'a load_threads::LoadThreads,
    /// The kinds this build holds (the CLI's list): targets' drivers.
    pub kinds: &'static Kinds,
    /// Where the cells' lanes run: here, on agents, or (in an agent) its share.
    pub place: place::Place<'a>,
}

impl Engine<'_> {
    pub async fn run(&self) -> EngineOutcome {
        let mut outcome =
            EngineOutcome { cells: Vec::new(), targets: Vec::new(), errors: Vec::new(), interrupted: false };
        let mut instances = Instances::new(self.plan);
        // Per workload and matrix point: a point may fill in a workload's fields.
        let mut workloads: HashMap<(String, String), Arc<Workload>> = HashMap::new();
        let mut prepared: Vec<(String, String)> = Vec::new();
        let mut all_up = true;
        let total = self.plan.cells.len();
        for (i, cell) in self.plan.cells.iter().enumerate() {
            if !all_up || self.cancel.is_cancelled() {
                outcome.cells.push(self.skipped(cell));
                continue;
            }
            for started in instances.bring_up(self, self.plan, i).await {
                match started {
                    Ok(mut info) => {
                        let instance = info.instance.clone().unwrap_or_else(|| info.name.clone());
                        // Started again for each of its cells (`isolation: own-cells`): listed once.
                        let listed =
                            outcome.targets.iter().any(|t| t.instance.as_ref().unwrap_or(&t.name) == &instance);
                        if !listed {
                            info.probes = self.start_probes(cell, &instances, &info.name, &instance).await;
                            outcome.targets.push(info);
                        }
                    }
                    Err(e) => outcome.errors.push(e),
                }
            }
            if instances.get(&cell.instance).is_none() {
                // It failed to start (said once, in the errors), or the run was interrupted.
                outcome.cells.push(self.skipped(cell));
                continue;
            }
            let running = instances.get(&cell.instance).expect("checked above");
            let spec = cell.spec(self.spec);
            let workload = workloads
                .entry((cell.workload.clone(), faultline_model::labels::matrix_suffix(cell.matrix())))
                .or_insert_with(|| Arc::new(Workload::new(&spec.workloads[&cell.workload], spec.seed, self.run_tag)))
                .clone();
            let key = (cell.instance.clone(), cell.workload.clone());
            if !prepared.contains(&key) {
                prepared.push(key);
                // A target not set up as the spec says measures something
                // else: nothing more runs.
                if let Err(e) = self.prepare(running, &cell.workload, &workload).await {
                    outcome.errors.push(e);
                    outcome.cells.push(self.skipped(cell));
                    all_up = false;
                    continue;
                }
            }
            let frozen = match self.scenario(cell).isolation {
                Isolation::Stop => instances.freeze_others(cell),
                _ => Vec::new(),
            };
            let running = instances.get(&cell.instance).expect("checked above");
            let remaining = self.plan.time_after(i);
            let mut result = match &self.scenario(cell).capacity {
                Some(search) => self.search_capacity(cell, (i + 1, total), running, workload, remaining, search).await,
                None => self.run_cell(cell, (i + 1, total), running, workload, remaining).await,
            };
            result.frozen = frozen;
            instances.wind_down(self, cell, i).await;
            let line = match (&result.status, &result.stats, &result.capacity) {
                (_, _, Some(search)) => {
                    let steps = match search.steps.len() {
                        1 => "1 step".to_string(),
                        n => format!("{n} steps"),
                    };
                    format!("{}: capacity {} ({steps})", cell.label(), search.reading())
                }
                (CellStatus::Completed, Some(s), None) => format!(
                    "{}: {:.0} ops/s, {} errors{}{}",
                    cell.label(),
                    s.throughput,
                    s.failed,
                    s.open_loop
                        .filter(|o| o.unsent > 0)
                        .map(|o| format!(
                            ", {} unsent (sent {:.1}% of the {:.0}/s schedule)",
                            o.unsent,
                            o.sent_fraction() * 100.0,
                            o.rate
                        ))
                        .unwrap_or_default(),
                    s.per_op
                        .iter()
                        .filter_map(|(k, o)| o.latency_ms.map(|l| format!(", {k} p99 {:.2}ms", l.p99)))
                        .collect::<String>()
                ),
                (status, _, _) => format!(
                    "{}: {:?}{}",
                    cell.label(),
                    status,
                    result.error.as_deref().map(|e| format!(": {e}")).unwrap_or_default()
                ),
            };
            self.events.say(&line);
            if let Some(e) = &result.error {
                outcome.errors.push(format!("{}: {e}", cell.label()));
            }
            outcome.cells.push(result);
        }
        outcome.interrupted |= self.cancel.is_cancelled();
        capacity::judge_repeats(&mut outcome.cells);
        self.events.finish();
        instances.stop_all(&self.events).await;
        outcome
    }

    /// Sets a target up for a workload before its first cell (MongoDB's
    /// seed documents), bounded by the target's ready timeout per 10,000.
    async fn prepare(&self, running: &RunningTarget, name: &str, workload: &Workload) -> Result<(), String> {
        let spec = &self.spec.targets[&running.name];
        let fail = |e: String| format!("preparing target `{}` for workload `{name}`: {e}", running.name);
        let limit = spec.ready_timeout.0.max(Duration::from_secs(60));
        tokio::select! {
            r = tokio::time::timeout(limit, running.driver.prepare(&running.uri, workload)) => match r {
                Ok(Ok(done)) if done.is_empty() => Ok(()),
                Ok(Ok(done)) => {
                    self.events.say(&format!("target `{}`, workload `{name}`: {done}", running.name));
                    Ok(())
                }
                Ok(Err(e)) => Err(fail(format!("{e:#}"))),
                Err(_) => Err(fail(format!("took longer than {}", faultline_model::units::format_duration(limit)))),
            },
            _ = self.cancel.cancelled() => Err(fail("interrupted".into())),
        }
    }

    /// The scenario's `when: start` probes against a freshly started instance.
    async fn start_probes(
        &self,
        cell: &Cell,
        instances: &Instances,
        target_name: &str,
        instance: &str,
    ) -> Vec<ProbeOutput> {
        let Some(target) = instances.get(instance) else { return Vec::new() };
        let probes = self.probes_for(cell, target_name, ProbeWhen::Start);
        let at = ProbeTarget { instance, target, run_dir: self.run_dir };
        let mut out = Vec::new();
        for p in probes {
            out.push(at.run(p, None).await);
        }
        out
    }

    /// The cell's scenario's probes of one kind that apply to `target`.
    fn probes_for<'s>(&'s self, cell: &'s Cell, target: &str, when: ProbeWhen) -> Vec<&'s ProbeSpec> {
        let scenario = self.scenario(cell);
        scenario
            .probes
            .iter()
            .filter(|p| p.when == when && (p.targets.is_empty() || p.targets.iter().any(|t| t == target)))
            .collect()
    }

    pub(crate) fn skipped(&self, cell: &Cell) -> CellResult {
        CellResult {
            scenario: cell.scenario.clone(),
            profile: cell.profile.clone(),
            shape: self.shape(cell),
            target: cell.target.clone(),
            workload: cell.workload.clone(),
            variant: cell.variant.clone(),
            matrix: cell.matrix().clone(),
            repeat: cell.repeat,
            status: CellStatus::Skipped,
            error: None,
            measured_s: 0.0,
            stats: None,
            checks: Vec::new(),
            faults: Vec::new(),
            roles: Vec::new(),
            non_primary_reads: None,
            probes: Vec::new(),
            frozen: Vec::new(),
            capacity: None,
        }
    }

    fn shape(&self, cell: &Cell) -> String {
        cell.spec(self.spec).profiles[&cell.profile].shape()
    }

    /// One cell, phase by phase (engine/cell/): a phase that cannot go on
    /// ends the cell there, failed or interrupted, keeping its probes' outputs
    /// and fault records.
    async fn run_cell(
        &self,
        cell: &Cell,
        position: (usize, usize),
        running: &RunningTarget,
        workload: Arc<Workload>,
        remaining_after: Duration,
    ) -> CellResult {
        let run = cell::CellRun { engine: self, cell, position, running, workload, remaining_after };
        let phases = async {
            let armed = cell::bring_up(&run).await?;
            let ran = cell::run_window(&run, armed).await?;
            let merged = cell::merge(&run, ran)?;
            let measured = cell::summarize(&run, merged);
            let judged = cell::judge(&run, measured).await;
            Ok(cell::finish(&run, judged).await)
        };
        phases.await.unwrap_or_else(|stopped: cell::Stopped| stopped.into_result(self.skipped(cell)))
    }

    /// The cell's scenario, as its matrix point filled it in.
    pub(crate) fn scenario<'s>(&'s self, cell: &'s Cell) -> &'s crate::spec::ScenarioSpec {
        let spec = cell.spec(self.spec);
        spec.scenarios.iter().find(|s| s.name == cell.scenario).expect("the plan's scenarios come from the spec")
    }
}
