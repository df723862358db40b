//! A client's recent stretch of a timeline. Each client records its ops
//! without a lock, into its own recorder; its timelines are handed over to
//! the cell's shared ones every few seconds and dropped, so a long run
//! keeps one timeline per cell instead of one per client (a client-second
//! costs 416 bytes of latency buckets, and 4 KB more per op kind in a cell
//! with faults).
//! Timeline entries are sums, maxima and counts, so a partly filled entry
//! can be handed over and the rest added later: the merged result is the
//! same whenever the hand-overs happen.

/// A timeline entry that takes in another's counts.
pub trait Absorb: Default + Clone {
    fn absorb(&mut self, other: &Self);
}

/// Entries `base..` of a timeline; the earlier ones were handed over.
#[derive(Debug, Clone, Default)]
pub struct Recent<T> {
    base: usize,
    entries: Vec<T>,
}

impl<T: Absorb> Recent<T> {
    /// Entry `i`, or None when it was handed over already (an op that
    /// ended that long ago is added to the shared timeline instead).
    pub fn entry(&mut self, i: usize) -> Option<&mut T> {
        let j = i.checked_sub(self.base)?;
        if self.entries.len() <= j {
            self.entries.resize(j + 1, T::default());
        }
        Some(&mut self.entries[j])
    }

    /// Where the kept entries begin.
    pub fn base(&self) -> usize {
        self.base
    }

    /// Adds the entries before `keep_from` to `shared` and drops them.
    pub fn hand_over(&mut self, shared: &mut Vec<T>, keep_from: usize) {
        let n = keep_from.saturating_sub(self.base).min(self.entries.len());
        absorb_at(shared, self.base, &self.entries[..n]);
        self.entries.drain(..n);
        self.base = self.base.max(keep_from);
    }

    /// Adds every kept entry to `into`.
    pub fn absorb_into(&self, into: &mut Vec<T>) {
        absorb_at(into, self.base, &self.entries);
    }
}

/// Entry `i` of a whole timeline, grown as needed.
pub fn entry_at<T: Absorb>(timeline: &mut Vec<T>, i: usize) -> &mut T {
    if timeline.len() <= i {
        timeline.resize(i + 1, T::default());
    }
    &mut timeline[i]
}

/// Adds `entries`, the first of which is entry `base`, to `into`.
pub fn absorb_at<T: Absorb>(into: &mut Vec<T>, base: usize, entries: &[T]) {
    for (i, e) in entries.iter().enumerate() {
        entry_at(into, base + i).absorb(e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Default, PartialEq)]
    struct Count(u64);

    impl Absorb for Count {
        fn absorb(&mut self, other: &Self) {
            self.0 += other.0;
        }
    }

    /// Handing over at any points, also mid-entry and with late arrivals
    /// sent to the shared timeline, sums to what one timeline would hold.
    #[test]
    fn hand_overs_add_up_to_one_timeline() {
        let ends = [0usize, 0, 1, 3, 2, 5, 5, 9, 4, 12, 12, 13];
        let mut whole: Vec<Count> = Vec::new();
        for &i in &ends {
            entry_at(&mut whole, i).0 += 1;
        }
        for every in 1..5 {
            let (mut recent, mut shared) = (Recent::<Count>::default(), Vec::<Count>::new());
            for (n, &i) in ends.iter().enumerate() {
                match recent.entry(i) {
                    Some(e) => e.0 += 1,
                    None => entry_at(&mut shared, i).0 += 1,
                }
                if n % every == 0 {
                    recent.hand_over(&mut shared, i.saturating_sub(1));
                }
            }
            recent.absorb_into(&mut shared);
            assert_eq!(shared, whole, "handing over after every {every} ops");
        }
    }
}
