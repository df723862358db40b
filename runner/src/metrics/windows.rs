//! Latency before, during and after each fault: gates such as
//! `p99(get, after: primary-killed) < 50ms`. Cells with faults keep every
//! successful op's end time, latency and kind (12 bytes an op), since when
//! the faults happen is known only once the cell has run. The same samples
//! place reads against the role timeline (see [`WindowSamples::reads_inside`]).

use super::{new_histogram, HIST_MAX_US};
use crate::spec::OpKind;

pub use faultline_model::stats::{Side, WindowLatency};

#[derive(Debug, Clone, Copy)]
struct Sample {
    end_ms: u32,
    latency_us: u32,
    kind: u8,
}

#[derive(Debug, Default)]
pub struct WindowSamples {
    samples: Vec<Sample>,
}

/// When a fault was requested and healed, seconds into the measured window.
pub struct FaultSpan {
    pub fault: String,
    pub requested_s: f64,
    pub healed_s: Option<f64>,
}

impl WindowSamples {
    /// A successful op that ended `end_us` into the measured window.
    pub fn record(&mut self, end_us: u64, latency_us: u64, kind: OpKind) {
        self.samples.push(Sample {
            end_ms: (end_us / 1000).min(u32::MAX as u64) as u32,
            latency_us: latency_us.min(u32::MAX as u64) as u32,
            kind: kind.index() as u8,
        });
    }

    pub fn merge(&mut self, other: WindowSamples) {
        self.samples.extend(other.samples);
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

    /// Successful ops of `kind` answered wholly inside one of `spans`
    /// (seconds into the window, inclusive): their start (end less latency)
    /// at or after its start, their end, rounded up to the millisecond, at or
    /// before its end. Returns how many ops of the kind were judged, and each
    /// one inside as (end s, latency ms, index of its span).
    pub fn reads_inside(&self, kind: OpKind, spans: &[(f64, f64)]) -> (u64, Vec<(f64, f64, usize)>) {
        let mut judged = 0;
        let mut inside = Vec::new();
        for s in self.samples.iter().filter(|s| s.kind as usize == kind.index()) {
            judged += 1;
            let end_s = (s.end_ms as f64 + 1.0) / 1e3;
            let start_s = s.end_ms as f64 / 1e3 - s.latency_us as f64 / 1e6;
            if let Some(i) = spans.iter().position(|(from, to)| start_s >= *from && end_s <= *to) {
                inside.push((s.end_ms as f64 / 1e3, s.latency_us as f64 / 1e3, i));
            }
        }
        (judged, inside)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_count_inside_a_span_only_when_sent_and_answered_in_it() {
        let mut w = WindowSamples::default();
        w.record(2_100_000, 50_000, OpKind::Get); // 2.05–2.1 s: before the span began
        w.record(2_400_000, 100_000, OpKind::Get); // 2.3–2.4 s: inside
        w.record(2_400_000, 100_000, OpKind::Set); // not a read
        w.record(4_999_500, 1_000, OpKind::Get); // ends at 4.9995 s, rounded up to 5.0 s: inside
        w.record(5_000_500, 1_000, OpKind::Get); // ends after the span
        let (judged, inside) = w.reads_inside(OpKind::Get, &[(2.25, 5.0)]);
        assert_eq!(judged, 4);
        assert_eq!(inside.iter().map(|r| r.0).collect::<Vec<_>>(), [2.4, 4.999]);
    }

    #[test]
    fn ops_fall_in_the_window_their_end_is_in() {
        let mut w = WindowSamples::default();
        // 1 ms gets before the fault at 2 s, 100 ms gets while it lasts, 5 ms after the heal at 4 s.
        for t in 0..2000 {
            w.record(t * 1000, 1000, OpKind::Get);
        }
        for t in 2000..4000 {
            w.record(t * 1000, 100_000, OpKind::Get);
        }
        for t in 4000..6000 {
            w.record(t * 1000, 5000, OpKind::Get);
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
