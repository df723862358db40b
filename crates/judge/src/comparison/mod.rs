//! Ratios between the variants of a scenario (a candidate against Redis:
//! "0.91x") with their noise: per group of comparable cells, each variant's
//! mean and median throughput, p50 and p99, the ratio of the means to the
//! baseline's, the median of the per-repeat paired ratios, a bootstrap
//! interval, and a word only where the interval says something.
//!
//! `faultline compare` (the CLI's compare.rs) compares two runs of one
//! spec the same way (before → after), normalised by a `control` variant
//! that did not change between them.

pub mod bootstrap;
pub mod control;

use bootstrap::{Placement, Samples};
use faultline_model::compare::{Group, Measure, RepeatValues};
use faultline_model::results::{CellResult, Comparison, Ratio, VariantStats, Word};
use faultline_spec::Spec;

/// Ratios within 1 ± this count as no difference unless the spec says otherwise.
pub const DEFAULT_PARITY_BAND: f64 = 0.05;

pub fn variant_stats(repeats: &[RepeatValues]) -> VariantStats {
    let values = |m: Measure| repeats.iter().filter_map(|r| m.of(r)).collect::<Vec<f64>>();
    let throughput = values(Measure::Throughput);
    // A latency (a capacity, a delivered rate) is reported only when every
    // repeat measured it.
    let latency = |m: Measure| {
        let v = values(m);
        (v.len() == repeats.len()).then(|| bootstrap::mean(&v)).flatten()
    };
    VariantStats {
        repeats: repeats.len() as u32,
        mean_throughput: bootstrap::mean(&throughput).unwrap_or(0.0),
        median_throughput: bootstrap::median(&throughput).unwrap_or(0.0),
        p50_ms: latency(Measure::P50),
        p99_ms: latency(Measure::P99),
        capacity: latency(Measure::Capacity),
        mean_delivered_rate: latency(Measure::DeliveredRate),
        error_share: {
            let shares: Vec<f64> = repeats.iter().filter_map(|r| r.error_share).collect();
            (shares.len() == repeats.len()).then(|| bootstrap::mean(&shares)).flatten()
        },
    }
}

/// Whether repeats with the same number ran side by side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pairing {
    /// One run's alternated repeats: repeat N of each variant ran together.
    ByRepeat,
    /// Two runs: nothing pairs.
    None,
}

/// One run's values of `measure` for a baseline and a candidate, paired by
/// repeat number where the repeats ran side by side.
pub struct Sides {
    pub baseline: Vec<f64>,
    pub candidate: Vec<f64>,
    pairs: Vec<(f64, f64)>,
    all_paired: bool,
}

impl Sides {
    /// None when a repeat did not measure `measure`.
    pub fn of(
        measure: Measure,
        baseline: &[RepeatValues],
        candidate: &[RepeatValues],
        pairing: Pairing,
    ) -> Option<Sides> {
        let side = |rs: &[RepeatValues]| rs.iter().map(|r| measure.of(r)).collect::<Option<Vec<f64>>>();
        let (b, c) = (side(baseline)?, side(candidate)?);
        let pairs: Vec<(f64, f64)> = baseline
            .iter()
            .filter(|_| pairing == Pairing::ByRepeat)
            .filter_map(|rb| {
                let rc = candidate.iter().find(|rc| rc.repeat == rb.repeat)?;
                Some((measure.of(rb)?, measure.of(rc)?))
            })
            .collect();
        let all_paired = pairs.len() == baseline.len() && pairs.len() == candidate.len();
        Some(Sides { baseline: b, candidate: c, pairs, all_paired })
    }

    /// What the bootstrap resamples: the pairs when every repeat has its
    /// pair (which cancels drift between repeats), else each side on its own.
    pub fn samples(&self) -> Samples<'_> {
        match self.all_paired {
            true => Samples::Paired(&self.pairs),
            false => Samples::Independent { baseline: &self.baseline, candidate: &self.candidate },
        }
    }
}

/// A ratio of `measure`, candidate over baseline, with its interval.
pub fn ratio(
    measure: Measure,
    baseline: &[RepeatValues],
    candidate: &[RepeatValues],
    pairing: Pairing,
    seed: u64,
) -> Ratio {
    let Some(sides) = Sides::of(measure, baseline, candidate, pairing) else { return Ratio::default() };
    let per_pair: Vec<f64> = sides.pairs.iter().filter(|(b, _)| *b > 0.0).map(|(b, c)| c / b).collect();
    Ratio {
        value: bootstrap::ratio_of_means(&sides.baseline, &sides.candidate),
        paired_median: bootstrap::median(&per_pair),
        interval: bootstrap::interval(&sides.samples(), seed),
    }
}

/// The word a throughput ratio earns: none while its interval crosses an
/// edge of the parity band (or there is no interval).
pub fn word(throughput: &Ratio, band: f64) -> Option<Word> {
    match bootstrap::place(throughput.interval?, band) {
        Placement::Above => Some(Word::Win),
        Placement::Inside => Some(Word::Parity),
        Placement::Below => Some(Word::Loss),
        Placement::Straddles => None,
    }
}

/// Every non-baseline variant against its scenario's first variant, per group.
pub fn compare(spec: &Spec, cells: &[CellResult]) -> Vec<Comparison> {
    let band = spec.report.parity.unwrap_or(DEFAULT_PARITY_BAND);
    let mut groups: Vec<Group> = Vec::new();
    for c in cells {
        let g = Group::of(c);
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    let mut out = Vec::new();
    for group in groups {
        let Some(scenario) = spec.scenarios.iter().find(|s| s.name == group.scenario) else { continue };
        let variants: Vec<String> = scenario.variants().iter().map(|(t, w)| scenario.variant_name(t, w)).collect();
        let Some(baseline) = variants.first() else { continue };
        let repeats = |variant: &str| -> Vec<RepeatValues> {
            cells
                .iter()
                .filter(|c| Group::of(c) == group && c.variant() == variant)
                .filter_map(RepeatValues::of)
                .collect()
        };
        let base = repeats(baseline);
        if base.is_empty() {
            continue;
        }
        for target in variants.iter().skip(1) {
            let cand = repeats(target);
            if cand.is_empty() {
                continue;
            }
            let seed = bootstrap::seed_for(spec.seed, &format!("{}/{target}", group.label()));
            // A capacity search's cells hold each side's step at its own
            // capacity, a different rate on each side: only capacities compare.
            let searched = scenario.capacity.is_some();
            let of = |measure: Measure| match searched && measure != Measure::Capacity {
                true => Ratio::default(),
                false => ratio(measure, &base, &cand, Pairing::ByRepeat, seed),
            };
            let throughput = of(Measure::Throughput);
            out.push(Comparison {
                scenario: group.scenario.clone(),
                matrix: group.matrix.clone(),
                profile: group.profile.clone(),
                baseline: baseline.clone(),
                target: target.clone(),
                repeats: cand.iter().filter(|c| base.iter().any(|b| b.repeat == c.repeat)).count() as u32,
                baseline_stats: variant_stats(&base),
                target_stats: variant_stats(&cand),
                word: word(&throughput, band),
                throughput,
                p50: of(Measure::P50),
                p99: of(Measure::P99),
                capacity: of(Measure::Capacity),
                // Fan-out: deliveries per second, as throughput is compared.
                delivered_rate: base
                    .iter()
                    .chain(&cand)
                    .all(|r| r.delivered_rate.is_some())
                    .then(|| ratio(Measure::DeliveredRate, &base, &cand, Pairing::ByRepeat, seed)),
                parity_band: band,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repeats(values: &[f64]) -> Vec<RepeatValues> {
        values
            .iter()
            .enumerate()
            .map(|(i, &t)| RepeatValues {
                repeat: i as u32 + 1,
                throughput: t,
                p50_ms: Some(100.0 / t),
                p99_ms: Some(1000.0 / t),
                capacity: None,
                delivered_rate: None,
                error_share: Some(0.0),
            })
            .collect()
    }

    #[test]
    fn a_clear_loss_a_clear_win_and_parity_get_their_words() {
        let base = repeats(&[100_000.0, 102_000.0, 99_000.0]);
        let loss = ratio(Measure::Throughput, &base, &repeats(&[12_000.0, 12_500.0, 11_800.0]), Pairing::ByRepeat, 1);
        assert!((loss.value.unwrap() - 0.1207).abs() < 0.001, "{loss:?}");
        assert_eq!(word(&loss, 0.05), Some(Word::Loss));
        let win = ratio(Measure::Throughput, &base, &repeats(&[132_000.0, 134_000.0, 131_000.0]), Pairing::ByRepeat, 1);
        assert_eq!(word(&win, 0.05), Some(Word::Win));
        let same = ratio(Measure::Throughput, &base, &repeats(&[99_500.0, 101_000.0, 99_800.0]), Pairing::ByRepeat, 1);
        assert_eq!(word(&same, 0.05), Some(Word::Parity));
        // A 0.97x whose repeats scatter from 0.85 to 1.1 earns no word.
        let unclear =
            ratio(Measure::Throughput, &base, &repeats(&[85_000.0, 112_000.0, 95_000.0]), Pairing::ByRepeat, 1);
        assert_eq!(word(&unclear, 0.05), None, "{unclear:?}");
        // One repeat: no interval, no word, but the ratio stands.
        let once = ratio(Measure::Throughput, &base[..1], &repeats(&[50_000.0]), Pairing::ByRepeat, 1);
        assert_eq!((once.value, once.interval, word(&once, 0.05)), (Some(0.5), None, None));
    }

    #[test]
    fn the_paired_median_is_of_per_repeat_ratios() {
        let base = repeats(&[100.0, 200.0, 100.0]);
        let cand = repeats(&[90.0, 100.0, 95.0]);
        // Per repeat: 0.9, 0.5, 0.95; of the means: 285/400.
        let r = ratio(Measure::Throughput, &base, &cand, Pairing::ByRepeat, 1);
        assert_eq!(r.paired_median, Some(0.9));
        assert!((r.value.unwrap() - 0.7125).abs() < 1e-9);
        let s = variant_stats(&base);
        assert_eq!((s.repeats, s.median_throughput), (3, 100.0));
        assert!((s.mean_throughput - 133.333).abs() < 0.001);
    }

    #[test]
    fn unpaired_repeats_resample_each_side() {
        let base = repeats(&[100.0, 101.0, 99.0]);
        let mut cand = repeats(&[80.0, 81.0]);
        cand[1].repeat = 7;
        let r = ratio(Measure::Throughput, &base, &cand, Pairing::ByRepeat, 1);
        assert_eq!(r.paired_median, Some(0.8));
        assert!(r.interval.is_some());
    }

    #[test]
    fn delivered_rates_compare_as_throughput_does() {
        let with = |values: &[f64], rates: &[f64]| {
            let mut r = repeats(values);
            r.iter_mut().zip(rates).for_each(|(r, d)| r.delivered_rate = Some(*d));
            r
        };
        let base = with(&[100.0, 100.0, 100.0], &[1600.0, 1620.0, 1580.0]);
        let cand = with(&[100.0, 100.0, 100.0], &[800.0, 810.0, 790.0]);
        let r = ratio(Measure::DeliveredRate, &base, &cand, Pairing::ByRepeat, 1);
        assert!((r.value.unwrap() - 0.5).abs() < 1e-9, "{r:?}");
        assert!(r.interval.is_some_and(|i| i.low <= 0.5 && i.high >= 0.5));
        assert_eq!(Measure::from_name("delivered_rate"), Some(Measure::DeliveredRate));
    }

    #[test]
    fn a_latency_missing_in_a_repeat_gives_no_latency_ratio() {
        let base = repeats(&[100.0, 100.0]);
        let mut cand = repeats(&[100.0, 100.0]);
        cand[0].p99_ms = None;
        assert!(ratio(Measure::P99, &base, &cand, Pairing::ByRepeat, 1).value.is_none());
        assert!(variant_stats(&cand).p99_ms.is_none());
        assert!(ratio(Measure::P50, &base, &cand, Pairing::ByRepeat, 1).value.is_some());
    }
}
