//! A small deterministic PRNG: xoshiro256++ seeded through SplitMix64.
//!
//! Bit for bit the same as `rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64`
//! with `rand` 0.9's `random::<f64>()`, `random::<u32>()` and
//! `random_range(..)` for `u32`/`u64` (the host's built-in shapes use those),
//! so a plugin can reproduce a built-in stream draw for draw. No `getrandom`:
//! a plugin has no entropy source, every draw comes from the seed.

/// SplitMix64: used to expand a 64-bit seed into xoshiro's 256-bit state, and
/// handy on its own to mix numbers into seeds.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    x: u64,
}

impl SplitMix64 {
    pub const fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { x: seed }
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.x = self.x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// xoshiro256++: fast, 256 bits of state, good statistical quality. Not for
/// cryptography.
#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// The same state as `Xoshiro256PlusPlus::seed_from_u64(seed)`.
    pub fn seed_from_u64(seed: u64) -> Rng {
        let mut sm = SplitMix64::new(seed);
        // rand_core fills the 32-byte seed from SplitMix64's u64s, little endian.
        let mut s = [0u64; 4];
        for w in &mut s {
            *w = sm.next_u64();
        }
        if s == [0; 4] {
            // xoshiro's all-zero state is a fixed point; rand_xoshiro does the same.
            return Rng::seed_from_u64(0);
        }
        Rng { s }
    }

    /// One independent stream per worker (or any other number): the cell's
    /// seed and the stream number mixed the way the host mixes its client
    /// streams (`seed * φ + stream`).
    pub fn for_stream(seed: u64, stream: u64) -> Rng {
        Rng::seed_from_u64(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(stream))
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// The upper 32 bits of the next u64 (the lower bits are the weaker ones).
    #[inline]
    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// Uniform in `[0, 1)` with 53 random bits.
    #[inline]
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p`.
    #[inline]
    pub fn chance(&mut self, p: f64) -> bool {
        self.f64() < p
    }

    /// Uniform in `low..high` (like `random_range(low..high)`); `low` when the
    /// range is empty.
    #[inline]
    pub fn range_u64(&mut self, low: u64, high: u64) -> u64 {
        if high <= low {
            return low;
        }
        self.range_u64_inclusive(low, high - 1)
    }

    /// Uniform in `low..=high` (like `random_range(low..=high)`).
    #[inline]
    pub fn range_u64_inclusive(&mut self, low: u64, high: u64) -> u64 {
        if high <= low {
            return low;
        }
        let range = high.wrapping_sub(low).wrapping_add(1);
        if range == 0 {
            return self.next_u64();
        }
        // rand 0.9's single-sample method (Canon's, one extra draw at most).
        let (mut result, lo) = wmul64(self.next_u64(), range);
        if lo > range.wrapping_neg() {
            let (new_hi, _) = wmul64(self.next_u64(), range);
            result += lo.checked_add(new_hi).is_none() as u64;
        }
        low.wrapping_add(result)
    }

    /// Uniform in `low..high` for u32.
    #[inline]
    pub fn range_u32(&mut self, low: u32, high: u32) -> u32 {
        if high <= low {
            return low;
        }
        self.range_u32_inclusive(low, high - 1)
    }

    /// Uniform in `low..=high` for u32 (like `random_range(low..=high)`).
    #[inline]
    pub fn range_u32_inclusive(&mut self, low: u32, high: u32) -> u32 {
        if high <= low {
            return low;
        }
        let range = high.wrapping_sub(low).wrapping_add(1);
        if range == 0 {
            return self.next_u32();
        }
        let (mut result, lo) = wmul32(self.next_u32(), range);
        if lo > range.wrapping_neg() {
            let (new_hi, _) = wmul32(self.next_u32(), range);
            result += lo.checked_add(new_hi).is_none() as u32;
        }
        low.wrapping_add(result)
    }

    /// Uniform index in `0..n` (`0` when `n == 0`).
    #[inline]
    pub fn below(&mut self, n: usize) -> usize {
        self.range_u64(0, n as u64) as usize
    }
}

#[inline]
fn wmul64(a: u64, b: u64) -> (u64, u64) {
    let t = (a as u128) * (b as u128);
    ((t >> 64) as u64, t as u64)
}

#[inline]
fn wmul32(a: u32, b: u32) -> (u32, u32) {
    let t = (a as u64) * (b as u64);
    ((t >> 32) as u32, t as u32)
}

/// One [`Rng`] per worker, `Rng::for_stream(seed, worker)`, made on first
/// use. Each worker then draws the same ops whatever order the host asks the
/// workers in, so runs repeat.
#[derive(Debug, Clone)]
pub struct Streams {
    seed: u64,
    rngs: Vec<Option<Rng>>,
}

impl Streams {
    pub fn new(seed: u64) -> Streams {
        Streams { seed, rngs: Vec::new() }
    }

    /// Worker `worker`'s stream.
    #[inline]
    pub fn get(&mut self, worker: u32) -> &mut Rng {
        let w = worker as usize;
        if w >= self.rngs.len() {
            self.rngs.resize(w + 1, None);
        }
        let seed = self.seed;
        self.rngs[w].get_or_insert_with(|| Rng::for_stream(seed, worker as u64))
    }
}

#[cfg(all(test, not(target_family = "wasm")))]
mod tests {
    use super::*;
    use rand::{Rng as _, RngCore, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    #[test]
    fn draws_exactly_what_rand_xoshiro_draws() {
        for seed in [0u64, 1, 7, 0xdead_beef, u64::MAX] {
            let mut ours = Rng::seed_from_u64(seed);
            let mut theirs = Xoshiro256PlusPlus::seed_from_u64(seed);
            for _ in 0..1000 {
                assert_eq!(ours.next_u64(), theirs.next_u64());
                assert_eq!(ours.next_u32(), theirs.next_u32());
                assert_eq!(ours.f64(), theirs.random::<f64>());
                assert_eq!(ours.range_u64(0, 1000), theirs.random_range(0..1000u64));
                assert_eq!(ours.range_u64(5, 1 << 40), theirs.random_range(5..1u64 << 40));
                assert_eq!(ours.range_u32_inclusive(16, 4096), theirs.random_range(16..=4096u32));
                assert_eq!(ours.range_u32_inclusive(0, u32::MAX - 3), theirs.random_range(0..=u32::MAX - 3));
                assert_eq!(ours.range_u64_inclusive(3, u64::MAX / 3), theirs.random_range(3..=u64::MAX / 3));
            }
        }
    }

    #[test]
    fn streams_differ() {
        let a: Vec<u64> = (0..8)
            .map({
                let mut r = Rng::for_stream(42, 0);
                move |_| r.next_u64()
            })
            .collect();
        let b: Vec<u64> = (0..8)
            .map({
                let mut r = Rng::for_stream(42, 1);
                move |_| r.next_u64()
            })
            .collect();
        assert_ne!(a, b);
    }
}
