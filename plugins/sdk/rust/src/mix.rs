//! Weighted op mix, drawn the way the host's built-in shapes draw it.

use crate::Rng;

/// The spec's op kinds with their weights (zero weights dropped), picked by
/// one uniform draw against the cumulative weights. Picks are op kinds as
/// ops carry them: indices into `setup.ops`.
#[derive(Debug, Clone)]
pub struct Mix {
    kinds: Vec<u8>,
    cumulative: Vec<f64>,
    total: f64,
}

impl Mix {
    /// From `setup.ops` (kind name, weight) in spec order.
    pub fn new(ops: &[(String, f64)]) -> Mix {
        let mut total = 0.0;
        let mut kinds = Vec::new();
        let mut cumulative = Vec::new();
        for (index, (_, w)) in ops.iter().enumerate().take(256) {
            if *w > 0.0 {
                total += w;
                kinds.push(index as u8);
                cumulative.push(total);
            }
        }
        Mix { kinds, cumulative, total }
    }

    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty()
    }

    pub fn len(&self) -> usize {
        self.kinds.len()
    }

    /// The kinds with a weight above 0 (indices into `setup.ops`).
    pub fn kinds(&self) -> &[u8] {
        &self.kinds
    }

    /// A kind (an index into `setup.ops`), by weight. A mix of one kind
    /// takes no draw. Panics on an empty mix.
    #[inline]
    pub fn pick(&self, rng: &mut Rng) -> u8 {
        if self.kinds.len() == 1 {
            return self.kinds[0];
        }
        let draw = rng.f64() * self.total;
        let i = self.cumulative.iter().position(|c| draw < *c).unwrap_or(self.kinds.len() - 1);
        self.kinds[i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_indices_into_setup_ops() {
        let ops = vec![("get".to_string(), 80.0), ("del".to_string(), 0.0), ("set".to_string(), 20.0)];
        let mix = Mix::new(&ops);
        assert_eq!(mix.kinds(), &[0, 2]);
        let mut rng = Rng::seed_from_u64(3);
        let sets = (0..100_000).filter(|_| mix.pick(&mut rng) == 2).count();
        assert!((19_000..21_000).contains(&sets), "{sets}");
        let one = Mix::new(&ops[1..]);
        assert_eq!(one.pick(&mut rng), 1);
    }
}
