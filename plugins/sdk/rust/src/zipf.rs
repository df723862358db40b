//! Zipfian keys: Vose's alias table for key spaces up to 2^20 keys, and
//! rejection-inversion (the algorithm of `rand_distr::Zipf` 0.5) beyond —
//! exactly what the host's built-in `zipfian` key distribution does, so a
//! plugin draws the same keys from the same stream (natively bit for bit;
//! in WebAssembly up to the last bit of `powf` when the table is built).

use crate::Rng;

/// Ranks up to this have `rank^-s` precomputed (with the same `powf`, so the
/// draws do not change): most draws land there, and it saves one of the three
/// `powf` calls a draw costs.
const CACHED_RANKS: usize = 1024;

#[derive(Debug, Clone, PartialEq)]
struct Inversion {
    n: f64,
    s: f64,
    t: f64,
    q: f64,
    /// `rank.powf(-s)` for ranks `1..=CACHED_RANKS` (index = rank).
    rank_pow: Vec<f64>,
}

impl Inversion {
    fn new(n: f64, s: f64) -> Result<Inversion, String> {
        if s.is_nan() || s < 0.0 {
            return Err(format!("zipf exponent must be >= 0, got {s}"));
        }
        if n.is_nan() || n < 1.0 {
            return Err(format!("zipf needs at least one rank, got {n}"));
        }
        let q = if s != 1.0 { 1.0 / (1.0 - s) } else { 0.0 };
        let t = if s != 1.0 { (n.powf(1.0 - s) - s) * q } else { 1.0 + n.ln() };
        let cached = (n.min(CACHED_RANKS as f64) as usize) + 1;
        let rank_pow = (0..cached).map(|x| (x as f64).powf(-s)).collect();
        Ok(Inversion { n, s, t, q, rank_pow })
    }

    #[inline]
    fn inv_cdf(&self, p: f64) -> f64 {
        let pt = p * self.t;
        if pt <= 1.0 {
            pt
        } else if self.s != 1.0 {
            (pt * (1.0 - self.s) + self.s).powf(self.q)
        } else {
            (pt - 1.0).exp()
        }
    }

    /// A rank in `1..=n` (as f64, like `rand_distr`); rank 1 is the most
    /// frequent.
    #[inline]
    fn sample(&self, rng: &mut Rng) -> f64 {
        loop {
            let inv_b = self.inv_cdf(rng.f64());
            let x = (inv_b + 1.0).floor();
            let mut ratio = match self.rank_pow.get(x as usize) {
                Some(p) => *p,
                None => x.powf(-self.s),
            };
            if x > 1.0 {
                ratio *= inv_b.powf(self.s);
            }
            if rng.f64() < ratio {
                return x;
            }
        }
    }

    fn sample_key(&self, rng: &mut Rng) -> u64 {
        let rank = self.sample(rng) as u64;
        rank.saturating_sub(1).min(self.n as u64 - 1)
    }
}

/// Vose's alias table: P(key k) ∝ 1 / (k + 1)^s, two draws a key, no `powf`.
/// The host's `runner/src/workload/zipf.rs`, line for line.
#[derive(Debug, Clone, PartialEq)]
struct Table {
    keep: Vec<f64>,
    alias: Vec<u32>,
}

impl Table {
    fn new(n: u64, s: f64) -> Table {
        let n = n as usize;
        let weights: Vec<f64> = (0..n).map(|k| ((k + 1) as f64).powf(-s)).collect();
        let total: f64 = weights.iter().sum();
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
        Table { keep, alias }
    }

    #[inline]
    fn sample_key(&self, rng: &mut Rng) -> u64 {
        let column = scale(rng.next_u64(), self.keep.len() as u64) as usize;
        let coin = rng.f64();
        if coin < self.keep[column] {
            column as u64
        } else {
            self.alias[column] as u64
        }
    }
}

/// `(x * n) >> 64`, as the host computes it with a u128 product, but in u64
/// halves: a u128 multiply is a software routine in wasm32 (`__multi3`).
/// Exact for `n < 2^32`; tables hold at most [`TABLE_MAX_KEYS`].
#[inline]
fn scale(x: u64, n: u64) -> u64 {
    let low = (x & 0xffff_ffff) * n;
    let high = (x >> 32) * n;
    (high + (low >> 32)) >> 32
}

/// Key spaces up to this many keys get the alias table (12 bytes a key);
/// larger ones rejection-inversion. The host uses the same bound.
pub const TABLE_MAX_KEYS: u64 = 1 << 20;

#[derive(Debug, Clone, PartialEq)]
enum Method {
    Table(Table),
    Inversion(Inversion),
}

/// Zipfian keys, drawn exactly as the host's built-in `zipfian` shape
/// draws them from the same stream: Vose's alias table for key spaces up
/// to [`TABLE_MAX_KEYS`] (constant time, no `powf` per draw — `powf` is
/// software in WebAssembly and was most of a draw's cost), else
/// rejection-inversion (`rand_distr::Zipf`'s algorithm).
#[derive(Debug, Clone, PartialEq)]
pub struct Zipf {
    method: Method,
}

impl Zipf {
    /// `n` keys (>= 1) with exponent `s` (>= 0; 0.99 is the YCSB default).
    pub fn new(n: f64, s: f64) -> Result<Zipf, String> {
        let inversion = Inversion::new(n, s)?;
        let method = if n <= TABLE_MAX_KEYS as f64 {
            Method::Table(Table::new(n as u64, s))
        } else {
            Method::Inversion(inversion)
        };
        Ok(Zipf { method })
    }

    /// A key number in `0..n`, the hottest key (0) first.
    #[inline]
    pub fn sample_key(&self, rng: &mut Rng) -> u64 {
        match &self.method {
            Method::Table(t) => t.sample_key(rng),
            Method::Inversion(i) => i.sample_key(rng),
        }
    }
}

#[cfg(all(test, not(target_family = "wasm")))]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_distr::Distribution;

    #[test]
    fn scale_is_the_u128_product() {
        let mut rng = Rng::seed_from_u64(5);
        for n in [1u64, 2, 3, 1000, 100_000, TABLE_MAX_KEYS, u32::MAX as u64] {
            for _ in 0..10_000 {
                let x = rng.next_u64();
                assert_eq!(scale(x, n), ((x as u128 * n as u128) >> 64) as u64, "x={x} n={n}");
            }
            assert_eq!(scale(u64::MAX, n), ((u64::MAX as u128 * n as u128) >> 64) as u64);
        }
    }

    #[test]
    fn same_ranks_as_rand_distr() {
        for (n, s) in [(10_000.0, 0.99), (100.0, 1.0), (1e6, 0.5), (50.0, 1.2), (1.0, 0.99)] {
            let ours = Inversion::new(n, s).unwrap();
            let theirs = rand_distr::Zipf::new(n, s).unwrap();
            let mut a = Rng::seed_from_u64(99);
            let mut b = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(99);
            for _ in 0..20_000 {
                assert_eq!(ours.sample(&mut a), theirs.sample(&mut b), "n={n} s={s}");
            }
        }
    }

    #[test]
    fn keys_stay_in_range() {
        let z = Zipf::new(10.0, 0.0).unwrap();
        let mut r = Rng::seed_from_u64(1);
        assert!((0..10_000).all(|_| z.sample_key(&mut r) < 10));
        assert!(Zipf::new(0.0, 1.0).is_err());
        assert!(Zipf::new(10.0, f64::NAN).is_err());
    }
}
