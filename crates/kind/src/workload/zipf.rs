//! Zipfian keys in constant time: Vose's alias method over the key space,
//! built once per workload. Rejection-inversion (rand_distr's Zipf) needs a
//! `powf` per draw — the dearest thing the load generator did per op — so
//! the table is used whenever it fits (12 bytes a key, up to the spec's
//! `ZIPF_TABLE_MAX_KEYS`, which its memory estimate reckons with); past that the draw
//! falls back to rejection-inversion. The WebAssembly SDK's sampler
//! (plugins/sdk/rust) is this same code, so a plugin and the built-in shape
//! draw the same keys from the same seed.

use faultline_spec::memory::ZIPF_TABLE_MAX_KEYS;
use rand::RngCore;

/// P(key k) ∝ 1 / (k + 1)^s for k in 0..n: key 0 is the hottest.
#[derive(Debug)]
pub struct ZipfTable {
    /// The chance of keeping column i rather than taking its alias.
    keep: Vec<f64>,
    alias: Vec<u32>,
}

impl ZipfTable {
    pub fn new(n: u64, s: f64) -> ZipfTable {
        assert!((1..=ZIPF_TABLE_MAX_KEYS).contains(&n), "table for 1..=2^20 keys");
        let n = n as usize;
        let weights: Vec<f64> = (0..n).map(|k| ((k + 1) as f64).powf(-s)).collect();
        let total: f64 = weights.iter().sum();
        // Scaled so the mean column holds exactly 1.
        let mut scaled: Vec<f64> = weights.iter().map(|w| w * n as f64 / total).collect();
        let mut keep = vec![1.0; n];
        let mut alias: Vec<u32> = (0..n as u32).collect();
        let (mut small, mut large): (Vec<usize>, Vec<usize>) = (0..n).partition(|&i| scaled[i] < 1.0);
        while let (Some(&s_i), Some(&l_i)) = (small.last(), large.last()) {
            small.pop();
            keep[s_i] = scaled[s_i];
            alias[s_i] = l_i as u32;
            scaled[l_i] = (scaled[l_i] + scaled[s_i]) - 1.0;
            if scaled[l_i] < 1.0 {
                large.pop();
                small.push(l_i);
            }
        }
        // What remains holds 1 up to rounding: always kept.
        ZipfTable { keep, alias }
    }

    /// Two draws: a column (the high 64 bits of draw × n) and a coin (53
    /// bits, as rand's `random::<f64>()`).
    pub fn sample(&self, rng: &mut impl RngCore) -> u64 {
        let n = self.keep.len() as u128;
        let column = ((rng.next_u64() as u128 * n) >> 64) as usize;
        let coin = (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        if coin < self.keep[column] {
            column as u64
        } else {
            self.alias[column] as u64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn frequencies_follow_the_zipf_law() {
        let (n, s) = (1000u64, 0.99);
        let table = ZipfTable::new(n, s);
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(3);
        let draws = 2_000_000;
        let mut counts = vec![0u64; n as usize];
        for _ in 0..draws {
            counts[table.sample(&mut rng) as usize] += 1;
        }
        let total: f64 = (1..=n).map(|k| (k as f64).powf(-s)).sum();
        for k in [0usize, 1, 9, 99, 999] {
            let expected = draws as f64 * ((k + 1) as f64).powf(-s) / total;
            let got = counts[k] as f64;
            assert!((got - expected).abs() < 5.0 * expected.sqrt() + 5.0, "key {k}: {got} vs {expected:.0}");
        }
    }
}
