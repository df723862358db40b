//! The MongoDB seed's stale-read workload: a few hot documents whose state is
//! toggled grant/revoke continuously by writes while readers read them.
//!
//! - Documents are keys `0..hot`.
//! - A write is `set` with one arg, the exact value `grant:<rev>` (odd rev) or
//!   `revoke:<rev>` (even rev), where `rev` is the document's last
//!   *acknowledged* revision + 1, learned through `observe`.
//! - At most one write per document is in flight: a document with an
//!   unacknowledged write is not written again until `observe` reports it. On
//!   failure the document is free again and the next write retries the same
//!   revision (the failed write may or may not have been applied, so the
//!   retry writes the very same value).
//! - A read is `get` of a uniformly drawn hot document.

use faultline_plugin::shape::*;

pub struct HotToggle {
    get: u8,
    set: u8,
    hot: u64,
    read_fraction: f64,
    /// Last acknowledged revision of each document (0: none yet).
    acked: Vec<u64>,
    /// The revision of the write in flight on each document (0: none).
    pending: Vec<u64>,
    /// Documents with no write in flight, in no particular order.
    free: Vec<u32>,
    streams: Streams,
}

impl HotToggle {
    fn rev_of(op: &Op) -> Option<u64> {
        let value = op.args.first()?;
        let (_, rev) = value.split_once(':')?;
        rev.parse().ok()
    }
}

impl Shape for HotToggle {
    fn init(config: &Config, seed: u64, setup: &Setup) -> Result<Self, String> {
        config.deny_unknown(&["hot", "read_fraction"])?;
        let kinds = setup.kinds();
        let (get, set) = (kinds.require("get")?, kinds.require("set")?);
        let hot = config.u64("hot", 64)?.min(setup.key_count);
        if hot == 0 || hot > u32::MAX as u64 {
            return Err(format!("`hot` must be in 1..=key count, got {hot}"));
        }
        let read_fraction = config.f64("read_fraction", 0.5)?;
        if !(0.0..=1.0).contains(&read_fraction) {
            return Err(format!("`read_fraction` must be in 0..=1, got {read_fraction}"));
        }
        Ok(HotToggle {
            get,
            set,
            hot,
            read_fraction,
            acked: vec![0; hot as usize],
            pending: vec![0; hot as usize],
            free: (0..hot as u32).rev().collect(),
            streams: Streams::new(seed),
        })
    }

    fn observes(&self) -> bool {
        true
    }

    fn next_ops(&mut self, worker: u32, n: u32, out: &mut Ops) {
        let rng = self.streams.get(worker);
        for _ in 0..n {
            // A write when the draw says so and some document is free;
            // otherwise a read, so the worker always has work.
            if !rng.chance(self.read_fraction) && !self.free.is_empty() {
                let doc = self.free.swap_remove(rng.below(self.free.len())) as usize;
                let rev = self.acked[doc] + 1;
                self.pending[doc] = rev;
                let state = if rev % 2 == 1 { "grant" } else { "revoke" };
                out.push(Op::with_value(self.set, doc as u64, format!("{state}:{rev}")));
            } else {
                out.push(Op::new(self.get, rng.range_u64(0, self.hot), 0));
            }
        }
    }

    fn observe(&mut self, completed: Vec<Completed>) {
        for c in completed {
            if c.op.kind != self.set || c.op.key >= self.hot {
                continue;
            }
            let doc = c.op.key as usize;
            let Some(rev) = Self::rev_of(&c.op) else { continue };
            if self.pending[doc] != rev {
                continue; // not the write this shape has in flight
            }
            if c.ok {
                self.acked[doc] = self.acked[doc].max(rev);
            }
            self.pending[doc] = 0;
            self.free.push(doc as u32);
        }
    }
}

faultline_plugin::export_shape!(HotToggle);

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> Setup {
        Setup {
            ops: vec![("get".into(), 1.0), ("set".into(), 1.0)],
            key_count: 10_000,
            value_size_min: 16,
            value_size_max: 16,
            workers: 2,
        }
    }

    #[test]
    fn one_write_per_doc_and_revisions_follow_acks() {
        let config = Config::parse(r#"{"hot": 2, "read_fraction": 0.0}"#).unwrap();
        let mut s = HotToggle::init(&config, 1, &setup()).unwrap();
        let mut out = Ops::new();
        s.next_ops(0, 4, &mut out);
        let out = out.into_vec();
        // Two docs: two writes, then reads since both are in flight.
        let writes: Vec<&Op> = out.iter().filter(|o| o.kind == 1).collect();
        assert_eq!(writes.len(), 2);
        assert!(writes.iter().all(|o| o.args == vec!["grant:1".to_string()]));
        assert_eq!(out.iter().filter(|o| o.kind == 0).count(), 2);
        // Doc 0 acknowledged, doc 1 failed.
        let done = out
            .iter()
            .filter(|o| o.kind == 1)
            .map(|o| Completed { worker: 0, op: o.clone(), ok: o.key == 0 })
            .collect();
        s.observe(done);
        let mut out = Ops::new();
        s.next_ops(1, 2, &mut out);
        let out = out.into_vec();
        let mut values: Vec<(u64, String)> = out.iter().map(|o| (o.key, o.args[0].clone())).collect();
        values.sort();
        assert_eq!(values, vec![(0, "revoke:2".to_string()), (1, "grant:1".to_string())]);
    }

    #[test]
    fn reads_hit_hot_docs_only() {
        let config = Config::parse(r#"{"hot": 64}"#).unwrap();
        let mut s = HotToggle::init(&config, 1, &setup()).unwrap();
        let mut out = Ops::new();
        s.next_ops(0, 1000, &mut out);
        let out = out.into_vec();
        assert!(out.iter().all(|o| o.key < 64));
        let writes = out.iter().filter(|o| o.kind == 1).count();
        assert_eq!(writes, 64, "every doc written once, then all in flight");
    }
}
