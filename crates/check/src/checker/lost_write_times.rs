//! When the lost writes were acknowledged, per fault: a count of lost
//! acknowledged writes is the tool's claim, and the role timeline is what
//! makes it believable. Each lost write is held against the spans in which a
//! demoted primary was still primary ([`DemotedPrimary`]): a write that
//! primary acknowledged never reached its successor, so it is lost when the
//! Sentinels make the old primary a replica. Lost writes acknowledged
//! outside every such span are counted apart, so the report shows plainly
//! when the spans do not explain the loss.

use faultline_model::faults::FaultRecord;
use faultline_model::roles::DemotedPrimary;

/// What the lost-write checker saw, on the history's clock (ns since the
/// cell's clock started).
#[derive(Debug, Default)]
pub struct AckTimes {
    /// When each lost write was acknowledged, in order.
    pub lost: Vec<u64>,
    /// How many writes were acknowledged inside each span it was given.
    pub acked_in_spans: Vec<u64>,
}

pub use faultline_model::checks::{DemotedWrites, LostWritesAround, Spread};

/// The spans as `[from, to]` on the history's clock, for the checker.
pub fn spans_ns(spans: &[DemotedPrimary], window_start_ns: u64) -> Vec<(u64, u64)> {
    let ns = |s: f64| (window_start_ns as f64 + s * 1e9).max(0.0) as u64;
    spans.iter().map(|d| (ns(d.from_s), if d.open_at_end { u64::MAX } else { ns(d.to_s) })).collect()
}

/// Gives each fault record its share of the lost writes.
pub fn place(faults: &mut [FaultRecord], spans: &[DemotedPrimary], times: &AckTimes, window_start_ns: u64) {
    if faults.is_empty() {
        return;
    }
    let lost_s: Vec<f64> = times.lost.iter().map(|&ns| (ns as f64 - window_start_ns as f64) / 1e9).collect();
    // Fault i's stretch: from its request to the next one's; the first
    // starts at the beginning of time, the last runs to its end.
    let mut order: Vec<usize> = (0..faults.len()).collect();
    order.sort_by(|&a, &b| faults[a].requested_s.total_cmp(&faults[b].requested_s));
    let stretch = |t: f64| order.iter().rev().find(|&&i| faults[i].requested_s <= t).copied().unwrap_or(order[0]);
    // Each span belongs to the fault in whose stretch it was first seen.
    let owner: Vec<usize> = spans.iter().map(|d| stretch(d.seen_s)).collect();
    let mut around: Vec<LostWritesAround> = vec![LostWritesAround::default(); faults.len()];
    for (i, a) in around.iter_mut().enumerate() {
        let mine = || lost_s.iter().copied().filter(|&t| stretch(t) == i);
        // Spans overlap when two members were demoted primaries at once: a
        // lost write goes to the first span that holds it, so none counts twice.
        let first_span = |t: f64| (0..spans.len()).find(|&n| owner[n] == i && spans[n].contains(t));
        a.lost = Spread::of(mine());
        a.outside_demoted = Spread::of(mine().filter(|&t| first_span(t).is_none()));
        for (n, d) in spans.iter().enumerate().filter(|(n, _)| owner[*n] == i) {
            a.demoted_primaries.push(DemotedWrites {
                span: d.clone(),
                acked_writes: times.acked_in_spans.get(n).copied().unwrap_or(0),
                lost: Spread::of(mine().filter(|&t| first_span(t) == Some(n))),
            });
        }
    }
    for (f, a) in faults.iter_mut().zip(around) {
        f.lost_writes = Some(a);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(name: &str, requested_s: f64) -> FaultRecord {
        FaultRecord {
            hit: vec!["kv-0".into()],
            confirmed_s: Some(requested_s),
            ..FaultRecord::requested(name, "failover", "kv.primary", requested_s)
        }
    }

    #[test]
    fn lost_writes_are_placed_per_fault_against_the_demoted_primary_spans() {
        let span = DemotedPrimary {
            member: "kv-0".into(),
            successor: "kv-2".into(),
            from_s: 10.75,
            seen_s: 11.0,
            to_s: 14.9,
            open_at_end: false,
        };
        // The window starts 1 s into the history's clock.
        let ns = |s: f64| ((s + 1.0) * 1e9) as u64;
        assert_eq!(spans_ns(std::slice::from_ref(&span), ns(0.0)), [(ns(10.75), ns(14.9))]);
        let times =
            AckTimes { lost: vec![ns(2.0), ns(11.02), ns(12.0), ns(14.87), ns(16.0)], acked_in_spans: vec![900] };
        let mut faults = [fault("early", 5.0), fault("graceful", 10.0)];
        place(&mut faults, std::slice::from_ref(&span), &times, ns(0.0));
        // The first fault takes what came before it; the span was first
        // seen in the second fault's stretch.
        let early = faults[0].lost_writes.clone().unwrap();
        assert_eq!((early.lost.count, early.outside_demoted.count), (1, 1));
        assert!(early.demoted_primaries.is_empty());
        let graceful = faults[1].lost_writes.clone().unwrap();
        assert_eq!((graceful.lost.count, graceful.outside_demoted.count), (4, 1));
        assert_eq!(graceful.demoted_primaries.len(), 1);
        let d = &graceful.demoted_primaries[0];
        assert_eq!((d.acked_writes, d.lost.count), (900, 3));
        assert!((d.lost.first_s.unwrap() - 11.02).abs() < 1e-6 && (d.lost.last_s.unwrap() - 14.87).abs() < 1e-6);
        let outside = &graceful.outside_demoted;
        assert_eq!((outside.first_s, outside.last_s), (Some(16.0), Some(16.0)));

        // All inside; nothing lost and no span: nothing placed but the count.
        let times = AckTimes { lost: vec![ns(11.02), ns(14.87)], acked_in_spans: vec![900] };
        let mut faults = [fault("graceful", 10.0)];
        place(&mut faults, std::slice::from_ref(&span), &times, ns(0.0));
        let placed = faults[0].lost_writes.clone().unwrap();
        assert_eq!((placed.lost.count, placed.outside_demoted.count), (2, 0));
        let mut faults = [fault("coordinated", 10.0)];
        place(&mut faults, &[], &AckTimes::default(), ns(0.0));
        let placed = faults[0].lost_writes.clone().unwrap();
        assert_eq!((placed.lost.count, placed.demoted_primaries.len()), (0, 0));

        // Two members demoted primaries at once (overlapping spans): each
        // lost write is placed once.
        let other = DemotedPrimary { member: "kv-1".into(), ..span.clone() };
        let times = AckTimes { lost: vec![ns(11.02), ns(12.0), ns(16.0)], acked_in_spans: vec![900, 900] };
        let mut faults = [fault("isolated", 10.0)];
        place(&mut faults, &[span.clone(), other], &times, ns(0.0));
        let placed = faults[0].lost_writes.clone().unwrap();
        let inside: u64 = placed.demoted_primaries.iter().map(|d| d.lost.count).sum();
        assert_eq!((inside, placed.outside_demoted.count, placed.lost.count), (2, 1, 3));
    }
}
