//! Latency before, during and after each fault: gates such as
//! `p99(get, after: primary-killed) < 50ms`. Cells with faults keep every
//! successful op's end time, latency and kind (12 bytes an op), since when
//! the faults happen is known only once the cell has run. The same samples
//! place reads against the role timeline (see [`WindowSamples::reads`]),
//! each with the member that answered it where the driver said: an index
//! into the samples' own address table, in a byte the sample's alignment
//! leaves free, so attribution costs no memory per op.

use serde::{Deserialize, Serialize};

use super::{new_histogram, HIST_MAX_US};
use faultline_model::ops::OpKind;

use faultline_model::stats::{Side, WindowLatency};

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Sample {
    end_ms: u32,
    latency_us: u32,
    kind: u8,
    /// Who answered: 0 when unknown, else 1 + its index in `addresses`.
    answered_by: u8,
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct WindowSamples {
    samples: Vec<Sample>,
    /// The members' addresses (`host:port`) the samples name.
    addresses: Vec<String>,
}

/// Past this many distinct addresses a cell's reads are no longer told
/// apart by member (a replica set has at most 50 members).
const MAX_ADDRESSES: usize = u8::MAX as usize;

/// When a fault was requested and healed, seconds into the measured window.
pub struct FaultSpan {
    pub fault: String,
    pub requested_s: f64,
    pub healed_s: Option<f64>,
}

impl WindowSamples {
    /// A successful op that ended `end_us` into the measured window,
    /// answered by the member at `answered_by` (`host:port`) if known.
    pub fn record(&mut self, end_us: u64, latency_us: u64, kind: OpKind, answered_by: Option<&str>) {
        let answered_by = answered_by.map_or(0, |a| self.address_index(a));
        self.samples.push(Sample {
            end_ms: (end_us / 1000).min(u32::MAX as u64) as u32,
            latency_us: latency_us.min(u32::MAX as u64) as u32,
            kind: kind.index() as u8,
            answered_by,
        });
    }

    /// 1 + the index of `address` in the table (added if new), or 0 when the
    /// table is full.
    fn address_index(&mut self, address: &str) -> u8 {
        match self.addresses.iter().position(|a| a == address) {
            Some(i) => i as u8 + 1,
            None if self.addresses.len() < MAX_ADDRESSES => {
                self.addresses.push(address.to_string());
                self.addresses.len() as u8
            }
            None => 0,
        }
    }

    pub fn merge(&mut self, other: WindowSamples) {
        // Their indices into their table become indices into ours.
        let mapped: Vec<u8> = other.addresses.iter().map(|a| self.address_index(a)).collect();
        self.samples.extend(other.samples.into_iter().map(|mut s| {
            // An index past the other table (a share that lies) names no one.
            if s.answered_by > 0 {
                s.answered_by = mapped.get(s.answered_by as usize - 1).copied().unwrap_or(0);
            }
            s
        }));
    }

    /// Before, during and after each fault, for the kinds the cell sent.
    pub fn latencies(&self, faults: &[FaultSpan], kinds: &[OpKind], window_s: f64) -> Vec<WindowLatency> {
        let mut out = Vec::new();
        for f in faults {
            let heal = f.healed_s.unwrap_or(f.requested_s).min(window_s);
            let spans = [
                (Side::Before, 0.0, f.requested_s),
                (Side::During, f.requested_s, if f.healed_s.is_some() { heal } else { window_s }),
                (Side::After, heal, window_s),
            ];
            for (side, from_s, to_s) in spans {
                let (from_ms, to_ms) = ((from_s * 1e3) as u32, (to_s * 1e3).ceil() as u32);
                let mut hists: Vec<_> = kinds.iter().map(|_| new_histogram()).collect();
                for s in self.samples.iter().filter(|s| s.end_ms >= from_ms && s.end_ms < to_ms) {
                    if let Some(i) = kinds.iter().position(|k| k.index() == s.kind as usize) {
                        hists[i].saturating_record((s.latency_us as u64).clamp(1, HIST_MAX_US));
                    }
                }
                let per_op =
                    kinds.iter().zip(&hists).map(|(k, h)| (k.as_str().to_string(), super::latency_stats(h))).collect();
                out.push(WindowLatency { fault: f.fault.clone(), window: side, from_s, to_s, per_op });
            }
        }
        out
    }

    /// Every successful op of `kind`: sent at its end less its latency,
    /// answered by its end rounded up to the millisecond, and the address of
    /// the member that answered it, where known.
    pub fn reads(&self, kind: OpKind) -> impl Iterator<Item = SampledRead<'_>> {
        self.samples.iter().filter(move |s| s.kind as usize == kind.index()).map(|s| SampledRead {
            start_s: s.end_ms as f64 / 1e3 - s.latency_us as f64 / 1e6,
            end_s: (s.end_ms as f64 + 1.0) / 1e3,
            answered_s: s.end_ms as f64 / 1e3,
            latency_ms: s.latency_us as f64 / 1e3,
            answered_by: (s.answered_by > 0).then(|| self.addresses[s.answered_by as usize - 1].as_str()),
        })
    }
}

/// One read as [`WindowSamples::reads`] gives it (seconds into the window).
pub struct SampledRead<'a> {
    pub start_s: f64,
    pub end_s: f64,
    pub answered_s: f64,
    pub latency_ms: f64,
    pub answered_by: Option<&'a str>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_keep_their_span_and_who_answered_them_across_a_merge() {
        assert_eq!(std::mem::size_of::<Sample>(), 12, "the member's index fits in the sample's padding");
        let mut lane = WindowSamples::default();
        lane.record(2_400_000, 100_000, OpKind::Get, Some("127.0.0.1:27018"));
        lane.record(2_400_000, 100_000, OpKind::Set, Some("127.0.0.1:27018")); // not a read
        lane.record(4_999_500, 1_000, OpKind::Get, None);
        let mut other = WindowSamples::default();
        other.record(5_000_500, 1_000, OpKind::Get, Some("10.0.0.3:27017"));
        other.record(5_100_000, 1_000, OpKind::Get, Some("127.0.0.1:27018"));
        let mut cell = WindowSamples::default();
        cell.merge(other);
        cell.merge(lane);
        let reads: Vec<(f64, f64, Option<&str>)> =
            cell.reads(OpKind::Get).map(|r| (r.start_s, r.end_s, r.answered_by)).collect();
        assert_eq!(reads.len(), 4);
        assert_eq!(reads[0].2, Some("10.0.0.3:27017"));
        assert_eq!(reads[1].2, Some("127.0.0.1:27018"));
        // 2.3–2.4 s, the end rounded up to the millisecond.
        assert!((reads[2].0 - 2.3).abs() < 1e-9 && (reads[2].1 - 2.401).abs() < 1e-9, "{reads:?}");
        assert_eq!((reads[2].2, reads[3].2), (Some("127.0.0.1:27018"), None));
    }

    #[test]
    fn ops_fall_in_the_window_their_end_is_in() {
        let mut w = WindowSamples::default();
        // 1 ms gets before the fault at 2 s, 100 ms gets while it lasts, 5 ms after the heal at 4 s.
        for t in 0..2000 {
            w.record(t * 1000, 1000, OpKind::Get, None);
        }
        for t in 2000..4000 {
            w.record(t * 1000, 100_000, OpKind::Get, None);
        }
        for t in 4000..6000 {
            w.record(t * 1000, 5000, OpKind::Get, None);
        }
        let span = FaultSpan { fault: "f".into(), requested_s: 2.0, healed_s: Some(4.0) };
        let l = w.latencies(&[span], &[OpKind::Get, OpKind::Set], 6.0);
        let p99 = |side: Side| l.iter().find(|x| x.window == side).unwrap().per_op["get"].unwrap().p99;
        assert!((p99(Side::Before) - 1.0).abs() < 0.01);
        assert!((p99(Side::During) - 100.0).abs() < 0.5);
        assert!((p99(Side::After) - 5.0).abs() < 0.01);
        assert!(l[0].per_op["set"].is_none());
        // Never healed: during and after both run from the request to the end.
        let span = FaultSpan { fault: "k".into(), requested_s: 2.0, healed_s: None };
        let l = w.latencies(&[span], &[OpKind::Get], 6.0);
        assert_eq!((l[1].from_s, l[1].to_s, l[2].from_s, l[2].to_s), (2.0, 6.0, 2.0, 6.0));
    }
}
