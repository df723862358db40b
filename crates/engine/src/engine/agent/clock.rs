//! One clock for a run on agents. Each process counts nanoseconds of its
//! host's monotonic clock (CLOCK_MONOTONIC, what `Instant` reads on Linux);
//! the coordinator pings an agent a few times and keeps the round trip that
//! was shortest: the agent's reading then lay within half that round trip
//! of the midpoint, which gives the agent's offset and its uncertainty
//! (NTP's reasoning, without NTP). An agent on the coordinator's own host
//! (the same kernel boot) reads the very same clock: its offset is 0 and
//! its uncertainty none, which the readings confirm ([`Reading::same_clock`]),
//! so its history is as exact as the coordinator's own lanes'. A cell's
//! start is sent as an instant of the agent's own clock, so every agent
//! starts together, and its timelines and history line up with the
//! coordinator's fault windows.

use std::sync::OnceLock;
use std::time::Duration;

use tokio::time::Instant;

static EPOCH: OnceLock<std::time::Instant> = OnceLock::new();

/// The instant the host's monotonic clock read zero (its boot), as this
/// process's `Instant`s count: every process on the host finds the same one
/// (to within the nanoseconds between the two readings below).
fn epoch() -> std::time::Instant {
    *EPOCH.get_or_init(|| {
        let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        let instant = std::time::Instant::now();
        // SAFETY: clock_gettime writes the timespec it is given, nothing else.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
        let since_boot = Duration::new(now.tv_sec as u64, now.tv_nsec as u32);
        instant.checked_sub(since_boot).unwrap_or(instant)
    })
}

/// This host's kernel boot (/proc/sys/kernel/random/boot_id): processes
/// that give the same one read the same monotonic clock.
pub fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id").map(|s| s.trim().to_string()).unwrap_or_default()
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

    /// The reading of an agent known to share the coordinator's clock (the
    /// same kernel boot) once the measurement agrees, its offset within its
    /// uncertainty of zero: then the offset is exactly zero and the
    /// uncertainty none. An offset the measurement puts off zero (a clock
    /// in a time namespace) keeps the measurement.
    pub fn same_clock(self) -> Reading {
        match self.offset_ns.unsigned_abs() <= u128::from(self.uncertainty_ns) {
            true => Reading { offset_ns: 0, uncertainty_ns: 0, ..self },
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
        // A reading of the same clock: exact once the measurement agrees.
        let same = Reading::of_ping(sent, answered, since_epoch(sent) + 140_000).same_clock();
        assert_eq!((same.offset_ns, same.uncertainty_ns, same.round_trip_ns), (0, 0, 300_000));
        assert_eq!(r.same_clock(), r, "5 ms off zero is not the same clock");
    }

    /// The epoch is the host's: another process's clock reads the same.
    #[test]
    fn the_epoch_is_the_hosts_monotonic_zero() {
        let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        let ours = since_epoch(Instant::now());
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
        let host = now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64;
        // The epoch is as exact as the two readings that found it were close:
        // `ours` may run a preemption's length ahead of the host's own reading.
        assert!(host.abs_diff(ours) < 50_000_000, "ours {ours} host {host}");
        assert!(!boot_id().is_empty());
    }
}
