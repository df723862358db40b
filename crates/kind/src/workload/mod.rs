//! Turns a workload spec into a deterministic stream of ops: the op mix, the
//! key chosen by the distribution, and the value size, all from the seed.
//! Ops that something else decides (a shape plugin) come through
//! [`OpSource`], so the workload needs nothing of what makes them.

pub mod zipf;

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Zipf};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::fanout::{channel_name, put_payload, MessageId, HEADER_LEN};
use faultline_model::ops::OpKind;
use faultline_model::value::{write_value, ValueId};
use faultline_spec::{KeyDistribution, PluginRef, ValueSizeSpec, WorkloadSpec};
use zipf::ZipfTable;

/// One operation for a target to execute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op {
    pub kind: OpKind,
    /// Key number in `0..keys.count`; the target adds the prefix.
    pub key: u64,
    /// Bytes to write, for ops that write.
    pub value_len: u32,
    /// When the history is recorded: which write this is, written into the
    /// value so reads tell which write they saw.
    pub write_id: Option<ValueId>,
    /// The exact value to write, when a shape plugin chose it.
    pub value: Option<Arc<str>>,
    /// A publish: which message it is (its channel is `key`).
    pub message: Option<MessageId>,
}

/// The immutable part of a workload shared by every client of a cell.
#[derive(Debug)]
pub struct Workload {
    /// (kind, cumulative weight) — picked by a uniform draw in `0..total`.
    mix: Vec<(OpKind, f64)>,
    total_weight: f64,
    distribution: KeyDistribution,
    key_count: u64,
    zipf_exponent: f64,
    /// Zipfian key spaces up to `faultline_spec::memory::ZIPF_TABLE_MAX_KEYS`: the alias table.
    zipf_table: Option<ZipfTable>,
    hot_keys: u64,
    hot_op_fraction: f64,
    value_size: (u32, u32),
    pub key_prefix: String,
    /// Random printable bytes that values are sliced from.
    pub value_bytes: Arc<[u8]>,
    seed: u64,
    /// The run's tag, written into recorded values.
    run_tag: u32,
    /// Every op kind the spec declares, with its weight, in spec order.
    pub declared: Vec<(OpKind, f64)>,
    /// A plugin decides the ops instead of the built-in generator.
    pub shape: Option<PluginRef>,
    /// Publish/subscribe fan-out, when the workload has it.
    pub fanout: Option<Fanout>,
}

/// A fan-out workload's channels and subscribers, as the engine and the
/// kind need them.
#[derive(Debug, Clone)]
pub struct Fanout {
    /// Channel `n`'s name at index `n`.
    pub channels: Vec<Vec<u8>>,
    pub subscribers: u32,
    pub message_size: usize,
    /// Subscribers `0..n` stop reading at `at` into the window for `for`.
    pub pause: Option<(u32, std::time::Duration, std::time::Duration)>,
}

impl Fanout {
    /// The channels subscriber `i` takes: channel `i mod channels`.
    pub fn channels_of(&self, subscriber: u32) -> Vec<u32> {
        vec![subscriber % self.channels.len() as u32]
    }

    /// Whether subscriber `i` pauses.
    pub fn pauses(&self, subscriber: u32) -> bool {
        self.pause.is_some_and(|(n, _, _)| subscriber < n)
    }
}

impl Workload {
    pub fn new(spec: &WorkloadSpec, seed: u64, run_tag: u32) -> Workload {
        let mut total = 0.0;
        let mix = spec
            .ops
            .iter()
            .filter(|(_, w)| **w > 0.0)
            .map(|(k, w)| {
                total += w;
                (*k, total)
            })
            .collect();
        let value_size = match spec.value_size {
            ValueSizeSpec::Fixed(s) => (s.0 as u32, s.0 as u32),
            ValueSizeSpec::Range { min, max } => (min.0 as u32, max.0 as u32),
        };
        let keys = &spec.keys;
        let hot_keys = ((keys.count as f64) * keys.hot_fraction.unwrap_or(0.01)).ceil() as u64;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x5EED_DA7A);
        let alphabet = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        // Slack past the largest value so values can start at different offsets.
        let value_bytes: Arc<[u8]> =
            (0..value_size.1 as usize + 64).map(|_| alphabet[rng.random_range(0..alphabet.len())]).collect();
        Workload {
            mix,
            total_weight: total,
            distribution: keys.distribution,
            key_count: keys.count,
            zipf_exponent: keys.exponent.unwrap_or(0.99),
            zipf_table: (keys.distribution == KeyDistribution::Zipfian
                && keys.count <= faultline_spec::memory::ZIPF_TABLE_MAX_KEYS)
                .then(|| ZipfTable::new(keys.count, keys.exponent.unwrap_or(0.99))),
            hot_keys: hot_keys.clamp(1, keys.count),
            hot_op_fraction: keys.hot_op_fraction.unwrap_or(0.9),
            value_size,
            key_prefix: keys.prefix.clone(),
            value_bytes,
            seed,
            run_tag,
            declared: spec.ops.iter().map(|(k, w)| (*k, *w)).collect(),
            shape: spec.shape.clone(),
            fanout: spec.fanout.as_ref().map(|f| Fanout {
                channels: (0..f.channels).map(|n| channel_name(&keys.prefix, run_tag, n)).collect(),
                subscribers: f.subscribers,
                message_size: f.message_size.0 as usize,
                pause: f.pause.as_ref().map(|p| (p.subscribers, p.at.0, p.pause_for.0)),
            }),
        }
    }

    /// The kinds a cell's ops may have: a shape plugin may send any the spec
    /// declares, the built-in mix only those with a weight.
    pub fn kinds(&self) -> Vec<OpKind> {
        match self.shape {
            Some(_) => self.declared.iter().map(|(k, _)| *k).collect(),
            None => self.mix.iter().map(|(k, _)| *k).collect(),
        }
    }

    pub fn value_size(&self) -> (u32, u32) {
        self.value_size
    }

    pub fn key_count(&self) -> u64 {
        self.key_count
    }

    /// Whether the cell's load ends by itself, when its contention rounds
    /// are done, rather than with its window.
    pub fn is_rounds(&self) -> bool {
        self.distribution == KeyDistribution::Rounds && self.shape.is_none()
    }

    /// The key of a cell's first round: the cells of a run (told apart by
    /// `salt`) never share a round's key, and runs (their random tag) over a
    /// kept table almost never do, so each round starts on a key no earlier
    /// write touched. Validation bounds `count` so the keys fit.
    pub fn first_round_key(&self, salt: u64) -> u64 {
        ((salt ^ u64::from(self.run_tag)) % (1 << 24)) * self.key_count
    }

    /// Appends the value an op writes: its own tagged value when the history
    /// is recorded, the value a shape plugin chose, else a slice of the
    /// shared random bytes.
    pub fn put_value(&self, op: &Op, out: &mut Vec<u8>) {
        match (op.write_id, &op.value) {
            (Some(id), _) => write_value(self.run_tag, id, op.value_len as usize, out),
            (None, Some(value)) => out.extend_from_slice(value.as_bytes()),
            (None, None) => {
                let offset = (op.key % 64) as usize;
                out.extend_from_slice(&self.value_bytes[offset..offset + op.value_len as usize]);
            }
        }
    }

    /// Appends a publish's message: its header stamped `stamp`, padded
    /// with the shared random bytes to the message size.
    pub fn put_message(&self, op: &Op, stamp: u64, out: &mut Vec<u8>) {
        let size = self.fanout.as_ref().map_or(HEADER_LEN, |f| f.message_size);
        let id = op.message.unwrap_or(MessageId { lane: 0, seq: 0 });
        put_payload(id, stamp, size, &self.value_bytes, out);
    }

    /// The channel a publish goes to.
    pub fn channel(&self, op: &Op) -> &[u8] {
        let channels = &self.fanout.as_ref().expect("validation pairs publish with fanout").channels;
        &channels[op.key as usize % channels.len()]
    }

    /// Appends the key an op addresses. Counters live in their own namespace:
    /// INCR on a key holding random bytes would fail with a type error.
    pub fn put_key(&self, kind: OpKind, key: u64, out: &mut Vec<u8>) {
        out.extend_from_slice(self.key_prefix.as_bytes());
        if kind == OpKind::Incr {
            out.extend_from_slice(b"n:");
        }
        out.extend_from_slice(itoa::Buffer::new().format(key).as_bytes());
    }

    /// A stream of ops for one client; `stream` numbers the clients of a cell
    /// (and `salt` tells cells apart) so every client draws its own sequence.
    /// `in_flight` is how many ops the client keeps going at once: in
    /// contention rounds each of them is one writer of the round.
    /// With `tag` (cell, writer), writes carry ids for the history.
    pub fn stream(
        self: &Arc<Self>,
        stream: u64,
        streams: u64,
        in_flight: u32,
        salt: u64,
        tag: Option<(u16, u16)>,
    ) -> OpStream {
        let seed = self
            .seed
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(salt.wrapping_mul(0xD1B5_4A32_D192_ED03))
            .wrapping_add(stream);
        let zipf = (self.distribution == KeyDistribution::Zipfian && self.zipf_table.is_none())
            .then(|| Zipf::new(self.key_count as f64, self.zipf_exponent).expect("validated exponent"));
        let builtin = BuiltinStream {
            workload: Arc::clone(self),
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            zipf,
            next_sequential: stream % self.key_count,
            stride: streams.max(1),
            issued: 0,
            per_round: u64::from(in_flight.max(1)),
            // Only contention rounds read it; validation bounds their key
            // count so it fits, while another distribution's may be too large.
            first_round_key: match self.distribution {
                KeyDistribution::Rounds => self.first_round_key(salt),
                _ => 0,
            },
            lane: stream as u16,
            published: vec![0; self.fanout.as_ref().map_or(0, |f| f.channels.len())],
            next_channel: stream,
        };
        OpStream { source: Source::Builtin(builtin), tag, next_seq: 0 }
    }
}

/// Where one client's ops come from when the built-in generator does not
/// decide them (a shape plugin's feed): the engine pulls ops from it and,
/// if it asks, tells it how each ended.
pub trait OpSource: Send {
    /// The next op; `None` when the source has no more (or failed).
    fn next_op(&mut self) -> Option<Op>;
    /// Called while the connection waits for replies: make the next `need`
    /// ops now, off the path from a reply to the next request.
    fn prepare(&mut self, need: usize);
    /// Whether the source wants to hear how its ops ended.
    fn observes(&self) -> bool;
    /// How `op` ended, for a source that [`Self::observes`].
    fn completed(&mut self, op: &Op, ok: bool);
}

/// One client's ops, from the built-in generator or an [`OpSource`];
/// writes get their ids here when a history is recorded.
pub struct OpStream {
    source: Source,
    tag: Option<(u16, u16)>,
    next_seq: u32,
}

enum Source {
    Builtin(BuiltinStream),
    External(Box<dyn OpSource>),
}

impl OpStream {
    pub fn from_source(source: Box<dyn OpSource>, tag: Option<(u16, u16)>) -> OpStream {
        OpStream { source: Source::External(source), tag, next_seq: 0 }
    }

    /// The next op; `None` when a shape plugin has no more (or failed).
    #[inline]
    pub fn next_op(&mut self) -> Option<Op> {
        let mut op = match &mut self.source {
            Source::Builtin(b) => b.next_op()?,
            Source::External(s) => s.next_op()?,
        };
        if let (Some((cell, writer)), true) = (self.tag, op.kind.writes_value()) {
            self.next_seq += 1;
            op.write_id = Some(ValueId { cell, writer, seq: self.next_seq - 1 });
        }
        Some(op)
    }

    /// Called while the connection waits for replies: an external source
    /// makes the next `need` ops now, off the path from a reply to the next
    /// request. The built-in generator is cheap enough per op.
    #[inline]
    pub fn prepare(&mut self, need: usize) {
        if let Source::External(s) = &mut self.source {
            s.prepare(need);
        }
    }

    /// Whether the next op opens a new contention round: it waits until the
    /// lane's calls of the last round are answered.
    #[inline]
    pub fn starts_a_round(&self) -> bool {
        match &self.source {
            Source::Builtin(b) => {
                b.workload.distribution == KeyDistribution::Rounds && b.issued > 0 && b.issued % b.per_round == 0
            }
            Source::External(_) => false,
        }
    }

    /// Contention rounds: how many rounds this client has issued in full.
    pub fn rounds_done(&self) -> u64 {
        match &self.source {
            Source::Builtin(b) => b.issued / b.per_round,
            Source::External(_) => 0,
        }
    }

    /// Whether the source wants to hear how its ops ended.
    #[inline]
    pub fn observes(&self) -> bool {
        matches!(&self.source, Source::External(s) if s.observes())
    }

    #[inline]
    pub fn completed(&mut self, op: &Op, ok: bool) {
        if let Source::External(s) = &mut self.source {
            s.completed(op, ok);
        }
    }
}

struct BuiltinStream {
    workload: Arc<Workload>,
    rng: Xoshiro256PlusPlus,
    zipf: Option<Zipf<f64>>,
    next_sequential: u64,
    stride: u64,
    /// Ops issued so far, which is the round in contention rounds.
    issued: u64,
    per_round: u64,
    first_round_key: u64,
    /// Fan-out: this client's number, as its messages name it.
    lane: u16,
    /// Fan-out: messages this client has published per channel.
    published: Vec<u32>,
    /// Fan-out: where its next publish goes (the channels in turn).
    next_channel: u64,
}

impl BuiltinStream {
    /// `None` once a client's contention rounds are done.
    #[inline]
    fn next_op(&mut self) -> Option<Op> {
        let w = &*self.workload;
        // Only contention rounds need the round (a division per op otherwise).
        let round = if w.distribution == KeyDistribution::Rounds { self.issued / self.per_round } else { 0 };
        if w.distribution == KeyDistribution::Rounds && round >= w.key_count {
            return None;
        }
        self.issued += 1;
        let kind = if w.mix.len() == 1 {
            w.mix[0].0
        } else {
            let draw = self.rng.random::<f64>() * w.total_weight;
            w.mix.iter().find(|(_, cum)| draw < *cum).unwrap_or(&w.mix[w.mix.len() - 1]).0
        };
        let key = match w.distribution {
            KeyDistribution::Uniform => self.rng.random_range(0..w.key_count),
            KeyDistribution::Zipfian => match &w.zipf_table {
                Some(table) => table.sample(&mut self.rng),
                None => {
                    // Zipf yields ranks 1..=n; rank 1 is the hottest key.
                    let rank = self.zipf.as_ref().expect("zipf set without a table").sample(&mut self.rng);
                    (rank as u64).saturating_sub(1).min(w.key_count - 1)
                }
            },
            KeyDistribution::Hotset => {
                if self.rng.random::<f64>() < w.hot_op_fraction || w.hot_keys == w.key_count {
                    self.rng.random_range(0..w.hot_keys)
                } else {
                    self.rng.random_range(w.hot_keys..w.key_count)
                }
            }
            KeyDistribution::Sequential => {
                // Clients interleave so together they walk the key space in order.
                let key = self.next_sequential;
                self.next_sequential = (self.next_sequential + self.stride) % w.key_count;
                key
            }
            KeyDistribution::Rounds => self.first_round_key + round,
        };
        let value_len = if w.value_size.0 == w.value_size.1 {
            w.value_size.0
        } else {
            self.rng.random_range(w.value_size.0..=w.value_size.1)
        };
        if kind == OpKind::Publish {
            // The channels in turn from the client's own first: each
            // channel gets the same share, and numbers its messages.
            let channel = (self.next_channel % self.published.len() as u64) as usize;
            self.next_channel += 1;
            let seq = self.published[channel];
            self.published[channel] += 1;
            let message = Some(MessageId { lane: self.lane, seq });
            return Some(Op { kind, key: channel as u64, value_len, write_id: None, value: None, message });
        }
        Some(Op { kind, key, value_len, write_id: None, value: None, message: None })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(yaml: &str) -> Arc<Workload> {
        let spec: WorkloadSpec = serde_yaml_ng::from_str(yaml).unwrap();
        Arc::new(Workload::new(&spec, 7, 0xabc))
    }

    #[test]
    fn same_seed_same_ops() {
        let w = workload("ops: {get: 1, set: 1}\nkeys: {count: 100}\n");
        let a: Vec<Op> = {
            let mut s = w.stream(0, 1, 1, 0, None);
            (0..100).map(|_| s.next_op().unwrap()).collect()
        };
        let b: Vec<Op> = {
            let mut s = w.stream(0, 1, 1, 0, None);
            (0..100).map(|_| s.next_op().unwrap()).collect()
        };
        let c: Vec<Op> = {
            let mut s = w.stream(1, 2, 1, 0, None);
            (0..100).map(|_| s.next_op().unwrap()).collect()
        };
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn mix_follows_weights() {
        let w = workload("ops: {get: 80, set: 20}\n");
        let mut s = w.stream(0, 1, 1, 0, None);
        let gets = (0..100_000).filter(|_| s.next_op().unwrap().kind == OpKind::Get).count();
        assert!((78_000..82_000).contains(&gets), "{gets} gets of 100000");
    }

    #[test]
    fn zipfian_concentrates_on_low_ranks_and_hotset_on_hot_keys() {
        let w = workload("ops: {get: 1}\nkeys: {count: 10000, distribution: zipfian, exponent: 0.99}\n");
        let mut s = w.stream(0, 1, 1, 0, None);
        let top = (0..100_000).filter(|_| s.next_op().unwrap().key < 100).count();
        assert!(top > 40_000, "top 1% of keys got {top} of 100000");

        let w = workload(
            "ops: {get: 1}\nkeys: {count: 1000, distribution: hotset, hot_fraction: 0.01, hot_op_fraction: 0.9}\n",
        );
        let mut s = w.stream(0, 1, 1, 0, None);
        let hot = (0..100_000).filter(|_| s.next_op().unwrap().key < 10).count();
        assert!((88_000..92_000).contains(&hot), "{hot}");
    }

    #[test]
    fn recorded_writes_are_numbered_per_writer() {
        let w = workload("ops: {get: 1, set: 1}\n");
        let mut s = w.stream(0, 1, 1, 0, Some((3, 5)));
        let ids: Vec<ValueId> = (0..100).map(|_| s.next_op().unwrap()).filter_map(|op| op.write_id).collect();
        assert!(ids.len() > 30);
        assert!(ids.iter().enumerate().all(|(i, id)| *id == ValueId { cell: 3, writer: 5, seq: i as u32 }));
        let mut value = Vec::new();
        let op = Op { kind: OpKind::Set, key: 1, value_len: 40, write_id: Some(ids[0]), value: None, message: None };
        w.put_value(&op, &mut value);
        let scope = faultline_model::value::Scope { run: 0xabc, cell: 3 };
        assert_eq!(faultline_model::value::parse_value(&value, scope), faultline_model::value::Observed::Write(ids[0]));
    }

    #[test]
    fn publishers_take_the_channels_in_turn_and_number_their_messages_per_channel() {
        let w = workload("ops: {publish: 1}\nfanout: {channels: 3, subscribers: 6}\n");
        let mut s = w.stream(1, 2, 1, 0, None);
        let ops: Vec<(u64, u16, u32)> = (0..7)
            .map(|_| s.next_op().unwrap())
            .map(|op| (op.key, op.message.unwrap().lane, op.message.unwrap().seq))
            .collect();
        assert_eq!(ops, [(1, 1, 0), (2, 1, 0), (0, 1, 0), (1, 1, 1), (2, 1, 1), (0, 1, 1), (1, 1, 2)]);
        let fanout = w.fanout.as_ref().unwrap();
        assert_eq!(fanout.channels_of(4), [1]);
        assert_eq!(w.channel(&s.next_op().unwrap()), b"fl:fanout:00000abc:2");
        let mut message = Vec::new();
        w.put_message(&s.next_op().unwrap(), 42, &mut message);
        assert_eq!(message.len(), 64);
        let (id, stamp) = crate::fanout::parse_payload(&message).unwrap();
        assert_eq!((id.lane, id.seq, stamp), (1, 2, 42));
    }

    #[test]
    fn sequential_clients_interleave() {
        let w =
            workload("ops: {set: 1}\nkeys: {count: 10, distribution: sequential}\nvalue_size: {min: 1B, max: 3B}\n");
        let mut a = w.stream(0, 2, 1, 0, None);
        let mut b = w.stream(1, 2, 1, 0, None);
        let keys: Vec<u64> = (0..3).flat_map(|_| [a.next_op().unwrap().key, b.next_op().unwrap().key]).collect();
        assert_eq!(keys, vec![0, 1, 2, 3, 4, 5]);
        assert!((0..100).all(|_| (1..=3).contains(&a.next_op().unwrap().value_len)));
    }

    #[test]
    fn contention_rounds_put_every_writer_on_one_fresh_key_per_round_and_end() {
        let w = workload("ops: {set: 1}\nkeys: {count: 3, distribution: rounds}\n");
        let first = w.first_round_key(42);
        // Two clients with two ops in flight each: four writers per round.
        let mut a = w.stream(0, 2, 2, 42, None);
        let mut b = w.stream(1, 2, 2, 42, None);
        let keys = |s: &mut OpStream| std::iter::from_fn(|| s.next_op().map(|op| op.key - first)).collect::<Vec<_>>();
        assert_eq!(keys(&mut a), [0, 0, 1, 1, 2, 2]);
        assert_eq!(keys(&mut b), [0, 0, 1, 1, 2, 2]);
        assert_ne!(w.first_round_key(43), first, "another cell starts on other keys");
        assert!(w.is_rounds());
    }
}
