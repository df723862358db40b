//! One clock for a run on agents. Each process counts nanoseconds from its
//! own epoch; the coordinator pings an agent a few times and keeps the
//! round trip that was shortest: the agent's reading then lay within half
//! that round trip of the midpoint, which gives the agent's offset and its
//! uncertainty (NTP's reasoning, without NTP). A cell's start is sent as an
//! instant of the agent's own clock, so every agent starts together, and
//! its timelines and history line up with the coordinator's fault windows.

use std::sync::OnceLock;
use std::time::Duration;

use tokio::time::Instant;

static EPOCH: OnceLock<std::time::Instant> = OnceLock::new();

fn epoch() -> std::time::Instant {
    *EPOCH.get_or_init(std::time::Instant::now)
}

/// `at` as nanoseconds since this process's epoch (0 before it).
pub fn since_epoch(at: Instant) -> u64 {
    at.into_std().saturating_duration_since(epoch()).as_nanos() as u64
}

/// The instant `ns` nanoseconds after this process's epoch.
pub fn at_epoch_ns(ns: u64) -> Instant {
    Instant::from_std(epoch() + Duration::from_nanos(ns))
}

/// How an agent's clock stands against the coordinator's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    /// The agent's clock minus the coordinator's, in nanoseconds.
    pub offset_ns: i128,
    /// Half the shortest round trip: the offset is right within this.
    pub uncertainty_ns: u64,
    pub round_trip_ns: u64,
}

impl Reading {
    /// From one ping: sent and answered at these coordinator instants, and
    /// the agent's clock when it answered.
    pub fn of_ping(sent: Instant, answered: Instant, agent_ns: u64) -> Reading {
        let round_trip = answered.saturating_duration_since(sent);
        let midpoint = since_epoch(sent) + round_trip.as_nanos() as u64 / 2;
        Reading {
            offset_ns: agent_ns as i128 - midpoint as i128,
            uncertainty_ns: round_trip.as_nanos() as u64 / 2,
            round_trip_ns: round_trip.as_nanos() as u64,
        }
    }

    /// The better of two readings: the one with the shorter round trip.
    pub fn better(self, other: Reading) -> Reading {
        match other.round_trip_ns < self.round_trip_ns {
            true => other,
            false => self,
        }
    }

    /// A coordinator instant on the agent's clock.
    pub fn on_agent(&self, at: Instant) -> u64 {
        (since_epoch(at) as i128 + self.offset_ns).max(0) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instant_goes_to_the_agent_clock_and_back() {
        let sent = Instant::now();
        let answered = sent + Duration::from_micros(300);
        // The agent's clock reads 5 ms ahead of ours at the midpoint.
        let agent_ns = since_epoch(sent) + 150_000 + 5_000_000;
        let r = Reading::of_ping(sent, answered, agent_ns);
        assert_eq!((r.offset_ns, r.uncertainty_ns, r.round_trip_ns), (5_000_000, 150_000, 300_000));
        let later = sent + Duration::from_secs(2);
        assert_eq!(r.on_agent(later), since_epoch(later) + 5_000_000);
        let slower = Reading::of_ping(sent, sent + Duration::from_millis(2), agent_ns);
        assert_eq!(r.better(slower), r);
        assert_eq!(slower.better(r), r);
        assert_eq!(at_epoch_ns(since_epoch(later)), later);
    }
}
