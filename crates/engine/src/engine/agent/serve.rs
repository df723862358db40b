//! `faultline agent`: a process that dials its coordinator (over TLS,
//! proving it holds the run's key and checking the coordinator does:
//! link.rs), plans the run
//! from the spec text the coordinator loaded, and for each cell connects
//! its share of the lanes, starts them on the instant it is given and sends
//! back what they measured: the merged metrics (HDR histograms exactly),
//! each lane's end, its own CPU, and the lanes' histories. It runs the
//! very engine code a single process runs (`engine::cell::bring_up` and
//! `run_window`, in its `Place::Agent`), so a share is measured the same
//! way; faults, probes, checkers and gates stay with the coordinator.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpStream;
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::clock;
use super::coordinator::{own_hello, KEEPALIVE};
use super::link::{self, LinkKey};
use super::wire::{self, ArmOrder, CellDone, Frame, LaneOutcome, RunOrder, HISTORY_CHUNK};
use crate::engine::cell::{self, CellRun, Ran};
use crate::engine::load_threads::LoadThreads;
use crate::engine::place::{AgentSeat, Place};
use crate::engine::rounds::RemoteRounds;
use crate::engine::Engine;
use crate::events::Events;
use crate::metrics::CellMetrics;
use crate::plan::{self, Plan, PlanOptions};
use crate::plugin::SpecPlugins;
use crate::provider::RunningTarget;
use crate::spec::{self, LoadedSpec};
use faultline_kind::registry::Kinds;
use faultline_kind::workload::Workload;

/// How long an agent keeps dialing a coordinator that is not listening yet.
const DIAL_LIMIT: Duration = Duration::from_secs(30);
/// How long the TLS handshake with the coordinator may take.
const HANDSHAKE_LIMIT: Duration = Duration::from_secs(10);

pub struct AgentArgs {
    pub connect: String,
    pub name: Option<String>,
    /// The run's key (`--key-file`, or the environment: link.rs).
    pub key: LinkKey,
    /// Where what the agent says goes (the CLI's console).
    pub events: Events,
}

async fn dial(address: &str) -> anyhow::Result<TcpStream> {
    let deadline = Instant::now() + DIAL_LIMIT;
    loop {
        match TcpStream::connect(address).await {
            Ok(s) => return Ok(s),
            Err(e) if Instant::now() >= deadline => {
                anyhow::bail!("cannot reach the coordinator at {address} within {}s: {e}", DIAL_LIMIT.as_secs())
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// Serves the run until the coordinator says goodbye; an error when it
/// could not be served (the coordinator refused this agent, or went away
/// mid-run). `kinds` is the build's list, as the coordinator's. Runs on
/// the caller's runtime (the CLI's `faultline agent`).
pub async fn serve(args: AgentArgs, kinds: &'static Kinds) -> anyhow::Result<()> {
    clock::since_epoch(Instant::now());
    let events = args.events.clone();
    let tcp = dial(&args.connect).await?;
    let _ = tcp.set_nodelay(true);
    let connector = link::connector(&args.key)?;
    let stream = match tokio::time::timeout(HANDSHAKE_LIMIT, connector.connect(link::server_name(), tcp)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => anyhow::bail!(
            "{} did not prove it holds this agent's key ({e}): it is not the run's coordinator, or this agent was \
             given another run's key",
            args.connect
        ),
        Err(_) => anyhow::bail!("no TLS handshake with {} within {}s", args.connect, HANDSHAKE_LIMIT.as_secs()),
    };
    let (mut rd, mut wr) = tokio::io::split(stream);
    // An orchestrator names its agents through the environment (the
    // Kubernetes manifests give each the pod's name).
    let name = args.name.or_else(|| std::env::var("FAULTLINE_AGENT_NAME").ok().filter(|n| !n.is_empty()));
    let hello =
        own_hello(&name.unwrap_or_else(|| format!("{}-{}", crate::results::host_info().hostname, std::process::id())));
    events.say(&format!("agent {} (pid {}) joined {}", hello.name, hello.pid, args.connect));
    wire::write(&mut wr, &Frame::Hello(hello)).await?;
    let (out, mut outbox) = mpsc::unbounded_channel::<Frame>();
    let writer = tokio::spawn(async move {
        while let Some(frame) = outbox.recv().await {
            let bye = matches!(frame, Frame::Bye);
            if wire::write(&mut wr, &frame).await.is_err() || bye {
                return;
            }
        }
    });
    // Pings are answered here, as they arrive: a clock reading must not
    // wait behind a cell's work. A keepalive also goes on to the inbox, so
    // the waits below hear that the coordinator is still there.
    let (inbox_tx, mut inbox) = mpsc::unbounded_channel::<Frame>();
    let pong = out.clone();
    tokio::spawn(async move {
        loop {
            let frame = match wire::read(&mut rd, wire::Sender::Coordinator).await {
                Ok(Some(frame)) => frame,
                Ok(None) => return,
                Err(e) => {
                    let _ = inbox_tx.send(Frame::Failed(format!("the connection failed: {e:#}")));
                    return;
                }
            };
            if let Frame::Ping { n } = frame {
                let _ = pong.send(Frame::Pong { n, agent_ns: clock::since_epoch(Instant::now()) });
                if n != KEEPALIVE {
                    continue;
                }
            }
            if inbox_tx.send(frame).is_err() {
                return;
            }
        }
    });
    // The coordinator reads every agent's clock before it hands out the run.
    let welcome_by = Instant::now() + WELCOME_LIMIT;
    let order = loop {
        match tokio::time::timeout_at(welcome_by, inbox.recv()).await {
            Ok(Some(Frame::Welcome(order))) => break *order,
            Ok(Some(Frame::Ping { .. })) => {}
            Ok(Some(Frame::Refused(why))) => anyhow::bail!("the coordinator refused this agent: {why}"),
            Ok(Some(Frame::Failed(why))) => anyhow::bail!("{why}"),
            Ok(None) => anyhow::bail!("the coordinator closed the connection before giving the run"),
            Ok(Some(_)) => anyhow::bail!("the coordinator sent something other than the run"),
            Err(_) => anyhow::bail!("no run from the coordinator within {}s", WELCOME_LIMIT.as_secs()),
        }
    };
    let session = match Session::open(order, kinds, events.clone()) {
        Ok(s) => {
            let _ = out.send(Frame::Ready);
            s
        }
        Err(e) => {
            let _ = out.send(Frame::Failed(format!("{e:#}")));
            drop(out);
            let _ = writer.await;
            return Err(e);
        }
    };
    loop {
        // Between cells the coordinator may run checkers for minutes; it
        // says it is still there every few seconds.
        match tokio::time::timeout(IDLE_LIMIT, inbox.recv()).await {
            Ok(Some(Frame::Arm(order))) => {
                if session.cell(order, &mut inbox, &out).await == Next::Leave {
                    break;
                }
            }
            Ok(Some(Frame::Bye)) => break,
            Ok(Some(Frame::Failed(why))) => anyhow::bail!("{why}"),
            Ok(None) => anyhow::bail!("the coordinator went away without a goodbye"),
            Err(_) => anyhow::bail!("no word from the coordinator for {}s: leaving", IDLE_LIMIT.as_secs()),
            // Nothing is armed: nothing to disarm or cancel.
            Ok(Some(_)) => {}
        }
    }
    events.say("the coordinator said goodbye");
    Ok(())
}

/// How long an agent waits for the run once it said hello (the coordinator
/// reads every agent's clock first).
const WELCOME_LIMIT: Duration = Duration::from_secs(120);
/// How long an agent waits between cells with no word from the
/// coordinator, which sends a keepalive after 10 s of silence.
const IDLE_LIMIT: Duration = Duration::from_secs(60);
/// How long past the slowest target's ready timeout an armed agent waits
/// for the start.
const START_LIMIT: Duration = Duration::from_secs(60);
/// How far ahead of now a start may be set (the coordinator sets it 100 ms ahead).
const START_AHEAD_AT_MOST: Duration = Duration::from_secs(10);

/// Whether a start at `t0_ns` on this agent's clock is near now: not in
/// the past by more than a second, nor further ahead than [`START_AHEAD_AT_MOST`].
fn start_in_range(t0_ns: u64) -> Result<(), String> {
    let now = clock::since_epoch(Instant::now());
    let (earliest, latest) = (now.saturating_sub(1_000_000_000), now + START_AHEAD_AT_MOST.as_nanos() as u64);
    match (earliest..=latest).contains(&t0_ns) {
        true => Ok(()),
        false => Err(format!(
            "the start is {:.3}s from now on this agent's clock, outside -1s..+{}s",
            (t0_ns as f64 - now as f64) / 1e9,
            START_AHEAD_AT_MOST.as_secs()
        )),
    }
}

impl Drop for Session {
    /// The scratch directory goes with the session: struck off its ledger.
    fn drop(&mut self) {
        if let Err(e) = faultline_kind::ledger::forget(&self.scratch_listed) {
            self.events.warn(&format!("{e:#}"));
        }
    }
}

#[derive(PartialEq)]
enum Next {
    Stay,
    Leave,
}

/// The run as this agent holds it: the spec and plan, its place, and
/// scratch directories for its lanes' histories.
struct Session {
    loaded: LoadedSpec,
    plan: Plan,
    order: RunOrder,
    /// Listed in a run ledger of the agent's own while it exists: an agent
    /// killed outright (with its coordinator) leaves it for `faultline
    /// teardown`.
    scratch: tempfile::TempDir,
    scratch_listed: faultline_kind::ledger::Resource,
    load_threads: LoadThreads,
    plugins: SpecPlugins,
    events: Events,
    kinds: &'static Kinds,
}

impl Session {
    fn open(order: RunOrder, kinds: &'static Kinds, events: Events) -> anyhow::Result<Session> {
        // What the coordinator says is checked before it is used.
        let max = super::launch::MAX_AGENTS;
        anyhow::ensure!(
            (1..=max).contains(&order.agents) && order.index < order.agents,
            "the run order gives this agent place {} of {} (1 to {max} agents)",
            order.index,
            order.agents
        );
        if let Some(n) = order.run.load_threads {
            let max = crate::engine::load_threads::MAX_LOAD_THREADS;
            anyhow::ensure!((1..=max).contains(&n), "the run order asks for {n} load threads (1 to {max})");
        }
        // The coordinator checked the servers it starts; an agent starts none.
        crate::spec::host::skip_program_checks();
        let path = PathBuf::from(&order.run.spec_path);
        let loaded =
            spec::parse(&path, &order.run.spec_text, &order.run.set, kinds).map_err(|e| anyhow::anyhow!("{e}"))?;
        let options = PlanOptions { quick: order.run.quick, only: order.run.only.clone() };
        let plan = plan::build(&loaded, &options).map_err(|e| anyhow::anyhow!("{e}"))?;
        let threads = order.run.load_threads.unwrap_or_else(LoadThreads::default_count);
        let load_threads = LoadThreads::start(threads).context("starting the load threads")?;
        // Listed only once nothing after it can fail: the session's Drop
        // strikes it off again.
        let scratch = tempfile::Builder::new().prefix("faultline-agent-").tempdir().context("a scratch directory")?;
        let scratch_listed = faultline_kind::ledger::Resource::DataDirectory {
            target: "an agent's scratch".into(),
            path: scratch.path().display().to_string(),
        };
        faultline_kind::ledger::open(&format!("agent-{}", std::process::id()), scratch.path());
        if let Err(e) = faultline_kind::ledger::record(scratch_listed.clone()) {
            events.warn(&format!("{e:#}"));
        }
        Ok(Session {
            loaded,
            plan,
            order,
            scratch,
            scratch_listed,
            load_threads,
            plugins: SpecPlugins::none(),
            events,
            kinds,
        })
    }

    /// One cell: arm, wait for the start, run, send the share.
    async fn cell(&self, order: ArmOrder, inbox: &mut UnboundedReceiver<Frame>, out: &UnboundedSender<Frame>) -> Next {
        let spec = &self.loaded.spec;
        let Some(planned) = self.plan.cells.get(order.cell) else {
            let _ = out.send(Frame::Failed(format!("this agent's plan has no cell {}", order.cell + 1)));
            return Next::Stay;
        };
        if planned.label() != order.label {
            let why = format!("this agent planned `{}` where the coordinator has `{}`", planned.label(), order.label);
            let _ = out.send(Frame::Failed(why));
            return Next::Stay;
        }
        let cell = match order.rate {
            Some(rate) => planned.at_rate(spec, rate),
            None => planned.clone(),
        };
        let cell_spec = cell.spec(spec);
        let workload =
            Arc::new(Workload::new(&cell_spec.workloads[&cell.workload], cell_spec.seed, self.order.run.run_tag));
        let Some(target) = cell_spec.targets.get(&order.target_name).filter(|_| order.target_name == cell.target)
        else {
            let why = format!("cell {} runs against `{}`, not `{}`", order.cell + 1, cell.target, order.target_name);
            let _ = out.send(Frame::Failed(why));
            return Next::Stay;
        };
        let driver = match self.kinds.driver(&target.kind, target.options.as_ref()) {
            Ok(d) => d,
            Err((field, e)) => {
                let _ = out.send(Frame::Failed(format!("options.{field}: {e}")));
                return Next::Stay;
            }
        };
        let running = RunningTarget::reached(&order.target_name, &order.uri, driver);
        let cancel = CancellationToken::new();
        let remote_rounds = Arc::new(RemoteRounds::default());
        let dirs = self.scratch.path();
        let history_dir = dirs.join("history");
        let engine = Engine {
            spec,
            plan: &self.plan,
            run_dir: dirs,
            log_dir: dirs,
            history_dir: &history_dir,
            run_tag: self.order.run.run_tag,
            cancel: cancel.clone(),
            events: self.events.clone(),
            plugins: &self.plugins,
            load_threads: &self.load_threads,
            kinds: self.kinds,
            place: Place::Agent(AgentSeat {
                index: self.order.index,
                agents: self.order.agents,
                out: out.clone(),
                rounds: Arc::clone(&remote_rounds),
            }),
        };
        let run = CellRun {
            engine: &engine,
            cell: &cell,
            position: order.position,
            running: &running,
            workload,
            remaining_after: Duration::ZERO,
        };
        let mut armed = match cell::bring_up(&run).await {
            Ok(a) => a,
            Err(stopped) => {
                let _ = out.send(Frame::Failed(stopped.why()));
                return Next::Stay;
            }
        };
        let _ = out.send(Frame::Armed { arm: order.arm });
        // Every agent arms before the start: the coordinator waits for the
        // slowest one's target (its ready timeout) and no longer.
        let start_by = tokio::time::Instant::now() + cell_spec.targets[&cell.target].ready_timeout.0 + START_LIMIT;
        let t0 = loop {
            match tokio::time::timeout_at(start_by, inbox.recv()).await {
                Ok(Some(Frame::Start { t0_ns })) => match start_in_range(t0_ns) {
                    Ok(()) => break clock::at_epoch_ns(t0_ns),
                    Err(why) => {
                        let _ = out.send(Frame::Failed(why));
                        return Next::Stay;
                    }
                },
                Ok(Some(Frame::RoundsDone { lane, rounds })) => remote_rounds.update(lane as usize, rounds),
                Ok(Some(Frame::Disarm)) | Ok(Some(Frame::Cancel)) => return Next::Stay,
                Ok(Some(Frame::Bye)) | Ok(None) => return Next::Leave,
                Ok(Some(_)) => {}
                Err(_) => {
                    let _ = out.send(Frame::Failed("no start within the arming window".into()));
                    return Next::Leave;
                }
            }
        };
        armed.start_at = Some(t0);
        let window = cell::run_window(&run, armed);
        tokio::pin!(window);
        let mut next = Next::Stay;
        let ran = loop {
            tokio::select! {
                ran = &mut window => break ran,
                frame = inbox.recv(), if next == Next::Stay => match frame {
                    Some(Frame::Cancel) => cancel.cancel(),
                    Some(Frame::RoundsDone { lane, rounds }) => remote_rounds.update(lane as usize, rounds),
                    Some(Frame::Bye) | None => {
                        cancel.cancel();
                        next = Next::Leave;
                    }
                    Some(_) => {}
                },
            }
        };
        match ran {
            Ok(ran) => {
                let lanes = engine.place.lanes(run.lanes().0);
                let done = share(ran, &lanes, order.arm);
                send_histories(&run.history_dir(), &lanes, order.arm, out);
                let _ = out.send(Frame::Done(Box::new(done)));
            }
            Err(stopped) => {
                let _ = out.send(Frame::Failed(stopped.why()));
            }
        }
        let _ = std::fs::remove_dir_all(run.history_dir());
        remote_rounds.detach();
        next
    }
}

/// The agent's lanes' books as one share, ready to send.
fn share(ran: Ran, lanes: &[usize], arm: u64) -> CellDone {
    let Ran { ends, timelines, watcher, client_cpu, clock, .. } = ran;
    watcher.abort();
    let mut metrics = CellMetrics::new();
    let mut outcomes = Vec::new();
    let (mut crashed, mut history_incomplete) = (None, None);
    for (lane, end) in lanes.iter().zip(ends) {
        match end {
            Ok(end) => {
                metrics.merge(end.recorder);
                if let Some(Err(e)) = end.history.map(faultline_check::history::HistoryWriter::finish) {
                    history_incomplete = Some(format!("{e:#}"));
                }
                let ran_out_ns = end.ran_out.map(|at| match at >= clock.measure_from {
                    true => (at - clock.measure_from).as_nanos() as i64,
                    false => -((clock.measure_from - at).as_nanos() as i64),
                });
                outcomes.push(LaneOutcome { lane: *lane as u32, ran_out_ns });
            }
            Err(e) => crashed = Some(format!("a load client crashed: {e}")),
        }
    }
    metrics.absorb_timelines(&timelines);
    CellDone { arm, metrics, lanes: outcomes, client_cpu, crashed, history_incomplete }
}

/// Each lane's history file, in whole-record pieces.
fn send_histories(dir: &std::path::Path, lanes: &[usize], arm: u64, out: &UnboundedSender<Frame>) {
    use std::io::Read;
    for lane in lanes {
        let Ok(mut file) = std::fs::File::open(dir.join(format!("{lane:04}.ops"))) else { continue };
        loop {
            let mut bytes = Vec::with_capacity(HISTORY_CHUNK);
            match (&mut file).take(HISTORY_CHUNK as u64).read_to_end(&mut bytes) {
                Ok(0) => break,
                Ok(_) => {
                    let _ = out.send(Frame::History { arm, lane: *lane as u32, bytes });
                }
                Err(_) => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::agent::wire::RunShare;

    static NO_KINDS: Kinds = Kinds { kinds: &[], checkers: || &[], provider_faults: crate::fault::provider_faults };

    fn share(load_threads: Option<usize>) -> RunShare {
        RunShare {
            spec_path: "s.yaml".into(),
            spec_text: String::new(),
            set: vec![],
            quick: false,
            only: vec![],
            run_tag: 1,
            load_threads,
        }
    }

    /// A coordinator that holds the key but sends hostile run orders (the
    /// issue's fake coordinator): the agent answers each with why and
    /// stops, exit 2 in the CLI, never a panic or a thread storm.
    #[tokio::test]
    async fn a_hostile_run_order_is_refused_with_why() {
        for (order, said) in [
            (RunOrder { index: 0, agents: 0, run: share(None) }, "place 0 of 0"),
            (RunOrder { index: 3, agents: 2, run: share(None) }, "place 3 of 2"),
            (RunOrder { index: 0, agents: 1, run: share(Some(3003)) }, "3003 load threads"),
        ] {
            let key = LinkKey::generate().unwrap();
            let acceptor = link::acceptor(&key).unwrap();
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let address = listener.local_addr().unwrap().to_string();
            let coordinator = tokio::spawn(async move {
                let (tcp, _) = listener.accept().await.unwrap();
                let mut tls = acceptor.accept(tcp).await.unwrap();
                let Ok(Some(Frame::Hello(_))) = wire::read(&mut tls, wire::Sender::Agent).await else {
                    panic!("no hello")
                };
                wire::write(&mut tls, &Frame::Welcome(Box::new(order))).await.unwrap();
                match wire::read(&mut tls, wire::Sender::Agent).await {
                    Ok(Some(Frame::Failed(why))) => why,
                    _ => String::new(),
                }
            });
            let events = crate::events::Events::new(Arc::new(crate::events::Recorded::default()));
            let args = AgentArgs { connect: address, name: Some("a".into()), key, events };
            let e = serve(args, &NO_KINDS).await.unwrap_err().to_string();
            let told = coordinator.await.unwrap();
            assert!(e.contains(said) && told.contains(said), "{e} / {told}");
        }
        assert!(start_in_range(u64::MAX).unwrap_err().contains("outside -1s..+10s"));
    }
}
