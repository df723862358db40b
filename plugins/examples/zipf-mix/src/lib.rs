//! Weighted op mix from the spec, zipfian keys, uniform value sizes: the
//! host's built-in `zipfian` shape as a plugin, draw for draw (alias table
//! up to 2^20 keys, rejection-inversion beyond, as the host).

use faultline_plugin::shape::*;

pub struct ZipfMix {
    mix: Mix,
    zipf: Zipf,
    setup: Setup,
    streams: Streams,
}

impl Shape for ZipfMix {
    fn init(config: &Config, seed: u64, setup: &Setup) -> Result<Self, String> {
        config.deny_unknown(&["exponent"])?;
        let mix = setup.mix();
        if mix.is_empty() {
            return Err("the workload declares no op with a weight above 0".into());
        }
        let zipf = Zipf::new(setup.key_count as f64, config.f64("exponent", 0.99)?)?;
        Ok(ZipfMix { mix, zipf, setup: setup.clone(), streams: Streams::new(seed) })
    }

    fn next_ops(&mut self, worker: u32, n: u32, out: &mut Ops) {
        let rng = self.streams.get(worker);
        for _ in 0..n {
            // Same draw order as the built-in shape: kind, key, value size.
            let kind = self.mix.pick(rng);
            let key = self.zipf.sample_key(rng);
            let size = self.setup.value_size(rng);
            out.push(Op::new(kind, key, size));
        }
    }
}

faultline_plugin::export_shape!(ZipfMix);

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng as _, SeedableRng};

    /// The host's alias table (runner/src/workload/zipf.rs), copied as the
    /// reference the plugin must match.
    fn host_table(n: u64, s: f64) -> (Vec<f64>, Vec<u32>) {
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
        (keep, alias)
    }

    /// The host's built-in shape (runner/src/workload: `BuiltinStream::next_op`
    /// with salt 0, a zipfian key space that fits the table), rewritten on
    /// rand/rand_xoshiro.
    fn builtin(seed: u64, stream: u64, setup: &Setup, s: f64, n: usize) -> Vec<(u8, u64, u32)> {
        use rand::RngCore;
        let seed = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(stream);
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
        let (keep, alias) = host_table(setup.key_count, s);
        let mut total = 0.0;
        let mix: Vec<(u8, f64)> = setup
            .ops
            .iter()
            .enumerate()
            .filter(|(_, (_, w))| *w > 0.0)
            .map(|(i, (_, w))| {
                total += w;
                (i as u8, total)
            })
            .collect();
        (0..n)
            .map(|_| {
                let kind = if mix.len() == 1 {
                    mix[0].0
                } else {
                    let draw = rng.random::<f64>() * total;
                    mix.iter().find(|(_, c)| draw < *c).unwrap_or(&mix[mix.len() - 1]).0
                };
                let column = ((rng.next_u64() as u128 * keep.len() as u128) >> 64) as usize;
                let coin = (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
                let key = if coin < keep[column] { column as u64 } else { alias[column] as u64 };
                let size = if setup.value_size_min == setup.value_size_max {
                    setup.value_size_min
                } else {
                    rng.random_range(setup.value_size_min..=setup.value_size_max)
                };
                (kind, key, size)
            })
            .collect()
    }

    #[test]
    fn draws_what_the_builtin_shape_draws() {
        let setup = Setup {
            ops: vec![("get".into(), 80.0), ("del".into(), 0.0), ("set".into(), 20.0)],
            key_count: 10_000,
            value_size_min: 16,
            value_size_max: 4096,
            workers: 3,
        };
        let config = Config::parse(r#"{"exponent": 0.99}"#).unwrap();
        let mut shape = ZipfMix::init(&config, 42, &setup).unwrap();
        for worker in 0..3u32 {
            let mut ops = Ops::new();
            // In batches, as the host asks.
            for _ in 0..50 {
                shape.next_ops(worker, 100, &mut ops);
            }
            let ours: Vec<(u8, u64, u32)> = ops.into_vec().into_iter().map(|o| (o.kind, o.key, o.value_size)).collect();
            assert_eq!(ours, builtin(42, worker as u64, &setup, 0.99, 5000), "worker {worker}");
        }
    }
}
