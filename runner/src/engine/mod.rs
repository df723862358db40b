//! The engine: brings the plan's targets up, drives each cell with the
//! closed- or open-loop executor under deadlines and the hang watchdog, and
//! takes everything down again, whatever happens.

mod books;
mod instances;
pub mod load_threads;
mod pipeline;
pub mod progress;
mod requests;
mod rounds;
mod schedule;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::fault;
use crate::metrics::windows::FaultSpan;
use crate::metrics::{roles, CellMetrics, LiveCounters, Recorder, SharedTimelines};
use crate::plan::{Cell, Plan};
use crate::plugin::shape::{Feed, Setup, Shape};
use crate::plugin::{Limits, SpecPlugins};
use crate::probe::{ProbeOutput, ProbeTarget};
use crate::provider::RunningTarget;
use crate::results::{CellResult, CellStatus, TargetInfo};
use crate::spec::matrix::Isolation;
use crate::spec::probe::{ProbeSpec, ProbeWhen};
use crate::spec::{Load, OpKind, Spec};
use crate::target::{self, Connection};
use crate::workload::{OpStream, Workload};
use faultline_check::checker::lost_write_times::{self, AckTimes};
use faultline_check::checker::{self, CheckResult, CheckerName};
use faultline_check::history::{HistoryWriter, Scope};
use instances::Instances;
use progress::Progress;

/// How long the linearizability search may take per cell before it says `unknown`.
const LINEARIZABILITY_BUDGET: Duration = Duration::from_secs(60);

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
    pub progress: Progress,
    pub plugins: &'a SpecPlugins,
    /// Where the pipelined lanes run (the request/response lanes stay on
    /// the main runtime with their drivers' own tasks).
    pub load_threads: &'a load_threads::LoadThreads,
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
                .entry((cell.workload.clone(), crate::plan::matrix_suffix(cell.matrix())))
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
            let mut result = self.run_cell(cell, (i + 1, total), running, workload, remaining).await;
            result.frozen = frozen;
            instances.wind_down(self, cell, i).await;
            let line = match (&result.status, &result.stats) {
                (CellStatus::Completed, Some(s)) => format!(
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
                (status, _) => format!(
                    "{}: {:?}{}",
                    cell.label(),
                    status,
                    result.error.as_deref().map(|e| format!(": {e}")).unwrap_or_default()
                ),
            };
            self.progress.println(&line);
            if let Some(e) = &result.error {
                outcome.errors.push(format!("{}: {e}", cell.label()));
            }
            outcome.cells.push(result);
        }
        outcome.interrupted |= self.cancel.is_cancelled();
        self.progress.finish();
        instances.stop_all().await;
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
                    self.progress.println(&format!("target `{}`, workload `{name}`: {done}", running.name));
                    Ok(())
                }
                Ok(Err(e)) => Err(fail(format!("{e:#}"))),
                Err(_) => Err(fail(format!("took longer than {}", crate::spec::units::format_duration(limit)))),
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

    fn skipped(&self, cell: &Cell) -> CellResult {
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
        }
    }

    fn shape(&self, cell: &Cell) -> String {
        cell.spec(self.spec).profiles[&cell.profile].load().to_string()
    }

    async fn run_cell(
        &self,
        cell: &Cell,
        position: (usize, usize),
        running: &RunningTarget,
        workload: Arc<Workload>,
        remaining_after: Duration,
    ) -> CellResult {
        let uri = running.uri.as_str();
        let mut result = self.skipped(cell);
        let spec = cell.spec(self.spec);
        let target_spec = &spec.targets[&cell.target];
        let options = target::kinds::overlay(target_spec.options.as_ref(), self.scenario(cell).options.as_ref());
        let driver = match target::driver(&target_spec.kind, options.as_ref()) {
            Ok(d) => d,
            Err((field, e)) => return self.failed(result, format!("options.{field}: {e}")),
        };
        let load = spec.profiles[&cell.profile].load();
        let probe_at = ProbeTarget { instance: &cell.instance, target: running, run_dir: self.run_dir };
        for p in self.probes_for(cell, &cell.target, ProbeWhen::Before) {
            result.probes.push(probe_at.run(p, Some(position.0 - 1)).await);
        }
        let (connections, in_flight) = match load {
            Load::Closed(s) => (s.clients, s.in_flight),
            Load::Open(o) => (o.connections, o.in_flight),
        };

        // Connect every client before the clock starts: connection set-up is
        // not part of what a cell measures.
        let connecting =
            futures::future::try_join_all((0..connections).map(|_| driver.connect(uri, Arc::clone(&workload))));
        let clients: Vec<Connection> = tokio::select! {
            r = tokio::time::timeout(target_spec.ready_timeout.0, connecting) => match r {
                Ok(Ok(c)) => c,
                Ok(Err(e)) => return self.failed(result, format!("cannot open {connections} connections: {e:#}")),
                Err(_) => return self.failed(result, format!("opening {connections} connections took longer than {}", target_spec.ready_timeout)),
            },
            _ = self.cancel.cancelled() => { result.status = CellStatus::Interrupted; return result; }
        };

        let shape = match self.start_shape(cell, &workload, connections) {
            Ok(s) => s,
            Err(e) => return self.failed(result, e),
        };

        let t = cell.timing;
        let t0 = Instant::now() + Duration::from_millis(5);
        let measure_from = t0 + t.warmup;
        let stop_at = measure_from + t.duration;
        let salt = cell.stream_salt();
        let mut live = Vec::new();
        let mut tasks = Vec::new();
        let with_faults = !self.scenario(cell).faults.is_empty();
        // Reads that only the primary may answer are placed against the role
        // timeline afterwards, from the same per-op samples.
        let read_rule = driver.read_rule();
        let reads_need_primary = read_rule.as_ref().is_some_and(|r| r.requires_primary);
        let keep_windows = with_faults && (self.gates_use_windows(cell) || reads_need_primary);
        let timelines = Arc::new(SharedTimelines::new(crate::metrics::timeline_step(t.duration)));
        // Several clients in contention rounds: one gate holds them together.
        let mut round_seats = match workload.is_rounds() && connections > 1 {
            true => rounds::RoundGate::seats(connections as usize).into_iter().map(Some).collect(),
            false => Vec::new(),
        };
        for (i, connection) in clients.into_iter().enumerate() {
            let counters = Arc::new(LiveCounters::default());
            live.push(Arc::clone(&counters));
            let recorder = Recorder::new(
                workload.kinds().into_iter(),
                measure_from,
                counters,
                Arc::clone(&timelines),
                matches!(load, Load::Open(_)),
                with_faults,
                keep_windows,
            );
            let history = match self.open_history(position.0, i, t0, !self.checkers(cell).is_empty()) {
                Ok(h) => h,
                Err(e) => return self.failed(result, format!("{e:#}")),
            };
            let tag = history.as_ref().map(|h| (h.scope.cell, i as u16));
            let ops = match &shape {
                Some(s) => OpStream::from_plugin(Feed::new(s, i as u32, in_flight), tag),
                None => workload.stream(i as u64, connections as u64, in_flight, salt, tag),
            };
            let pacing = match load {
                Load::Closed(_) => None,
                Load::Open(o) => {
                    Some(schedule::Pacing { t0, rate: o.rate, first: i as u64, stride: connections as u64 })
                }
            };
            let settings = books::Settings {
                in_flight,
                timing: t,
                cancel_at_deadline: target_spec.cancel_at_deadline,
                measure_from,
                stop_at,
                pacing,
                rounds: round_seats.get_mut(i).and_then(Option::take),
            };
            let cancel = self.cancel.clone();
            let dialer =
                pipeline::Dialer { driver: Arc::clone(&driver), uri: uri.to_string(), workload: Arc::clone(&workload) };
            tasks.push(match connection {
                Connection::Pipelined(c) => {
                    // The socket moves to the load thread's own reactor.
                    let moved = {
                        let _on = self.load_threads.enter(i);
                        c.stream.into_std().and_then(tokio::net::TcpStream::from_std)
                    };
                    let stream = match moved {
                        Ok(s) => s,
                        Err(e) => {
                            return self.failed(result, format!("cannot move a connection to its load thread: {e}"))
                        }
                    };
                    let c = target::PipelinedConnection { stream, protocol: c.protocol };
                    self.load_threads.spawn(i, async move {
                        tokio::time::sleep_until(t0).await;
                        pipeline::run(c, dialer, ops, settings, recorder, history, cancel).await
                    })
                }
                Connection::Requests(client) => tokio::spawn(async move {
                    tokio::time::sleep_until(t0).await;
                    requests::run(client, ops, settings, recorder, history, cancel).await
                }),
            });
        }
        let rounds = workload.is_rounds().then(|| progress::Rounds {
            asked: workload.key_count(),
            writers: u64::from(connections) * u64::from(in_flight),
        });
        let watcher =
            self.progress.watch_cell(position, cell.label(), live, t0, t.warmup, t.duration, remaining_after, rounds);
        // Faults run beside the load, on the measured window's clock; the
        // schedule heals what is still in force when the window ends, or as
        // soon as the load has ended early (a failed shape plugin): a cell
        // whose load is gone does not sit out its window.
        let load_ended = self.cancel.child_token();
        let faults = &t.scaled_faults(&self.scenario(cell).faults);
        let schedule = async {
            match faults.is_empty() {
                true => Vec::new(),
                false => fault::run_schedule(spec, running, faults, measure_from, stop_at, load_ended.clone()).await,
            }
        };
        // Who is primary, sampled through the window, for targets with
        // members, and for one server whose role its kind can ask.
        let watched = match (faults.is_empty(), running.topology()) {
            (true, _) => None,
            (false, Some(t)) if t.members.len() > 1 => Some(roles::Watched::Members(Arc::clone(t))),
            (false, _) if driver.has_roles() => Some(roles::Watched::Server {
                name: running.name.clone(),
                uri: uri.to_string(),
                kind: target::kinds::members(&target_spec.kind),
            }),
            (false, _) => None,
        };
        let watching = watched.is_some();
        let roles = async {
            match watched {
                Some(w) => roles::watch(w, measure_from, stop_at, load_ended.clone()).await,
                None => roles::Sampled::default(),
            }
        };
        let load_tasks = async {
            let ends = futures::future::join_all(tasks).await;
            load_ended.cancel();
            ends
        };
        // Window probes (`strace -c -p {pid}`) cover the measured window only.
        let window_probes = async {
            let probes = self.probes_for(cell, &cell.target, ProbeWhen::Window);
            if probes.is_empty() {
                return Vec::new();
            }
            tokio::select! {
                _ = tokio::time::sleep_until(measure_from) => {}
                _ = load_ended.cancelled() => {}
            }
            let mut started = Vec::new();
            let mut outputs = Vec::new();
            for p in probes {
                match probe_at.start_window(p, position.0 - 1) {
                    Ok(w) => started.push(w),
                    Err(out) => outputs.push(*out),
                }
            }
            tokio::select! {
                _ = tokio::time::sleep_until(stop_at) => {}
                _ = load_ended.cancelled() => {}
            }
            for w in started {
                outputs.push(w.stop().await);
            }
            outputs
        };
        let (ends, fault_records, role_changes, window_outputs) =
            tokio::join!(load_tasks, schedule, roles, window_probes);
        result.probes.extend(window_outputs);
        // Kept also when the cell fails below: which faults ran (and were
        // healed) before it ended is part of what happened.
        result.faults = fault_records;
        let mut metrics = CellMetrics::new();
        let mut panicked = None;
        let mut history_error = None;
        let mut ran_out = None;
        let mut every_lane_ran_out = true;
        for end in ends {
            match end {
                Ok(end) => {
                    metrics.merge(end.recorder);
                    if let Some(Err(e)) = end.history.map(HistoryWriter::finish) {
                        history_error = Some(e);
                    }
                    ran_out = ran_out.max(end.ran_out.filter(|at| *at < stop_at));
                    every_lane_ran_out &= end.ran_out.is_some_and(|at| at < stop_at);
                }
                Err(e) => panicked = Some(format!("a load client crashed: {e}")),
            }
        }
        metrics.absorb_timelines(&timelines);
        watcher.abort();
        let ended = Instant::now();

        let window = if self.cancel.is_cancelled() {
            result.status = CellStatus::Interrupted;
            ended.min(stop_at).saturating_duration_since(measure_from)
        } else {
            result.status = CellStatus::Completed;
            // Contention rounds end the load when the last round is answered:
            // the window is the time they took.
            match workload.is_rounds() && every_lane_ran_out {
                true => ended.min(stop_at).saturating_duration_since(measure_from),
                false => t.duration,
            }
        };
        if let Some(e) = panicked {
            return self.failed(result, e);
        }
        // A shape plugin that failed took the load down with it: what was
        // measured is not the workload the spec asked for.
        if let Some(e) = shape.as_ref().and_then(|s| s.lock().expect("shape lock").stopped().cloned()) {
            return self.failed(result, e.to_string());
        }
        // A shape that ran out of ops before the window ended left part of
        // the window without the load the spec asked for.
        if workload.is_rounds() && !self.cancel.is_cancelled() && !every_lane_ran_out {
            return self.failed(
                result,
                format!(
                    "the {} window ended before every contention round was answered: give the rounds a longer duration",
                    crate::spec::units::format_duration(t.duration)
                ),
            );
        }
        if workload.is_rounds() && !self.cancel.is_cancelled() && window.is_zero() {
            return self.failed(
                result,
                "every contention round was done before the warm-up ended: nothing was measured (use warmup: 0s with distribution: rounds)".into(),
            );
        }
        if let (Some(at), false, false) = (ran_out, self.cancel.is_cancelled(), workload.is_rounds()) {
            let secs = |i: Instant| i.saturating_duration_since(measure_from).as_secs_f64();
            return self.failed(
                result,
                format!(
                    "the workload's shape ran out of ops {:.2}s into the {} window: the rest of the window had no load",
                    secs(at),
                    crate::spec::units::format_duration(t.duration)
                ),
            );
        }
        result.measured_s = window.as_secs_f64();
        let open = match load {
            Load::Open(o) => Some(o),
            Load::Closed(_) => None,
        };
        let mut stats = metrics.summarize(window, open);
        // Only what a fault really did is measured around it: one that was
        // never confirmed has no cost to show (a gate on it is unmeasured, not
        // a pass with no denial), and one whose heal failed has no "after".
        let requested: Vec<(String, f64)> =
            result.faults.iter().filter(|f| f.confirmed_s.is_some()).map(|f| (f.name.clone(), f.requested_s)).collect();
        stats.fault_impact = metrics.fault_impacts(&requested, window);
        let spans: Vec<FaultSpan> = result
            .faults
            .iter()
            .filter(|f| f.confirmed_s.is_some() && f.error.is_none())
            .map(|f| FaultSpan { fault: f.name.clone(), requested_s: f.requested_s, healed_s: f.healed_s })
            .collect();
        stats.window_latency = metrics.window_latency(&spans, window);
        result.stats = Some(stats);
        // A fault that failed changes what the cell measured: say why on the
        // console, in the server's words, not only in results.json.
        for f in result.faults.iter().filter(|f| f.error.is_some()) {
            let error = f.error.as_deref().unwrap_or_default();
            self.progress.println(&format!("fault `{}` ({} on {}) failed: {error}", f.name, f.action, f.target));
        }
        if let (true, Some(rule)) = (watching, &read_rule) {
            let spans = roles::no_primary_spans(&role_changes.changes, role_changes.last_sample_s);
            result.non_primary_reads = metrics.non_primary_reads(&rule.read_concern, rule.requires_primary, spans);
        }
        result.roles = role_changes.changes;
        let checker_names = self.checkers(cell);
        if !checker_names.is_empty() && self.cancel.is_cancelled() {
            let why = "not checked: the run was interrupted".to_string();
            result.checks = checker_names.iter().map(|n| CheckResult::unknown(*n, why.clone())).collect();
        } else if !checker_names.is_empty() {
            result.checks = match history_error {
                Some(e) => checker_names
                    .iter()
                    .map(|n| CheckResult::unknown(*n, format!("the history is incomplete: {e:#}")))
                    .collect(),
                None => {
                    // Lost writes are held against the spans a demoted
                    // primary was still primary, each fault taking its share.
                    let demoted = roles::demoted_primaries(&result.roles, result.measured_s);
                    let window_start_ns = t.warmup.as_nanos() as u64;
                    let spans = lost_write_times::spans_ns(&demoted, window_start_ns);
                    let (checks, ack_times) =
                        self.check_cell(position.0, checker_names, &t, &driver, uri, &workload, spans).await;
                    if let Some(times) = ack_times {
                        lost_write_times::place(&mut result.faults, &demoted, &times, window_start_ns);
                    }
                    checks
                }
            };
        }
        for p in self.probes_for(cell, &cell.target, ProbeWhen::After) {
            result.probes.push(probe_at.run(p, Some(position.0 - 1)).await);
        }
        result
    }

    /// A cell's own instance of its workload's shape plugin, if it has one,
    /// seeded from the run's seed and the cell.
    fn start_shape(
        &self,
        cell: &Cell,
        workload: &Workload,
        connections: u32,
    ) -> Result<Option<Arc<std::sync::Mutex<Shape>>>, String> {
        let (Some(spec), Some(plugin), Some(host)) =
            (&workload.shape, self.plugins.shapes.get(&cell.workload), &self.plugins.host)
        else {
            return Ok(None);
        };
        let setup = Setup::of(workload, connections, !self.checkers(cell).is_empty());
        let limits = Limits::of(spec, crate::plugin::shape::DEFAULT_DEADLINE);
        let seed = self.spec.seed ^ cell.stream_salt().wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let shape = Shape::start(host, plugin, limits, &spec.config, seed, setup).map_err(|e| e.to_string())?;
        Ok(Some(Arc::new(std::sync::Mutex::new(shape))))
    }

    /// Some gate takes a latency over a window around a fault.
    /// Whether a gate that covers this cell takes a latency over a window
    /// around a fault: only then are the cell's successes kept.
    fn gates_use_windows(&self, cell: &Cell) -> bool {
        self.spec.gates.values().any(|g| {
            let covers = g.scenario.as_ref().is_none_or(|s| *s == cell.scenario)
                && g.profile.as_ref().is_none_or(|p| *p == cell.profile);
            match &g.rule {
                crate::spec::GateRule::Expr(e) => covers && crate::gate::expr::parse(e).is_ok_and(|e| e.uses_windows()),
                crate::spec::GateRule::Plugin(_) => false,
            }
        })
    }

    /// The checkers of the cell's scenario: its own, or the campaign's.
    fn checkers<'s>(&'s self, cell: &'s Cell) -> &'s [CheckerName] {
        self.scenario(cell).checkers.as_deref().unwrap_or(&self.spec.checkers)
    }

    /// The cell's scenario, as its matrix point filled it in.
    fn scenario<'s>(&'s self, cell: &'s Cell) -> &'s crate::spec::ScenarioSpec {
        let spec = cell.spec(self.spec);
        spec.scenarios.iter().find(|s| s.name == cell.scenario).expect("the plan's scenarios come from the spec")
    }

    fn cell_history_dir(&self, cell: usize) -> PathBuf {
        self.history_dir.join(format!("{cell:03}"))
    }

    /// One history file per connection, when checkers need a history.
    fn open_history(
        &self,
        cell: usize,
        connection: usize,
        t0: Instant,
        record: bool,
    ) -> anyhow::Result<Option<books::HistoryLog>> {
        if !record {
            return Ok(None);
        }
        let dir = self.cell_history_dir(cell);
        std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let writer = HistoryWriter::create(&dir.join(format!("{connection:04}.ops")))?;
        Ok(Some(books::HistoryLog { writer, t0, scope: Scope { run: self.run_tag, cell: cell as u16 } }))
    }

    /// Reads the cell's history, then the final values of the keys it wrote,
    /// and runs the spec's checkers. Anything that cannot be read leaves the
    /// checkers `unknown`, never passed.
    #[allow(clippy::too_many_arguments)]
    async fn check_cell(
        &self,
        cell: usize,
        names: &[CheckerName],
        timing: &crate::plan::CellTiming,
        driver: &Arc<dyn target::TargetDriver>,
        uri: &str,
        workload: &Arc<Workload>,
        demoted_spans: Vec<(u64, u64)>,
    ) -> (Vec<CheckResult>, Option<AckTimes>) {
        let names = names.to_vec();
        let unknown =
            |why: String| (names.iter().map(|n| CheckResult::unknown(*n, why.clone())).collect::<Vec<_>>(), None);
        let dir = self.cell_history_dir(cell);
        let longest_op = timing.deadline + timing.hang_after;
        let first = {
            let (dir, names) = (dir.clone(), names.clone());
            tokio::task::spawn_blocking(move || checker::first_pass(&dir, &names, longest_op)).await
        };
        let pass = match first {
            Ok(Ok(p)) => p,
            Ok(Err(e)) => return unknown(format!("cannot read the history: {e:#}")),
            Err(e) => return unknown(format!("the history reader crashed: {e}")),
        };
        let keys: Vec<u64> = pass.written_keys.iter().copied().collect();
        let key_bytes: Vec<Vec<u8>> = keys
            .iter()
            .map(|k| {
                let mut b = Vec::new();
                workload.put_key(OpKind::Set, *k, &mut b);
                b
            })
            .collect();
        let values = match tokio::time::timeout(Duration::from_secs(60), driver.read_values(uri, &key_bytes)).await {
            Ok(Ok(v)) => v,
            Ok(Err(e)) => return unknown(format!("cannot read the final state: {e:#}")),
            Err(_) => return unknown("reading the final state took longer than 60s".into()),
        };
        // The hot-key checker holds whole items (and their index entries)
        // against the images the writes returned.
        let stored_items = match names.contains(&CheckerName::HotKey) {
            false => None,
            true => match tokio::time::timeout(Duration::from_secs(60), driver.stored_items(uri, &key_bytes)).await {
                Ok(Ok(items)) => Some(keys.iter().copied().zip(items).collect::<HashMap<_, _>>()),
                Ok(Err(e)) => return unknown(format!("cannot read the stored items: {e:#}")),
                Err(_) => return unknown("reading the stored items took longer than 60s".into()),
            },
        };
        let final_values: HashMap<u64, Option<Vec<u8>>> = keys.into_iter().zip(values).collect();
        let scope = Scope { run: self.run_tag, cell: cell as u16 };
        let checkers = names.clone();
        let fresh_keys = workload.is_rounds();
        tokio::task::spawn_blocking(move || {
            let stored = checker::Stored { values: &final_values, items: stored_items.as_ref(), fresh_keys };
            checker::run(&dir, &checkers, pass, stored, scope, LINEARIZABILITY_BUDGET, &demoted_spans)
        })
        .await
        .unwrap_or_else(|e| unknown(format!("a checker crashed: {e}")))
    }

    fn failed(&self, mut result: CellResult, error: String) -> CellResult {
        result.status = CellStatus::Failed;
        result.error = Some(error);
        result
    }
}
