//! Contention rounds across a cell's clients. Each client's writers start a
//! round together once its calls of the last round are answered; the gate
//! holds the clients together too: no client starts round `r` before every
//! client still running has had its round `r - 1` answered. Without it a
//! client that drew faster answers ran a round ahead, and at 8 clients of
//! 32 writers the median round's key saw 128 of the 256 writers the spec
//! asked for (the hot-key checker's note measures it).
//!
//! A client that leaves (its rounds done, the window over, cancelled, or
//! crashed) takes its seat with it, so nobody waits for it.
//!
//! On agents the gate spans the cell: each agent's gate has a place for
//! every client of the cell, its own clients' progress is relayed (through
//! the coordinator) to the other agents, and theirs arrives the same way
//! ([`RemoteRounds`]), so no client anywhere starts round `r` before every
//! client everywhere has had round `r - 1` answered.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// Where this process's clients' progress goes for the other agents.
pub type Relay = Box<dyn Fn(usize, u64) + Send + Sync>;

/// The cell's gate: how many rounds each client has had answered.
pub struct RoundGate {
    done: Vec<AtomicU64>,
    changed: Notify,
    relay: Option<Relay>,
}

impl RoundGate {
    /// A gate for a cell of `clients` clients. On agents some of them run
    /// elsewhere: seats are taken for this process's clients only, and
    /// their progress goes to `relay`.
    pub fn new(clients: usize, relay: Option<Relay>) -> Arc<RoundGate> {
        Arc::new(RoundGate { done: (0..clients).map(|_| AtomicU64::new(0)).collect(), changed: Notify::new(), relay })
    }

    pub fn seat(self: &Arc<Self>, client: usize) -> RoundSeat {
        RoundSeat { gate: Arc::clone(self), client }
    }

    /// Another agent's client has had `rounds` rounds answered (`u64::MAX`: it left).
    fn remote_done(&self, client: usize, rounds: u64) {
        if let Some(d) = self.done.get(client) {
            d.fetch_max(rounds, Ordering::AcqRel);
            self.changed.notify_waiters();
        }
    }

    fn open(&self, round: u64) -> bool {
        self.done.iter().all(|d| d.load(Ordering::Acquire) >= round)
    }

    fn set_done(&self, client: usize, rounds: u64) {
        self.done[client].store(rounds, Ordering::Release);
        self.changed.notify_waiters();
        if let Some(relay) = &self.relay {
            relay(client, rounds);
        }
    }
}

/// In an agent: the other agents' clients' progress, held until the
/// cell's gate exists (an update may arrive first) and applied to it.
#[derive(Default)]
pub struct RemoteRounds {
    state: Mutex<Remote>,
}

/// The cell's gate once there is one, and the updates that came before it.
#[derive(Default)]
struct Remote {
    gate: Option<Arc<RoundGate>>,
    early: Vec<(usize, u64)>,
}

impl RemoteRounds {
    /// The cell's gate: the updates that came early are applied now.
    pub fn attach(&self, gate: &Arc<RoundGate>) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        for (client, rounds) in state.early.drain(..) {
            gate.remote_done(client, rounds);
        }
        state.gate = Some(Arc::clone(gate));
    }

    pub fn update(&self, client: usize, rounds: u64) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match &state.gate {
            Some(gate) => gate.remote_done(client, rounds),
            None => state.early.push((client, rounds)),
        }
    }

    /// The cell is over: the next cell's gate starts afresh.
    pub fn detach(&self) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = Remote::default();
    }
}

/// One client's place at the gate; leaving it (dropping) opens the gate
/// for the others.
pub struct RoundSeat {
    gate: Arc<RoundGate>,
    client: usize,
}

impl RoundSeat {
    /// This client has had `rounds` rounds answered: whether it may start
    /// the next one now.
    pub fn finished(&self, rounds: u64) -> bool {
        if self.gate.done[self.client].load(Ordering::Relaxed) != rounds {
            self.gate.set_done(self.client, rounds);
        }
        self.gate.open(rounds)
    }

    /// Waits until every client has had `rounds` rounds answered (or left).
    pub async fn opened(&self, rounds: u64) {
        loop {
            let changed = self.gate.changed.notified();
            tokio::pin!(changed);
            // Registered before the check, so no change slips in between.
            changed.as_mut().enable();
            if self.gate.open(rounds) {
                return;
            }
            changed.await;
        }
    }
}

impl Drop for RoundSeat {
    fn drop(&mut self) {
        self.gate.set_done(self.client, u64::MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn no_client_starts_a_round_before_every_other_finished_the_last() {
        let gate = RoundGate::new(3, None);
        let mut seats: Vec<RoundSeat> = (0..3).map(|c| gate.seat(c)).collect();
        let c = seats.pop().unwrap();
        let (a, b) = (seats.remove(0), seats.remove(0));
        assert!(!a.finished(1), "b and c are still in round 0");
        assert!(!b.finished(1));
        let waiting = tokio::spawn(async move {
            a.opened(1).await;
            a
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished());
        assert!(c.finished(1), "the last one in opens the gate");
        let a = tokio::time::timeout(Duration::from_secs(1), waiting).await.unwrap().unwrap();
        // A client that leaves holds nobody up.
        drop(c);
        assert!(!a.finished(2), "b is still in round 1");
        assert!(b.finished(2));
    }

    /// Two agents, each with one client of a two-client cell, their
    /// progress relayed to each other: neither starts a round the other
    /// has not finished, and an update that comes before the gate counts.
    #[tokio::test]
    async fn agents_hold_their_clients_together_through_the_relay() {
        let (remote_a, remote_b) = (Arc::new(RemoteRounds::default()), Arc::new(RemoteRounds::default()));
        let to_b = Arc::clone(&remote_b);
        let gate_a = RoundGate::new(2, Some(Box::new(move |c, r| to_b.update(c, r))));
        remote_a.attach(&gate_a);
        let a = gate_a.seat(0);
        assert!(!a.finished(1), "client 1, on agent b, has not finished round 0");
        let to_a = Arc::clone(&remote_a);
        let gate_b = RoundGate::new(2, Some(Box::new(move |c, r| to_a.update(c, r))));
        // Agent a's update came before agent b's gate existed: held, then applied.
        remote_b.attach(&gate_b);
        let b = gate_b.seat(1);
        let waiting = tokio::spawn(async move {
            a.opened(1).await;
            a
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished());
        assert!(b.finished(1), "a finished round 0 already: b may go on");
        let a = tokio::time::timeout(Duration::from_secs(1), waiting).await.unwrap().unwrap();
        assert!(!a.finished(2));
        drop(b);
        assert!(a.finished(2), "a client that left elsewhere holds nobody up");
    }
}
