//! How sure a ratio is: a seeded percentile bootstrap over the repeats, and
//! the words a ratio earns only when its interval is clear of the band that
//! counts as "no difference".
//!
//! Repeats are few (three is typical), so the interval is wide, and that is
//! the point: a 0.97x from three noisy repeats must not read as a loss.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};

/// Resamples drawn for one interval: enough that the 2.5th and 97.5th
/// percentiles move by well under 1% between seeds.
const RESAMPLES: usize = 10_000;

/// The interval's coverage.
pub const CONFIDENCE: f64 = 0.95;

/// A confidence interval of a ratio.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub low: f64,
    pub high: f64,
}

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

/// The 95% percentile-bootstrap interval of the ratio of means. None with
/// fewer than two repeats on a side: one repeat says nothing of the noise.
/// The same samples and seed give the same interval.
pub fn interval(samples: &Samples, seed: u64) -> Option<Interval> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut stats: Vec<f64> = Vec::with_capacity(RESAMPLES);
    match samples {
        Samples::Paired(pairs) => {
            if pairs.len() < 2 {
                return None;
            }
            for _ in 0..RESAMPLES {
                let (mut b, mut c) = (0.0, 0.0);
                for _ in 0..pairs.len() {
                    let (pb, pc) = pairs[rng.random_range(0..pairs.len())];
                    b += pb;
                    c += pc;
                }
                if b > 0.0 {
                    stats.push(c / b);
                }
            }
        }
        Samples::Independent { baseline, candidate } => {
            if baseline.len() < 2 || candidate.len() < 2 {
                return None;
            }
            let resampled_mean = |values: &[f64], rng: &mut Xoshiro256PlusPlus| {
                (0..values.len()).map(|_| values[rng.random_range(0..values.len())]).sum::<f64>() / values.len() as f64
            };
            for _ in 0..RESAMPLES {
                let b = resampled_mean(baseline, &mut rng);
                let c = resampled_mean(candidate, &mut rng);
                if b > 0.0 {
                    stats.push(c / b);
                }
            }
        }
    }
    // A baseline of zeros in most resamples: no ratio to speak of.
    if stats.len() < RESAMPLES / 2 {
        return None;
    }
    stats.sort_by(f64::total_cmp);
    let tail = (1.0 - CONFIDENCE) / 2.0;
    Some(Interval { low: percentile(&stats, tail), high: percentile(&stats, 1.0 - tail) })
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
