//! The coordinator's side of a run on agents: it takes the agents in
//! (only over TLS with the run's key, link.rs; refusing any other build,
//! and never letting a stray connection end the join), measures their clocks, hands each the run,
//! and for every cell arms them, starts them on one instant, relays their
//! progress and collects their shares. An agent that goes away, or says
//! nothing for longer than its cell can take, is lost: the cell it was in
//! fails naming it, never passing on the others' share.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::clock::Reading;
use super::launch::Launched;
use super::link::{self, LinkKey};
use super::wire::{self, ArmOrder, CellDone, Frame, Hello, RunOrder, RunShare};
use super::AgentEnd;
use crate::engine::cell::CellRun;
use crate::metrics::LiveCounters;
use crate::plan::CellTiming;
use faultline_model::results::AgentInfo;

/// How long an agent may take to dial in, say who it is, or plan the run.
const JOIN_LIMIT: Duration = Duration::from_secs(60);
/// Pings per clock reading: at the run's start, and before each cell.
const PINGS_AT_START: u32 = 16;
const PINGS_PER_CELL: u32 = 5;
/// How far ahead of now a cell's start is set: time for the start to reach
/// every agent.
const START_AHEAD: Duration = Duration::from_millis(100);
/// How long past a cell's last possible op an agent may take to send its
/// share (its histories included).
const RESULT_GRACE: Duration = Duration::from_secs(60);

/// How many connections may be saying who they are at once.
const MAX_GREETINGS: usize = 64;
/// How long a connection may take to say who it is.
const GREETING_LIMIT: Duration = Duration::from_secs(10);
/// After this long with nothing to send (checkers running between cells),
/// the coordinator tells each agent it is still there: an agent that hears
/// nothing for its idle limit leaves (serve.rs).
const KEEPALIVE_AFTER: Duration = Duration::from_secs(10);
/// The ping number of a keepalive, which no clock reading uses.
pub(crate) const KEEPALIVE: u32 = u32::MAX;

/// What the join refused, for its error: the first few, and how many.
#[derive(Default)]
struct Refusals {
    first: Vec<String>,
    count: usize,
}

impl Refusals {
    const KEPT: usize = 20;

    fn push(&mut self, why: String) {
        self.count += 1;
        if self.first.len() < Self::KEPT {
            self.first.push(why);
        }
    }

    /// `; refused meanwhile: …` (empty when nothing was refused).
    fn said(&self) -> String {
        match self.count {
            0 => String::new(),
            n if n > self.first.len() => {
                format!("; refused meanwhile ({n}, the first {}): {}", self.first.len(), self.first.join("; "))
            }
            _ => format!("; refused meanwhile: {}", self.first.join("; ")),
        }
    }
}

/// An agent's connection, once it proved it holds the run's key.
type LinkStream = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
type LinkRead = tokio::io::ReadHalf<LinkStream>;
type LinkWrite = tokio::io::WriteHalf<LinkStream>;

/// A connection that proved it holds the run's key and said it is an agent
/// of this build.
struct Greeted {
    hello: Hello,
    peer: std::net::SocketAddr,
    rd: LinkRead,
    wr: LinkWrite,
}

/// What the join waits for next.
enum Joining {
    Accepted(Result<std::io::Result<(tokio::net::TcpStream, std::net::SocketAddr)>, tokio::time::error::Elapsed>),
    Greeted(Result<Result<Greeted, String>, tokio::task::JoinError>),
    Late,
}

/// Has a connection prove it holds the run's key (the TLS handshake), then
/// reads its Hello and checks it is this build's agent; why not, naming the
/// peer. A peer without the key is refused by the handshake and has read
/// nothing but this coordinator's public key. A key holder of another
/// build is told only that: its version, commit and digest are in this
/// coordinator's log.
async fn greet(
    stream: tokio::net::TcpStream,
    peer: std::net::SocketAddr,
    own: Arc<Hello>,
    acceptor: tokio_rustls::TlsAcceptor,
) -> Result<Greeted, String> {
    let _ = stream.set_nodelay(true);
    let stream = match tokio::time::timeout(GREETING_LIMIT, acceptor.accept(stream)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(format!("{peer} did not prove it holds this run's agent key: {e}")),
        Err(_) => return Err(format!("{peer} did not finish the TLS handshake within {}s", GREETING_LIMIT.as_secs())),
    };
    let (mut rd, mut wr) = tokio::io::split(stream);
    let hello = match tokio::time::timeout(GREETING_LIMIT, wire::read(&mut rd, wire::Sender::Agent)).await {
        Ok(Ok(Some(Frame::Hello(h)))) => h,
        Ok(Ok(Some(_))) => return Err(format!("{peer} spoke before saying who it is")),
        Ok(Ok(None)) => return Err(format!("{peer} closed the connection without a word")),
        Ok(Err(e)) => return Err(format!("{peer} is not a faultline agent: {e:#}")),
        Err(_) => return Err(format!("{peer} said nothing within {}s", GREETING_LIMIT.as_secs())),
    };
    if let Err(why) = same_build(&own, &hello) {
        let told = "this coordinator runs another build of faultline: its log says which".to_string();
        let _ = tokio::time::timeout(GREETING_LIMIT, wire::write(&mut wr, &Frame::Refused(told))).await;
        return Err(format!("agent `{}` on {} ({peer}): {why}", hello.name, hello.host));
    }
    Ok(Greeted { hello, peer, rd, wr })
}

/// What an agent's connection brings the coordinator.
enum Reply {
    Pong { n: u32, agent_ns: u64, at: Instant },
    Ready,
    Armed,
    Done(Box<CellDone>),
    Failed(String),
    Lost(String),
}

/// Where an agent's history frames go during a cell.
#[derive(Default)]
struct HistorySink {
    dir: Option<PathBuf>,
    widen_ns: u64,
    files: HashMap<u32, std::io::BufWriter<std::fs::File>>,
    error: Option<String>,
}

impl HistorySink {
    fn write(&mut self, lane: u32, mut bytes: Vec<u8>) {
        if self.error.is_some() {
            return;
        }
        let Some(dir) = &self.dir else {
            self.error = Some("sent a history nobody asked for".into());
            return;
        };
        if let Err(e) = faultline_check::history::widen_times(&mut bytes, self.widen_ns) {
            self.error = Some(format!("lane {lane}'s history: {e:#}"));
            return;
        }
        let path = dir.join(format!("{lane:04}.ops"));
        let file = match self.files.entry(lane) {
            std::collections::hash_map::Entry::Occupied(f) => f.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => match std::fs::File::create(&path) {
                Ok(f) => v.insert(std::io::BufWriter::new(f)),
                Err(e) => {
                    self.error = Some(format!("cannot create {}: {e}", path.display()));
                    return;
                }
            },
        };
        if let Err(e) = file.write_all(&bytes) {
            self.error = Some(format!("writing {}: {e}", path.display()));
        }
    }

    /// Flushes what the cell brought; why its history is not whole, if not.
    fn finish(&mut self) -> Option<String> {
        for (_, mut f) in self.files.drain() {
            if let Err(e) = f.flush() {
                self.error.get_or_insert(format!("flushing a history file: {e}"));
            }
        }
        self.dir = None;
        self.error.take()
    }
}

struct Link {
    info: AgentInfo,
    out: UnboundedSender<Frame>,
    replies: tokio::sync::Mutex<UnboundedReceiver<Reply>>,
    live: Arc<LiveCounters>,
    sink: Arc<Mutex<HistorySink>>,
    clock: Mutex<Reading>,
    /// On the coordinator's host: the same monotonic clock (clock.rs).
    same_clock: bool,
}

impl Link {
    async fn next(&self, limit: Duration) -> Reply {
        match tokio::time::timeout(limit, self.replies.lock().await.recv()).await {
            Ok(Some(r)) => r,
            Ok(None) => Reply::Lost("its connection is gone".into()),
            Err(_) => Reply::Lost(format!("it said nothing for {}", faultline_model::units::format_duration(limit))),
        }
    }

    /// Reads the agent's clock `pings` times and keeps the best reading.
    async fn read_clock(&self, pings: u32) -> Result<Reading, String> {
        let mut best: Option<Reading> = None;
        for n in 0..pings {
            let sent = Instant::now();
            let _ = self.out.send(Frame::Ping { n });
            loop {
                match self.next(Duration::from_secs(10)).await {
                    Reply::Pong { n: m, agent_ns, at } if m == n => {
                        let r = Reading::of_ping(sent, at, agent_ns);
                        best = Some(best.map_or(r, |b| b.better(r)));
                        break;
                    }
                    // An answer to an earlier ping that timed out.
                    Reply::Pong { .. } => continue,
                    Reply::Lost(why) => return Err(why),
                    _ => return Err("answered a clock reading with something else".into()),
                }
            }
        }
        let mut best = best.expect("at least one ping");
        if self.same_clock {
            best = best.same_clock();
        }
        *self.clock.lock().expect("clock lock") = best;
        Ok(best)
    }

    fn lost(&self, why: &str) -> String {
        format!("agent `{}` ({}, pid {}) was lost: {why}", self.info.name, self.info.host, self.info.pid)
    }
}

/// The run's agents, connected and ready.
pub struct Agents {
    links: Vec<Link>,
    launched: Launched,
    /// The nonce of the cell armed last ([`ArmOrder::arm`]): what an
    /// agent sends of a cell must carry it, or it is dropped as stale.
    arm: Arc<AtomicU64>,
}

impl Agents {
    /// Takes in the `launched.count` agents dialing `listener` that hold
    /// `key`, checks each is this very build, reads its clock and gives it
    /// the run. What the launcher started is stopped again if they do not
    /// all join.
    pub async fn gather(
        listener: TcpListener,
        launched: Launched,
        run: RunShare,
        key: &LinkKey,
    ) -> anyhow::Result<Agents> {
        let arm = Arc::new(AtomicU64::new(link::nonce()));
        match Agents::join(listener, &launched, run, key, &arm).await {
            Ok(links) => Ok(Agents { links, launched, arm }),
            Err(e) => {
                launched.stop().await;
                Err(e)
            }
        }
    }

    async fn join(
        listener: TcpListener,
        launched: &Launched,
        run: RunShare,
        key: &LinkKey,
        arm: &Arc<AtomicU64>,
    ) -> anyhow::Result<Vec<Link>> {
        let acceptor = link::acceptor(key)?;
        let expected = launched.count as usize;
        let mut pending: Vec<Greeted> = Vec::new();
        let deadline = Instant::now() + JOIN_LIMIT;
        // Each connection says who it is on its own clock: a silent or
        // garbled one (a port scan, a health probe) is refused and dropped
        // while the others go on, and the agents keep dialing in.
        let mut greetings = tokio::task::JoinSet::new();
        let mut refusals = Refusals::default();
        let own = Arc::new(own_hello("coordinator"));
        while pending.len() < expected {
            let event = tokio::select! {
                a = tokio::time::timeout_at(deadline, listener.accept()), if greetings.len() < MAX_GREETINGS => Joining::Accepted(a),
                Some(g) = greetings.join_next() => Joining::Greeted(g),
                why = launched.first_exit() => anyhow::bail!("{why}"),
                _ = tokio::time::sleep_until(deadline) => Joining::Late,
            };
            match event {
                Joining::Accepted(Ok(Ok((stream, peer)))) => {
                    greetings.spawn(greet(stream, peer, Arc::clone(&own), acceptor.clone()));
                }
                Joining::Accepted(Ok(Err(e))) => {
                    // A connection that failed before it was ours (reset,
                    // out of descriptors): the listener goes on.
                    refusals.push(format!("accepting: {e}"));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Joining::Greeted(Ok(Ok(greeted))) if pending.iter().any(|p| p.hello.name == greeted.hello.name) => {
                    let why = format!("{}: a second agent named `{}`", greeted.peer, greeted.hello.name);
                    launched.events.warn(&format!("refused a connection: {why}"));
                    refusals.push(why);
                }
                Joining::Greeted(Ok(Ok(greeted))) => pending.push(greeted),
                Joining::Greeted(Ok(Err(why))) => {
                    launched.events.warn(&format!("refused a connection: {why}"));
                    refusals.push(why);
                }
                Joining::Greeted(Err(e)) => refusals.push(format!("a greeting failed: {e}")),
                Joining::Accepted(Err(_)) | Joining::Late => {
                    let refused = refusals.said();
                    anyhow::bail!(
                        "{} of {expected} agents dialed in within {}s ({}): {}{refused}",
                        pending.len(),
                        JOIN_LIMIT.as_secs(),
                        launched.describe(),
                        launched.where_to_look()
                    )
                }
            }
        }
        let mut pending: Vec<_> = pending.into_iter().map(|g| (g.hello, g.rd, g.wr)).collect();
        // Dealt in name order, so a rerun gives each name the same lanes.
        pending.sort_by(|a, b| a.0.name.cmp(&b.0.name));
        let agents = pending.len() as u32;
        let peers = Arc::new(Mutex::new(Vec::new()));
        let mut links = Vec::new();
        for (index, (hello, rd, wr)) in pending.into_iter().enumerate() {
            let link = connect(hello, rd, wr, launched, (index as u32, agents), Arc::clone(&peers), Arc::clone(arm));
            peers.lock().expect("peers lock").push(link.out.clone());
            links.push(link);
        }
        for (index, link) in links.iter().enumerate() {
            link.read_clock(PINGS_AT_START).await.map_err(|why| anyhow::anyhow!(link.lost(&why)))?;
            let order = RunOrder { index: index as u32, agents, run: run.clone() };
            let _ = link.out.send(Frame::Welcome(Box::new(order)));
        }
        for link in &links {
            match link.next(JOIN_LIMIT).await {
                Reply::Ready => {}
                Reply::Failed(why) => anyhow::bail!("agent `{}` cannot run this spec: {why}", link.info.name),
                Reply::Lost(why) => anyhow::bail!(link.lost(&why)),
                _ => anyhow::bail!("agent `{}` answered the run with something else", link.info.name),
            }
        }
        Ok(links)
    }

    /// Who the agents are, and how their clocks stood at the run's start.
    pub fn infos(&self) -> Vec<AgentInfo> {
        self.links
            .iter()
            .map(|l| {
                let r = *l.clock.lock().expect("clock lock");
                AgentInfo {
                    clock_offset_us: r.offset_ns as f64 / 1e3,
                    clock_uncertainty_us: r.uncertainty_ns as f64 / 1e3,
                    round_trip_us: r.round_trip_ns as f64 / 1e3,
                    same_clock: l.same_clock && r.uncertainty_ns == 0,
                    ..l.info.clone()
                }
            })
            .collect()
    }

    /// Each agent's live counts, for the progress line.
    pub(crate) fn live(&self) -> Vec<Arc<LiveCounters>> {
        self.links.iter().map(|l| Arc::clone(&l.live)).collect()
    }

    /// Has every agent connect its lanes for the cell; on any failure the
    /// others are disarmed and the cell fails naming the agent.
    pub(crate) async fn arm(&self, run: &CellRun<'_>) -> Result<(), String> {
        let history = (!run.checkers().is_empty()).then(|| run.history_dir());
        if let Some(dir) = &history {
            std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let spec = run.spec();
        let capacity = run.engine.scenario(run.cell).capacity.is_some();
        let nonce = link::nonce();
        self.arm.store(nonce, Ordering::SeqCst);
        let order = ArmOrder {
            cell: run.position.0 - 1,
            label: run.cell.label(),
            position: run.position,
            target_name: run.cell.target.clone(),
            uri: run.running.uri.clone(),
            // A capacity search's step runs its cell at the step's rate.
            rate: capacity.then(|| spec.profiles[&run.cell.profile].open.as_ref().and_then(|o| o.rate)).flatten(),
            arm: nonce,
        };
        for link in &self.links {
            for counter in [&link.live.ok, &link.live.failed, &link.live.warmup] {
                counter.store(0, Ordering::Relaxed);
            }
            *link.sink.lock().expect("sink lock") = HistorySink { dir: history.clone(), ..Default::default() };
            let _ = link.out.send(Frame::Arm(order.clone()));
        }
        let limit = run.target_spec().ready_timeout.0 + Duration::from_secs(30);
        let answers = futures::future::join_all(self.links.iter().map(|l| l.next(limit))).await;
        let mut failed = None;
        for (link, answer) in self.links.iter().zip(answers) {
            match answer {
                Reply::Armed => {}
                Reply::Failed(why) => {
                    failed.get_or_insert(format!("agent `{}` could not arm the cell: {why}", link.info.name));
                }
                Reply::Lost(why) => {
                    failed.get_or_insert(link.lost(&why));
                }
                _ => {
                    failed.get_or_insert(format!("agent `{}` answered the cell with something else", link.info.name));
                }
            }
        }
        match failed {
            None => Ok(()),
            Some(why) => {
                for link in &self.links {
                    let _ = link.out.send(Frame::Disarm);
                }
                Err(why)
            }
        }
    }

    /// Reads every agent's clock again and starts the armed cell on all of
    /// them at one instant, which it returns (on this process's clock).
    pub(crate) async fn start(&self) -> Result<Instant, String> {
        let readings = futures::future::join_all(self.links.iter().map(|l| l.read_clock(PINGS_PER_CELL))).await;
        let mut ahead = START_AHEAD;
        for (link, r) in self.links.iter().zip(&readings) {
            match r {
                Ok(r) => ahead = ahead.max(Duration::from_nanos(r.round_trip_ns * 4)),
                Err(why) => {
                    for l in &self.links {
                        let _ = l.out.send(Frame::Disarm);
                    }
                    return Err(link.lost(why));
                }
            }
        }
        let t0 = Instant::now() + ahead;
        for (link, r) in self.links.iter().zip(readings) {
            let r = r.expect("checked above");
            // The start is placed with this reading: its uncertainty is the histories'.
            link.sink.lock().expect("sink lock").widen_ns = r.uncertainty_ns;
            let _ = link.out.send(Frame::Start { t0_ns: r.on_agent(t0) });
        }
        Ok(t0)
    }

    /// Each agent's share of the cell whose window ends at `stop_at`, as it
    /// arrives; on `cancel` or a lost agent, every agent is told to stop and
    /// still sends what it has.
    pub(crate) async fn collect<'a>(
        &'a self,
        stop_at: Instant,
        timing: &CellTiming,
        connections: u32,
        cancel: &CancellationToken,
    ) -> Vec<Result<AgentEnd, String>> {
        let last_op = stop_at + timing.deadline + timing.hang_after + timing.over_deadline_after;
        let told = std::sync::atomic::AtomicBool::new(false);
        let tell_cancel = || {
            if !told.swap(true, Ordering::Relaxed) {
                for l in &self.links {
                    let _ = l.out.send(Frame::Cancel);
                }
            }
        };
        let tell_cancel = &tell_cancel;
        let agents = self.links.len();
        let one = |(index, link): (usize, &'a Link)| async move {
            let limit = last_op.saturating_duration_since(Instant::now()) + RESULT_GRACE;
            let reply = tokio::select! {
                r = link.next(limit) => r,
                _ = cancel.cancelled() => {
                    tell_cancel();
                    link.next(RESULT_GRACE).await
                }
            };
            let (history_error, widened_ns) = {
                let mut sink = link.sink.lock().expect("sink lock");
                (sink.finish(), sink.widen_ns)
            };
            // Without this agent's share the cell cannot be measured: the
            // others stop now rather than at the window's end.
            if matches!(reply, Reply::Lost(_)) {
                tell_cancel();
            }
            match reply {
                // A crashed lane sends no outcome; the crash fails the cell.
                Reply::Done(done) if done.crashed.is_none() && !own_lanes(&done, index, agents, connections) => {
                    tell_cancel();
                    Err(format!("agent `{}` sent an invalid share: not the lanes it runs", link.info.name))
                }
                Reply::Done(mut done) => {
                    if let Some(e) = history_error {
                        done.history_incomplete.get_or_insert(e);
                    }
                    Ok(AgentEnd { agent: link.info.name.clone(), done: *done, widened_ns })
                }
                Reply::Lost(why) => Err(link.lost(&why)),
                Reply::Failed(why) => Err(format!("agent `{}`: {why}", link.info.name)),
                _ => Err(format!("agent `{}` answered the cell with something else", link.info.name)),
            }
        };
        futures::future::join_all(self.links.iter().enumerate().map(one)).await
    }

    /// Says goodbye to every agent and stops what the launcher started.
    pub async fn shut_down(self) {
        for link in &self.links {
            let _ = link.out.send(Frame::Bye);
        }
        // Let the writers send it before the connections drop.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let Agents { links, launched, .. } = self;
        drop(links);
        launched.stop().await;
    }
}

/// The reader and writer tasks of one agent's connection. What the agent
/// sends of a cell other than the one armed last is dropped (a late share
/// of a cancelled cell); what it sends of another agent's lanes loses it.
fn connect(
    hello: Hello,
    mut rd: LinkRead,
    mut wr: LinkWrite,
    launched: &Launched,
    (index, agents): (u32, u32),
    peers: Arc<Mutex<Vec<UnboundedSender<Frame>>>>,
    arm: Arc<AtomicU64>,
) -> Link {
    let (out, mut outbox) = mpsc::unbounded_channel::<Frame>();
    tokio::spawn(async move {
        loop {
            let frame = match tokio::time::timeout(KEEPALIVE_AFTER, outbox.recv()).await {
                Ok(Some(frame)) => frame,
                Ok(None) => return,
                Err(_) => Frame::Ping { n: KEEPALIVE },
            };
            if wire::write(&mut wr, &frame).await.is_err() {
                return;
            }
        }
    });
    let (tx, replies) = mpsc::unbounded_channel();
    let live = Arc::new(LiveCounters::default());
    let sink = Arc::new(Mutex::new(HistorySink::default()));
    let (live_in, sink_in) = (Arc::clone(&live), Arc::clone(&sink));
    tokio::spawn(async move {
        let current = |nonce: u64| nonce == arm.load(Ordering::SeqCst);
        let own_lane = |lane: u32| lane % agents == index;
        loop {
            let reply = match wire::read(&mut rd, wire::Sender::Agent).await {
                Ok(Some(Frame::Pong { n: KEEPALIVE, .. })) => continue,
                Ok(Some(Frame::History { lane, .. } | Frame::RoundsDone { lane, .. })) if !own_lane(lane) => {
                    Reply::Lost(format!("it sent word of lane {lane}, which is not one of its lanes"))
                }
                Ok(Some(Frame::Pong { n, agent_ns })) => Reply::Pong { n, agent_ns, at: Instant::now() },
                Ok(Some(Frame::Progress { ok, failed, warmup })) => {
                    live_in.ok.store(ok, Ordering::Relaxed);
                    live_in.failed.store(failed, Ordering::Relaxed);
                    live_in.warmup.store(warmup, Ordering::Relaxed);
                    continue;
                }
                Ok(Some(Frame::History { arm, lane, bytes })) => {
                    if current(arm) {
                        sink_in.lock().expect("sink lock").write(lane, bytes);
                    }
                    continue;
                }
                // Contention rounds: the other agents hear of it at once.
                Ok(Some(Frame::RoundsDone { lane, rounds })) => {
                    for (i, peer) in peers.lock().expect("peers lock").iter().enumerate() {
                        if i != index as usize {
                            let _ = peer.send(Frame::RoundsDone { lane, rounds });
                        }
                    }
                    continue;
                }
                Ok(Some(Frame::Ready)) => Reply::Ready,
                Ok(Some(Frame::Armed { arm })) if current(arm) => Reply::Armed,
                Ok(Some(Frame::Done(done))) if current(done.arm) => Reply::Done(done),
                // Of a cell before this one.
                Ok(Some(Frame::Armed { .. } | Frame::Done(_))) => continue,
                Ok(Some(Frame::Failed(why))) => Reply::Failed(why),
                Ok(Some(_)) => Reply::Lost("it sent a frame only a coordinator sends".into()),
                Ok(None) => Reply::Lost("it closed its connection (it exited or was killed)".into()),
                Err(e) => Reply::Lost(format!("its connection failed: {e:#}")),
            };
            let lost = matches!(reply, Reply::Lost(_));
            if tx.send(reply).is_err() || lost {
                return;
            }
        }
    });
    let same_clock = !hello.boot_id.is_empty() && hello.boot_id == super::clock::boot_id();
    let info = AgentInfo {
        name: hello.name,
        host: hello.host,
        pid: hello.pid,
        cores: hello.cores,
        faultline_version: hello.version,
        binary_sha256: hello.binary_sha256,
        launcher: launched.kind.to_string(),
        clock_offset_us: 0.0,
        clock_uncertainty_us: 0.0,
        round_trip_us: 0.0,
        same_clock: false,
        share: format!("lanes i with i % {agents} == {index}"),
    };
    Link {
        info,
        out,
        replies: tokio::sync::Mutex::new(replies),
        live,
        sink,
        clock: Mutex::new(Reading { offset_ns: 0, uncertainty_ns: 0, round_trip_ns: u64::MAX }),
        same_clock,
    }
}

/// Whether a share accounts for exactly the lanes its agent runs (lane `i`
/// on agent `i % agents`), each once: counts merged from any other set
/// would be another process's or made up.
fn own_lanes(done: &CellDone, index: usize, agents: usize, connections: u32) -> bool {
    let mut sent: Vec<u32> = done.lanes.iter().map(|l| l.lane).collect();
    sent.sort_unstable();
    sent.iter().copied().eq((index as u32..connections).step_by(agents.max(1)))
}

/// What this process says of itself: an agent's hello, or what the
/// coordinator holds an agent's against.
pub fn own_hello(name: &str) -> Hello {
    let binary = std::env::current_exe().map(|p| crate::provenance::sha256_of(&p));
    Hello {
        protocol: wire::PROTOCOL,
        version: env!("CARGO_PKG_VERSION").to_string(),
        commit: crate::provenance::COMMIT.to_string(),
        binary_sha256: binary.unwrap_or_else(|e| format!("unavailable: {e}")),
        name: name.to_string(),
        host: crate::results::host_info().hostname,
        pid: std::process::id(),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        boot_id: super::clock::boot_id(),
    }
}

/// Whether an agent is this very build: the same protocol, version,
/// commit and binary, so both ends run the same engine.
fn same_build(own: &Hello, agent: &Hello) -> Result<(), String> {
    if agent.protocol != own.protocol {
        return Err(format!("it speaks agent protocol {}, this coordinator {}", agent.protocol, own.protocol));
    }
    if (&agent.version, &agent.commit) != (&own.version, &own.commit) {
        return Err(format!(
            "it is faultline {} ({}), this coordinator {} ({}): run the same build on both",
            agent.version, agent.commit, own.version, own.commit
        ));
    }
    if agent.binary_sha256 != own.binary_sha256 {
        return Err(format!(
            "its binary's SHA-256 is {}, this coordinator's {}: run the same build on both",
            agent.binary_sha256, own.binary_sha256
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_must_account_for_exactly_its_agents_lanes() {
        let done = |lanes: &[u32]| CellDone {
            arm: 0,
            metrics: crate::metrics::CellMetrics::new(),
            lanes: lanes.iter().map(|&lane| wire::LaneOutcome { lane, ran_out_ns: None }).collect(),
            client_cpu: None,
            crashed: None,
            history_incomplete: None,
        };
        // 5 lanes on 2 agents: agent 1 runs lanes 1 and 3.
        assert!(own_lanes(&done(&[3, 1]), 1, 2, 5));
        assert!(!own_lanes(&done(&[1]), 1, 2, 5), "a lane left out");
        assert!(!own_lanes(&done(&[1, 3, 3]), 1, 2, 5), "a lane twice");
        assert!(!own_lanes(&done(&[0, 1, 3]), 1, 2, 5), "another agent's lane");
        assert!(own_lanes(&done(&[]), 3, 4, 2), "no lanes when the cell has fewer than the agents");
    }

    #[test]
    fn only_the_same_build_is_taken() {
        let own = own_hello("coordinator");
        assert!(same_build(&own, &own_hello("a")).is_ok());
        let older = Hello { version: "0.0.1".into(), ..own_hello("a") };
        assert!(same_build(&own, &older).unwrap_err().contains("run the same build"));
        let rebuilt = Hello { binary_sha256: "00".into(), ..own_hello("a") };
        assert!(same_build(&own, &rebuilt).unwrap_err().contains("SHA-256"));
        let other = Hello { protocol: wire::PROTOCOL + 1, ..own_hello("a") };
        assert!(same_build(&own, &other).unwrap_err().contains("protocol"));
    }

    /// A key holder that greets as another build is refused without
    /// learning this one's version, commit or digest; the coordinator's
    /// reason names both.
    #[tokio::test]
    async fn a_foreign_build_learns_nothing_of_this_one() {
        let own = Arc::new(own_hello("coordinator"));
        let key = LinkKey::generate().unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let connector = link::connector(&key).unwrap();
        let peer = tokio::spawn(async move {
            let tcp = tokio::net::TcpStream::connect(address).await.unwrap();
            let mut stream = connector.connect(link::server_name(), tcp).await.unwrap();
            let foreign = Hello { binary_sha256: "00".into(), ..own_hello("stranger") };
            wire::write(&mut stream, &Frame::Hello(foreign)).await.unwrap();
            wire::read(&mut stream, wire::Sender::Coordinator).await.unwrap()
        });
        let (stream, from) = listener.accept().await.unwrap();
        let why = greet(stream, from, Arc::clone(&own), link::acceptor(&key).unwrap()).await.err().unwrap();
        assert!(why.contains(&own.binary_sha256) && why.contains("stranger"), "{why}");
        let Some(Frame::Refused(told)) = peer.await.unwrap() else { panic!("no refusal") };
        assert!(!told.contains(&own.binary_sha256) && !told.contains(&own.commit), "{told}");
        assert!(told.contains("another build"), "{told}");
    }

    /// The rogue peer: it sends this build's very greeting in the
    /// clear. It is refused, and of what it read back nothing names this
    /// build (a TLS alert at most).
    #[tokio::test]
    async fn a_peer_without_the_key_learns_nothing_and_is_refused() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let own = Arc::new(own_hello("coordinator"));
        let key = LinkKey::generate().unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let peer = tokio::spawn(async move {
            let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
            let mut greeting = Vec::new();
            wire::write(&mut greeting, &Frame::Hello(own_hello("rogue"))).await.unwrap();
            stream.write_all(&greeting).await.unwrap();
            let mut read = Vec::new();
            let _ = stream.read_to_end(&mut read).await;
            read
        });
        let (stream, from) = listener.accept().await.unwrap();
        let why = greet(stream, from, Arc::clone(&own), link::acceptor(&key).unwrap()).await.err().unwrap();
        assert!(why.contains("did not prove it holds this run's agent key"), "{why}");
        let read = String::from_utf8_lossy(&peer.await.unwrap()).into_owned();
        for secret in [&own.version, &own.commit, &own.binary_sha256] {
            assert!(!read.contains(secret.as_str()), "the rogue read `{secret}`");
        }
    }
}
