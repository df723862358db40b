//! The second phase: run the cell's window. Takes `Armed`; gives `Ran`: each
//! lane's end, the fault records, the roles sampled through the window and
//! the window probes' outputs, all joined. Separate because it is the only
//! phase that runs things side by side on the window's clock: the load's
//! lanes (closed or open loop, contention rounds), the fault schedule, the
//! role watch, the window probes and the client's CPU sampling start and end together, and the
//! schedule heals what is in force as soon as the load has ended.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::{JoinError, JoinHandle};
use tokio::time::Instant;

use super::bring_up::Armed;
use super::{CellRun, Kept, Stopped};
use crate::engine::agent::{served, AgentEnd};
use crate::engine::books::{self, LaneEnd};
use crate::engine::place::Place;
use crate::engine::role_watch::{self, Watched};
use crate::engine::{fanout, host_watch, pipeline, requests, rounds, schedule};
use crate::events;
use crate::fault;
use crate::metrics::{client_cpu, LiveCounters, Recorder, SharedTimelines};
use crate::plugin::shape::{Feed, Shape};
use crate::spec::StageSpan;
use faultline_check::history::{HistoryWriter, Scope};
use faultline_kind::workload::{Fanout, OpStream};
use faultline_kind::{Connection, PipelinedConnection, ReadRule, Stream, TargetDriver};
use faultline_model::probes::ProbeWhen;
use faultline_model::stats::{ClientCpu, HostLoad};

/// How long a lane's connection may take to be dialed on its load thread,
/// when the one bring-up made cannot move there (a TLS stream).
const LOAD_THREAD_DIAL_LIMIT: Duration = Duration::from_secs(10);

/// Each lane whose connection is a wrapped stream (TLS) gets a new one dialed
/// on its own load thread, now, before the clock starts: such a stream is
/// bound to the runtime that made it and cannot move there as a socket does,
/// and dialing after the clock started would charge the handshakes to the
/// window's first ops. The connection bring-up made showed the target takes
/// connections; one that cannot be dialed again fails the cell, with why.
async fn dial_on_load_threads(
    run: &CellRun<'_>,
    driver: &Arc<dyn TargetDriver>,
    clients: Vec<(usize, Connection)>,
) -> Result<Vec<(usize, Connection)>, String> {
    let mut dialing = Vec::with_capacity(clients.len());
    for (i, connection) in clients {
        dialing.push((
            i,
            match connection {
                Connection::Pipelined(PipelinedConnection { stream: Stream::Wrapped(_), .. }) => {
                    let dialer = pipeline::Dialer {
                        driver: Arc::clone(driver),
                        uri: run.running.uri.clone(),
                        workload: Arc::clone(&run.workload),
                    };
                    Err(run.engine.load_threads.spawn(i, async move { dialer.dial(LOAD_THREAD_DIAL_LIMIT).await }))
                }
                other => Ok(other),
            },
        ));
    }
    let mut clients = Vec::with_capacity(dialing.len());
    for (i, dial) in dialing {
        clients.push((
            i,
            match dial {
                Ok(connection) => connection,
                Err(on_thread) => match on_thread.await {
                    Ok(Ok(c)) => Connection::Pipelined(c),
                    Ok(Err(e)) => return Err(format!("client {i} could not connect on its load thread: {e:#}")),
                    Err(e) => return Err(format!("client {i}'s load thread failed: {e}")),
                },
            },
        ));
    }
    Ok(clients)
}

/// The cell's measured window on its clock.
#[derive(Clone, Copy)]
pub struct Clock {
    pub measure_from: Instant,
    pub stop_at: Instant,
}

/// A window that has run: every lane has ended, the fault schedule has
/// healed what it could, the role watch and the window probes have stopped.
pub struct Ran {
    pub driver: Arc<dyn TargetDriver>,
    pub shape: Option<Arc<Mutex<Shape>>>,
    pub clock: Clock,
    /// Each lane's books, or how its task crashed.
    pub ends: Vec<Result<LaneEnd, JoinError>>,
    /// The lanes' shared per-second timelines.
    pub timelines: Arc<SharedTimelines>,
    /// The cell's progress line, still drawing.
    pub watcher: JoinHandle<()>,
    /// Who was primary through the window, when someone was watched.
    pub role_changes: Option<role_watch::Sampled>,
    /// Which reads only a primary may answer, if the kind has such a rule.
    pub read_rule: Option<ReadRule>,
    /// faultline's own CPU over the measured window.
    pub client_cpu: Option<ClientCpu>,
    /// How busy the host was over the window, with whose work.
    pub host: Option<HostLoad>,
    /// The before- and window probes' outputs, and the fault records.
    pub kept: Kept,
    /// Fan-out: each subscriber's books (or how its task crashed), and how
    /// long the drain took.
    pub subscribers: Option<(Vec<Result<fanout::SubscriberBooks, JoinError>>, Duration)>,
    /// On agents: each agent's share of the cell, or why it has none.
    pub remote: Vec<Result<AgentEnd, String>>,
    /// On agents: the server's call counters before the agents started
    /// and after their shares arrived, where the kind keeps them.
    pub served: Option<(served::Reading, served::Reading)>,
}

/// A fan-out cell's subscribers, each subscribed on its own load thread
/// before the clock starts (subscriber `i` on thread `i`, where it then
/// reads): a subscription made after the clock started would miss the
/// window's first messages.
async fn subscribe_on_load_threads(
    run: &CellRun<'_>,
    driver: &Arc<dyn TargetDriver>,
    fan: &Fanout,
) -> Result<Vec<fanout::Subscriber>, String> {
    if driver.pubsub().is_none() {
        return Err(format!("target kind `{}` has no publish/subscribe", run.target_spec().kind));
    }
    let mut subscribing = Vec::with_capacity(fan.subscribers as usize);
    for i in 0..fan.subscribers {
        let driver = Arc::clone(driver);
        let uri = run.running.uri.clone();
        let names: Vec<Vec<u8>> = fan.channels_of(i).iter().map(|c| fan.channels[*c as usize].clone()).collect();
        subscribing.push(run.engine.load_threads.spawn(i as usize, async move {
            let pubsub = driver.pubsub().expect("checked above");
            pubsub.subscribe(&uri, &names).await
        }));
    }
    let limit = run.target_spec().ready_timeout.0;
    let all = futures::future::join_all(subscribing);
    let done = tokio::select! {
        done = tokio::time::timeout(limit, all) => done,
        _ = run.engine.cancel.cancelled() => return Err("interrupted while subscribing".into()),
    };
    let Ok(done) = done else {
        return Err(format!(
            "subscribing {} fan-out subscribers took longer than {}",
            fan.subscribers,
            run.target_spec().ready_timeout
        ));
    };
    let mut subscribers = Vec::with_capacity(done.len());
    for (i, d) in done.into_iter().enumerate() {
        match d {
            Ok(Ok((stream, leftover))) => subscribers.push(fanout::Subscriber { index: i as u32, stream, leftover }),
            Ok(Err(e)) => return Err(format!("fan-out subscriber {i} could not subscribe: {e:#}")),
            Err(e) => return Err(format!("fan-out subscriber {i}'s load thread failed: {e}")),
        }
    }
    Ok(subscribers)
}

/// Running subscriber tasks, each with the sender that starts its drain;
/// dropped before the drain (a cell that failed), they are aborted.
struct Subscribing {
    tasks: Vec<(JoinHandle<fanout::SubscriberBooks>, Option<oneshot::Sender<fanout::Drain>>)>,
}

impl Subscribing {
    /// Starts the drain: each subscriber reads until it has every
    /// publisher's last message or the drain's limit passes; their books
    /// and how long the drain took.
    async fn drain(
        mut self,
        last: HashMap<(u16, u32), u32>,
    ) -> (Vec<Result<fanout::SubscriberBooks, JoinError>>, Duration) {
        let started = Instant::now();
        let last = Arc::new(last);
        let mut tasks = Vec::new();
        for (task, drain) in self.tasks.drain(..) {
            if let Some(d) = drain {
                let _ = d.send(fanout::Drain { until: started + fanout::DRAIN_LIMIT, last: Arc::clone(&last) });
            }
            tasks.push(task);
        }
        let books = futures::future::join_all(tasks).await;
        (books, started.elapsed())
    }
}

impl Drop for Subscribing {
    fn drop(&mut self) {
        for (task, _) in &self.tasks {
            task.abort();
        }
    }
}

pub async fn run_window(run: &CellRun<'_>, armed: Armed) -> Result<Ran, Stopped> {
    let Armed { driver, clients, start_at, shape, mut kept } = armed;
    let clients = match dial_on_load_threads(run, &driver, clients).await {
        Ok(clients) => clients,
        Err(why) => return Err(Stopped::failed(kept, why)),
    };
    let (engine, cell, workload) = (run.engine, run.cell, &run.workload);
    let fan = workload.fanout.clone().map(Arc::new);
    let subscribers = match &fan {
        Some(f) => match subscribe_on_load_threads(run, &driver, f).await {
            Ok(s) => s,
            Err(_) if engine.cancel.is_cancelled() => return Err(Stopped::interrupted(kept)),
            Err(why) => return Err(Stopped::failed(kept, why)),
        },
        None => Vec::new(),
    };
    let (connections, in_flight) = run.lanes();
    let target_spec = run.target_spec();
    let uri = run.running.uri.as_str();
    let t = cell.timing;
    let place = &engine.place;
    // On agents, what they will claim is held against the server's own
    // counters (agent/served.rs), read before they start and after.
    let served_before = match place {
        Place::Coordinator(_) => served::read(&driver, uri).await,
        _ => None,
    };
    let t0 = match (place, start_at) {
        (_, Some(t0)) => t0,
        (Place::Coordinator(agents), None) => match agents.start().await {
            Ok(t0) => t0,
            Err(why) => return Err(Stopped::failed(kept, why)),
        },
        (_, None) => Instant::now() + Duration::from_millis(5),
    };
    let measure_from = t0 + t.warmup;
    let stop_at = measure_from + t.duration;
    let clock = Clock { measure_from, stop_at };
    let salt = cell.stream_salt();
    let mut live = Vec::new();
    let mut tasks = Vec::new();
    let with_faults = !engine.scenario(cell).faults.is_empty();
    // Reads that only the primary may answer are placed against the role
    // timeline afterwards, from the same per-op samples, faults or not: a
    // cell without faults is where the judgement shows it finds nothing.
    let read_rule = driver.read_rule();
    let reads_need_primary = read_rule.as_ref().is_some_and(|r| r.requires_primary);
    let keep_windows = (with_faults && gates_use_windows(run)) || reads_need_primary;
    let timelines = Arc::new(SharedTimelines::new(crate::metrics::timeline_step(t.duration)));
    // Several clients in contention rounds: one gate holds them together.
    // On agents, the gate spans them: its own clients' progress is relayed.
    let mut round_seats: Vec<Option<rounds::RoundSeat>> = match workload.is_rounds() && connections > 1 {
        true => {
            let relay: Option<rounds::Relay> = match place {
                Place::Agent(seat) => {
                    let out = seat.out.clone();
                    Some(Box::new(move |lane, rounds| {
                        let _ = out.send(crate::engine::agent::wire::Frame::RoundsDone { lane: lane as u32, rounds });
                    }))
                }
                _ => None,
            };
            let gate = rounds::RoundGate::new(connections as usize, relay);
            if let Place::Agent(seat) = place {
                seat.rounds.attach(&gate);
            }
            let here = place.lanes(connections);
            (0..connections as usize).map(|i| here.contains(&i).then(|| gate.seat(i))).collect()
        }
        false => Vec::new(),
    };
    let arrivals = run.schedule().map(|(_, arrivals)| Arc::new(arrivals));
    let stages = run.stages();
    let at = |s: f64| measure_from + Duration::from_secs_f64(s);
    let stage_bounds: Vec<(Instant, Instant)> = stages.iter().map(|s| (at(s.from_s), at(s.to_s))).collect();
    // The subscribers read from now on, each on the load thread it
    // subscribed on, until their drain after the load.
    let subscribing = Subscribing {
        tasks: subscribers
            .into_iter()
            .map(|sub| {
                let (drain_tx, drain) = oneshot::channel();
                let sub_run = fanout::SubscriberRun {
                    driver: Arc::clone(&driver),
                    uri: uri.to_string(),
                    fanout: Arc::clone(fan.as_ref().expect("subscribers only with fanout")),
                    measure_from,
                    drain,
                    cancel: engine.cancel.clone(),
                };
                let task = engine.load_threads.spawn(sub.index as usize, fanout::run_subscriber(sub, sub_run));
                (task, Some(drain_tx))
            })
            .collect(),
    };
    for (i, connection) in clients {
        let counters = Arc::new(LiveCounters::default());
        live.push(Arc::clone(&counters));
        let recorder = Recorder::new(
            workload.kinds().into_iter(),
            measure_from,
            counters,
            Arc::clone(&timelines),
            arrivals.is_some(),
            with_faults,
            keep_windows,
        )
        .with_stages(stage_bounds.clone());
        let history = match open_history(run, i, t0) {
            Ok(h) => h,
            Err(e) => return Err(Stopped::failed(kept, format!("{e:#}"))),
        };
        let tag = history.as_ref().map(|h| (h.scope.cell, i as u16));
        let ops = match &shape {
            Some(s) => OpStream::from_source(Box::new(Feed::new(s, i as u32, in_flight)), tag),
            None => workload.stream(i as u64, connections as u64, in_flight, salt, tag),
        };
        let pacing = arrivals.as_ref().map(|arrivals| schedule::Pacing {
            t0,
            arrivals: Arc::clone(arrivals),
            first: i as u64,
            stride: connections as u64,
        });
        let settings = books::Settings {
            in_flight,
            timing: t,
            cancel_at_deadline: target_spec.cancel_at_deadline,
            measure_from,
            stop_at,
            pacing,
            active: lane_steps(&stages, &stage_bounds, i, t0),
            rounds: round_seats.get_mut(i).and_then(Option::take),
            published: fan.as_ref().map(|f| fanout::PublishLedger::new(i as u16, f.channels.len(), measure_from)),
        };
        let cancel = engine.cancel.clone();
        let dialer =
            pipeline::Dialer { driver: Arc::clone(&driver), uri: uri.to_string(), workload: Arc::clone(workload) };
        tasks.push(match connection {
            Connection::Pipelined(c) => {
                // A plain socket moves to the load thread's own reactor (a
                // wrapped one was dialed there: `dial_on_load_threads`).
                let c = match c.stream {
                    Stream::Tcp(tcp) => {
                        let _on = engine.load_threads.enter(i);
                        match tcp.into_std().and_then(tokio::net::TcpStream::from_std) {
                            Ok(s) => PipelinedConnection { stream: Stream::Tcp(s), protocol: c.protocol },
                            Err(e) => {
                                let why = format!("cannot move a connection to its load thread: {e}");
                                return Err(Stopped::failed(kept, why));
                            }
                        }
                    }
                    Stream::Wrapped(_) => c,
                };
                engine.load_threads.spawn(i, async move {
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
    let rounds = workload.is_rounds().then(|| events::Rounds {
        asked: workload.key_count(),
        writers: u64::from(connections) * u64::from(in_flight),
    });
    let watcher = match place {
        Place::Agent(seat) => crate::engine::agent::relay(live, seat.out.clone()),
        Place::Coordinator(agents) => engine.events.watch_cell(
            run.position,
            cell.label(),
            agents.live(),
            t0,
            t.warmup,
            t.duration,
            run.remaining_after,
            rounds,
        ),
        Place::Alone => engine.events.watch_cell(
            run.position,
            cell.label(),
            live,
            t0,
            t.warmup,
            t.duration,
            run.remaining_after,
            rounds,
        ),
    };
    // Faults run beside the load, on the measured window's clock; the
    // schedule heals what is still in force when the window ends, or as
    // soon as the load has ended early (a failed shape plugin): a cell
    // whose load is gone does not sit out its window.
    let load_ended = engine.cancel.child_token();
    let faults = &match place.is_agent() {
        true => Vec::new(),
        false => t.scaled_faults(&engine.scenario(cell).faults),
    };
    let schedule = async {
        match faults.is_empty() {
            true => Vec::new(),
            false => {
                let (spec, kinds) = (run.spec(), engine.kinds);
                fault::run_schedule(spec, kinds, run.running, faults, measure_from, stop_at, load_ended.clone()).await
            }
        }
    };
    // Who is primary, sampled through the window, for targets with
    // members, and for one server whose role its kind can ask: in cells
    // with faults, and in cells whose reads only the primary may answer.
    let watched = match (faults.is_empty() && !reads_need_primary, run.running.provided().member_set()) {
        (true, _) => None,
        _ if place.is_agent() => None,
        (false, Some(set)) if set.names().len() > 1 => Some(Watched::Members(set)),
        // A server's role is asked as its kind asks a member's.
        (false, _) if driver.has_roles() => run.engine.kinds.members(&target_spec.kind).ok().map(|kind| {
            Watched::Server { name: run.running.name.clone(), uri: uri.to_string(), address: kind.address(uri), kind }
        }),
        (false, _) => None,
    };
    let roles = async {
        match watched {
            Some(w) => Some(role_watch::watch(w, measure_from, stop_at, load_ended.clone()).await),
            None => None,
        }
    };
    let load_tasks = async {
        let remote = async {
            match place {
                Place::Coordinator(agents) => agents.collect(stop_at, &t, connections, &engine.cancel).await,
                _ => Vec::new(),
            }
        };
        let (ends, remote) = tokio::join!(futures::future::join_all(tasks), remote);
        load_ended.cancel();
        // Fan-out: what is still in flight gets its drain.
        let subscribers = match fan.is_some() {
            true => {
                let ledgers = ends.iter().filter_map(|e| e.as_ref().ok()?.published.as_ref());
                Some(subscribing.drain(fanout::last_messages(ledgers)).await)
            }
            false => None,
        };
        (ends, subscribers, remote)
    };
    // Window probes (`strace -c -p {pid}`) cover the measured window only.
    let window_probes = async {
        let probes = engine.probes_for(cell, &cell.target, ProbeWhen::Window);
        if probes.is_empty() || place.is_agent() {
            return Vec::new();
        }
        tokio::select! {
            _ = tokio::time::sleep_until(measure_from) => {}
            _ = load_ended.cancelled() => {}
        }
        let probe_at = run.probe_at();
        let mut started = Vec::new();
        let mut outputs = Vec::new();
        for p in probes {
            match probe_at.start_window(p, run.position.0 - 1) {
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
    // faultline's own CPU over the measured window (up to the load's end).
    let client_cpu = async {
        tokio::select! {
            _ = tokio::time::sleep_until(measure_from) => {}
            _ = load_ended.cancelled() => return None,
        }
        let from = client_cpu::Sample::now();
        tokio::select! {
            _ = tokio::time::sleep_until(stop_at) => {}
            _ = load_ended.cancelled() => {}
        }
        from.until(&client_cpu::Sample::now())
    };
    // The host's other work over the window (the coordinator watches for its agents).
    let host = async {
        match place.is_agent() {
            true => None,
            false => {
                host_watch::watch(measure_from, stop_at, load_ended.clone(), run.running.provided().container_ids())
                    .await
            }
        }
    };
    let ((ends, subscribers, remote), fault_records, role_changes, window_outputs, client_cpu, host) =
        tokio::join!(load_tasks, schedule, roles, window_probes, client_cpu, host);
    kept.probes.extend(window_outputs);
    kept.faults = fault_records;
    let served = match served_before {
        Some(before) => Some((before, served::read(&driver, uri).await.unwrap_or(Err("no longer offered".into())))),
        None => None,
    };
    Ok(Ran {
        driver,
        shape,
        clock,
        ends,
        timelines,
        watcher,
        role_changes,
        read_rule,
        client_cpu,
        host,
        kept,
        subscribers,
        remote,
        served,
    })
}

/// A closed loop in steps: when lane `i` runs, in the steps with more than
/// `i` clients (the first step from the warm-up on, which runs its
/// clients). Empty (always) without steps.
fn lane_steps(stages: &[StageSpan], bounds: &[(Instant, Instant)], i: usize, t0: Instant) -> Vec<(Instant, Instant)> {
    let runs = |s: &StageSpan| s.clients.is_some_and(|c| c as usize > i);
    let steps = stages.iter().zip(bounds).enumerate().filter(|(_, (s, _))| runs(s));
    steps.map(|(j, (_, (from, to)))| (if j == 0 { t0 } else { *from }, *to)).collect()
}

/// Whether a gate that covers this cell takes a latency over a window
/// around a fault: only then are the cell's successes kept.
fn gates_use_windows(run: &CellRun<'_>) -> bool {
    let cell = run.cell;
    run.engine.spec.gates.values().any(|g| {
        let covers = g.scenario.as_ref().is_none_or(|s| *s == cell.scenario)
            && g.profile.as_ref().is_none_or(|p| *p == cell.profile);
        match &g.rule {
            crate::spec::GateRule::Expr(e) => {
                covers
                    && faultline_spec::gate::parse(e, faultline_check::checker::declared())
                        .is_ok_and(|e| e.uses_windows())
            }
            crate::spec::GateRule::Plugin(_) => false,
        }
    })
}

/// One history file per connection, when checkers need a history.
fn open_history(run: &CellRun<'_>, connection: usize, t0: Instant) -> anyhow::Result<Option<books::HistoryLog>> {
    use anyhow::Context;
    if run.checkers().is_empty() {
        return Ok(None);
    }
    let dir = run.history_dir();
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let writer = HistoryWriter::create(&dir.join(format!("{connection:04}.ops")))?;
    let scope = Scope { run: run.engine.run_tag, cell: run.position.0 as u16 };
    let members = run.running.driver.members(&run.running.uri).into();
    Ok(Some(books::HistoryLog { writer, t0, scope, members }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_runs_in_the_steps_with_more_clients_than_its_number() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let step = |from_s, to_s, clients| StageSpan { name: "s".into(), from_s, to_s, clients: Some(clients) };
        let stages = [step(0.0, 1.0, 2), step(1.0, 2.0, 4), step(2.0, 3.0, 1)];
        // The window starts 1 s after the clock: the warm-up runs the first step.
        let bounds = [(at(1), at(2)), (at(2), at(3)), (at(3), at(4))];
        assert_eq!(lane_steps(&stages, &bounds, 0, t0), [(t0, at(2)), (at(2), at(3)), (at(3), at(4))]);
        assert_eq!(lane_steps(&stages, &bounds, 1, t0), [(t0, at(2)), (at(2), at(3))]);
        assert_eq!(lane_steps(&stages, &bounds, 3, t0), [(at(2), at(3))]);
        assert!(lane_steps(&[], &[], 0, t0).is_empty());
    }
}
