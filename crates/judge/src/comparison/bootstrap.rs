//! How sure a ratio is: a seeded percentile bootstrap over the repeats, and
//! the words a ratio earns only when its interval is clear of the band that
//! counts as "no difference".
//!
//! Repeats are few (three is typical), so the interval is wide, and that is
//! the point: a 0.97x from three noisy repeats must not read as a loss.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Resamples drawn for one interval: enough that the 2.5th and 97.5th
/// percentiles move by well under 1% between seeds.
const RESAMPLES: usize = 10_000;

/// The interval's coverage.
pub const CONFIDENCE: f64 = 0.95;

pub use faultline_model::results::Interval;

/// What a ratio's repeats are: pairs measured side by side (the alternated
/// repeats of one run), or two independent sets (two runs).
pub enum Samples<'a> {
    /// (baseline, candidate) per repeat.
    Paired(&'a [(f64, f64)]),
    Independent {
        baseline: &'a [f64],
        candidate: &'a [f64],
    },
}

pub fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len() % 2 == 1 { sorted[mid] } else { (sorted[mid - 1] + sorted[mid]) / 2.0 })
}

/// candidate / baseline, of their means; none when the baseline's mean is 0.
pub fn ratio_of_means(baseline: &[f64], candidate: &[f64]) -> Option<f64> {
    let (b, c) = (mean(baseline)?, mean(candidate)?);
    (b > 0.0).then(|| c / b)
}

/// Whether each side has the two repeats a resample needs to say anything
/// of the noise.
fn enough(samples: &Samples) -> bool {
    match samples {
        Samples::Paired(pairs) => pairs.len() >= 2,
        Samples::Independent { baseline, candidate } => baseline.len() >= 2 && candidate.len() >= 2,
    }
}

fn resampled_mean(values: &[f64], rng: &mut Xoshiro256PlusPlus) -> f64 {
    (0..values.len()).map(|_| values[rng.random_range(0..values.len())]).sum::<f64>() / values.len() as f64
}

/// One resample's ratio of means; none when its baseline is 0.
fn resampled_ratio(samples: &Samples, rng: &mut Xoshiro256PlusPlus) -> Option<f64> {
    let (b, c) = match samples {
        Samples::Paired(pairs) => {
            let (mut b, mut c) = (0.0, 0.0);
            for _ in 0..pairs.len() {
                let (pb, pc) = pairs[rng.random_range(0..pairs.len())];
                b += pb;
                c += pc;
            }
            (b, c)
        }
        Samples::Independent { baseline, candidate } => {
            let b = resampled_mean(baseline, rng);
            (b, resampled_mean(candidate, rng))
        }
    };
    (b > 0.0).then(|| c / b)
}

/// The central 95% of the resampled statistics; none when most resamples
/// had nothing to divide by.
fn central(mut stats: Vec<f64>) -> Option<Interval> {
    if stats.len() < RESAMPLES / 2 {
        return None;
    }
    stats.sort_by(f64::total_cmp);
    let tail = (1.0 - CONFIDENCE) / 2.0;
    Some(Interval { low: percentile(&stats, tail), high: percentile(&stats, 1.0 - tail) })
}

/// The 95% percentile-bootstrap interval of the ratio of means. None with
/// fewer than two repeats on a side: one repeat says nothing of the noise.
/// The same samples and seed give the same interval.
pub fn interval(samples: &Samples, seed: u64) -> Option<Interval> {
    if !enough(samples) {
        return None;
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    central((0..RESAMPLES).filter_map(|_| resampled_ratio(samples, &mut rng)).collect())
}

/// The interval of a ratio of ratios: run B's candidate/control over run
/// A's, each run's repeats resampled on their own (paired within a run
/// where its repeats ran side by side), so the interval carries the noise
/// of both runs.
pub fn interval_of_change(a: &Samples, b: &Samples, seed: u64) -> Option<Interval> {
    if !enough(a) || !enough(b) {
        return None;
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let stats = (0..RESAMPLES)
        .filter_map(|_| {
            let ra = resampled_ratio(a, &mut rng)?;
            let rb = resampled_ratio(b, &mut rng)?;
            (ra > 0.0).then(|| rb / ra)
        })
        .collect();
    central(stats)
}

/// The 95% interval of one run's mean from its own repeats: that run's noise.
pub fn mean_interval(values: &[f64], seed: u64) -> Option<Interval> {
    if values.len() < 2 {
        return None;
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let stats: Vec<f64> = (0..RESAMPLES).map(|_| resampled_mean(values, &mut rng)).collect();
    central(stats)
}

/// Linear interpolation between the closest ranks of sorted values.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    let rank = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64)
}

/// Where an interval lies against the band around 1.0 that counts as no
/// difference (±`band`, e.g. 0.05).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Wholly above 1 + band.
    Above,
    /// Wholly inside the band.
    Inside,
    /// Wholly below 1 − band.
    Below,
    /// Across an edge of the band: the repeats cannot tell.
    Straddles,
}

pub fn place(interval: Interval, band: f64) -> Placement {
    if interval.low > 1.0 + band {
        Placement::Above
    } else if interval.high < 1.0 - band {
        Placement::Below
    } else if interval.low >= 1.0 - band && interval.high <= 1.0 + band {
        Placement::Inside
    } else {
        Placement::Straddles
    }
}

/// A seed for one group's interval: the run's seed mixed with the group's
/// label, so each group draws its own resamples and the same run always
/// draws the same ones.
pub fn seed_for(run_seed: u64, label: &str) -> u64 {
    // FNV-1a: stable across platforms and releases, unlike std's hasher.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in label.bytes() {
        hash ^= byte as u64;
        hash = hash.wrapping_mul(0x100_0000_01b3);
    }
    hash ^ run_seed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_means() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(mean(&[1.0, 2.0]), Some(1.5));
        assert_eq!(ratio_of_means(&[100.0, 100.0], &[90.0, 92.0]), Some(0.91));
        assert_eq!(ratio_of_means(&[0.0], &[90.0]), None);
    }

    #[test]
    fn the_interval_is_deterministic_and_holds_the_ratio() {
        let pairs = [(100.0, 91.0), (104.0, 93.0), (98.0, 90.0)];
        let a = interval(&Samples::Paired(&pairs), 7).unwrap();
        assert_eq!(Some(a), interval(&Samples::Paired(&pairs), 7));
        let point = ratio_of_means(&[100.0, 104.0, 98.0], &[91.0, 93.0, 90.0]).unwrap();
        assert!(a.low <= point && point <= a.high, "{a:?} {point}");
        // The paired ratios are 0.894..0.918: the interval cannot leave them.
        assert!(a.low >= 0.89 && a.high <= 0.92, "{a:?}");
    }

    #[test]
    fn noise_widens_the_interval_and_one_repeat_gives_none() {
        let quiet = [(100.0, 90.0), (101.0, 91.0), (99.0, 89.0), (100.0, 90.0)];
        let noisy = [(100.0, 60.0), (101.0, 120.0), (99.0, 89.0), (100.0, 95.0)];
        let q = interval(&Samples::Paired(&quiet), 1).unwrap();
        let n = interval(&Samples::Paired(&noisy), 1).unwrap();
        assert!(n.high - n.low > 5.0 * (q.high - q.low), "{q:?} {n:?}");
        assert_eq!(interval(&Samples::Paired(&[(1.0, 2.0)]), 1), None);
        assert_eq!(interval(&Samples::Independent { baseline: &[1.0, 2.0], candidate: &[3.0] }, 1), None);
    }

    #[test]
    fn independent_samples_catch_a_clear_slowdown() {
        let before = [50_000.0, 51_000.0, 49_500.0];
        let after = [30_000.0, 31_000.0, 29_000.0];
        let i = interval(&Samples::Independent { baseline: &before, candidate: &after }, 3).unwrap();
        assert_eq!(place(i, 0.05), Placement::Below, "{i:?}");
        let i = interval(&Samples::Independent { baseline: &before, candidate: &before }, 3).unwrap();
        assert_eq!(place(i, 0.05), Placement::Inside, "{i:?}");
    }

    #[test]
    fn a_ratio_of_ratios_cancels_what_moved_both_variants() {
        // Run B ran on a busier host: both variants at a third of run A's speed.
        let a = [(100.0, 90.0), (102.0, 92.0), (98.0, 88.0)];
        let b = [(34.0, 30.5), (33.0, 30.0), (35.0, 31.4)];
        let i = interval_of_change(&Samples::Paired(&a), &Samples::Paired(&b), 5).unwrap();
        assert_eq!(place(i, 0.05), Placement::Inside, "{i:?}");
        // The candidate alone at half speed in B: the change shows through.
        let slower = [(100.0, 45.0), (102.0, 46.0), (98.0, 44.0)];
        let i = interval_of_change(&Samples::Paired(&a), &Samples::Paired(&slower), 5).unwrap();
        assert_eq!(place(i, 0.05), Placement::Below, "{i:?}");
        assert_eq!(interval_of_change(&Samples::Paired(&a[..1]), &Samples::Paired(&b), 5), None);
    }

    #[test]
    fn a_runs_own_interval_holds_its_mean() {
        let i = mean_interval(&[100.0, 110.0, 90.0], 2).unwrap();
        assert!(i.low >= 90.0 && i.high <= 110.0 && i.low < 100.0 && i.high > 100.0, "{i:?}");
        assert_eq!(mean_interval(&[100.0], 2), None);
    }

    #[test]
    fn placement_against_the_band() {
        let at = |low, high| place(Interval { low, high }, 0.05);
        assert_eq!(at(1.06, 1.3), Placement::Above);
        assert_eq!(at(0.5, 0.94), Placement::Below);
        assert_eq!(at(0.96, 1.04), Placement::Inside);
        assert_eq!(at(0.9, 1.02), Placement::Straddles);
        assert_eq!(at(1.02, 1.2), Placement::Straddles);
        assert_eq!(at(0.8, 1.2), Placement::Straddles);
    }

    #[test]
    fn seeds_differ_per_group() {
        assert_ne!(seed_for(1, "a/p"), seed_for(1, "b/p"));
        assert_eq!(seed_for(1, "a/p"), seed_for(1, "a/p"));
    }
}
