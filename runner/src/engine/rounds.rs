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

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

/// The cell's gate: how many rounds each client has had answered.
pub struct RoundGate {
    done: Vec<AtomicU64>,
    changed: Notify,
}

impl RoundGate {
    /// A gate for `clients` clients, and their seats in it.
    pub fn seats(clients: usize) -> Vec<RoundSeat> {
        let gate =
            Arc::new(RoundGate { done: (0..clients).map(|_| AtomicU64::new(0)).collect(), changed: Notify::new() });
        (0..clients).map(|client| RoundSeat { gate: Arc::clone(&gate), client }).collect()
    }

    fn open(&self, round: u64) -> bool {
        self.done.iter().all(|d| d.load(Ordering::Acquire) >= round)
    }

    fn set_done(&self, client: usize, rounds: u64) {
        self.done[client].store(rounds, Ordering::Release);
        self.changed.notify_waiters();
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
        let mut seats = RoundGate::seats(3);
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
}
