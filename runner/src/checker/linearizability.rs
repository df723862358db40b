//! Linearizability checking of recorded operation histories.
//!
//! This is the algorithm of Porcupine (Anish Athalye), which is the
//! Wing–Gong search as improved by Lowe: the history is turned into a doubly
//! linked list of call and return entries ordered by time, and the checker
//! repeatedly tries to *linearize* (take out of the list) a pending call whose
//! effect the sequential model accepts, backtracking when it reaches a return
//! entry whose operation has not been linearized yet. A memo cache of
//! (set of linearized operations, model state) pairs prunes every
//! configuration that has already been explored, which is what makes the
//! search practical.
//!
//! Models that are P-compositional are split into independent partitions
//! first (the key-value model is checked one key at a time): a history is
//! linearizable exactly when every partition is.
//!
//! The search is iterative, so long histories cannot overflow the stack, and
//! it is bounded by a wall-clock budget and by an estimate of the memo cache's
//! memory. Running out of either yields [`Verdict::Unknown`], never a guess.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::mem::size_of;
use std::time::{Duration, Instant};

/// The sequential specification a history is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Model {
    /// A single compare-and-set register holding an integer, initially nil.
    Register,
    /// A map from string keys to string values; every key initially holds
    /// `""`. Checked one key at a time.
    Kv,
}

/// What a client asked for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Input {
    /// Register: read the value.
    Read,
    /// Register: write a value.
    Write(i64),
    /// Register: if the value is the first number, replace it by the second.
    Cas(i64, i64),
    /// Kv: read a key.
    Get(String),
    /// Kv: replace a key's value.
    Put(String, String),
    /// Kv: append to a key's value.
    Append(String, String),
}

/// What a client was told.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Output {
    /// Result of a register read; `None` is nil.
    Value(Option<i64>),
    /// A write, put or append succeeded.
    Ok,
    /// Whether a compare-and-set found the expected value and swapped.
    CasOk(bool),
    /// Result of a kv get.
    Str(String),
    /// The outcome is not known (Jepsen `:info`).
    Unknown,
}

/// One operation of a history: its invocation and, if known, its completion.
///
/// `call` and `ret` are timestamps in any monotonic unit. `ret == None` (or an
/// [`Output::Unknown`] output) means the outcome is unknown: the operation may
/// or may not have taken effect, at any time after `call`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    pub client: u64,
    pub input: Input,
    pub call: u64,
    pub ret: Option<u64>,
    pub output: Output,
}

/// The result of a check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Linearizable,
    NotLinearizable(Witness),
    /// The check could not decide (time or memory ran out, or the history does
    /// not fit the model); the text says why.
    Unknown(String),
}

/// Evidence for a [`Verdict::NotLinearizable`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Witness {
    /// The key whose sub-history is not linearizable (Kv model only).
    pub partition: Option<String>,
    /// A few operations involved: the end of the longest linearizable prefix
    /// found, the operation that then could not be linearized, and other
    /// operations pending at that point.
    pub ops: Vec<Operation>,
    pub explanation: String,
}

/// Resource bounds of a check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock time for the whole check, all partitions together.
    pub budget: Duration,
    /// Approximate memory the memo cache of one partition may use.
    pub max_cache_bytes: usize,
}

impl Limits {
    /// 2 GiB: enough for tens of millions of explored configurations of
    /// histories with a few hundred operations per partition.
    pub const DEFAULT_MAX_CACHE_BYTES: usize = 2 << 30;

    /// The given time budget and the default memory cap.
    pub fn with_budget(budget: Duration) -> Self {
        Limits { budget, max_cache_bytes: Self::DEFAULT_MAX_CACHE_BYTES }
    }
}

/// Checks whether `ops` is linearizable with respect to `model`, within the
/// time `budget` and the default memory cap.
///
/// Failed operations (Jepsen `:fail`, which definitely did not take effect)
/// must already have been removed by the caller. A compare-and-set that was
/// refused because the value did not match is not failed in that sense: it
/// observed the register, and is passed as [`Output::CasOk`]`(false)`.
pub fn check(model: Model, ops: &[Operation], budget: Duration) -> Verdict {
    check_with_limits(model, ops, &Limits::with_budget(budget))
}

/// [`check`] with explicit resource bounds.
pub fn check_with_limits(model: Model, ops: &[Operation], limits: &Limits) -> Verdict {
    let checker = Checker { ops, limits, deadline: Instant::now().checked_add(limits.budget) };
    let result = match model {
        Model::Register => prepare_register(ops).map(|part| checker.run(vec![(None, part)], None)),
        Model::Kv => prepare_kv(ops).map(|parts| {
            let parts = parts.into_iter().map(|(k, p)| (Some(k), p)).collect();
            checker.run(parts, String::new())
        }),
    };
    result.unwrap_or_else(Verdict::Unknown)
}

impl fmt::Display for Input {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Input::Read => write!(f, "read()"),
            Input::Write(v) => write!(f, "write({v})"),
            Input::Cas(from, to) => write!(f, "cas({from}, {to})"),
            Input::Get(k) => write!(f, "get({k:?})"),
            Input::Put(k, v) => write!(f, "put({k:?}, {v:?})"),
            Input::Append(k, v) => write!(f, "append({k:?}, {v:?})"),
        }
    }
}

impl fmt::Display for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Output::Value(None) => write!(f, "nil"),
            Output::Value(Some(v)) => write!(f, "{v}"),
            Output::Ok | Output::CasOk(true) => write!(f, "ok"),
            Output::CasOk(false) => write!(f, "fail"),
            Output::Str(s) => write!(f, "{s:?}"),
            Output::Unknown => write!(f, "unknown"),
        }
    }
}

impl fmt::Display for Operation {
    /// E.g. `client 3: cas(1, 4) -> ok [call 17, ret 20]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "client {}: {}", self.client, self.input)?;
        match self.ret {
            Some(ret) if self.output != Output::Unknown => {
                write!(f, " -> {} [call {}, ret {ret}]", self.output, self.call)
            }
            _ => write!(f, " -> unknown [call {}, no return]", self.call),
        }
    }
}

impl Operation {
    /// Whether the outcome is unknown (Jepsen `:info`, or no completion).
    fn is_indeterminate(&self) -> bool {
        self.ret.is_none() || self.output == Output::Unknown
    }
}

// ---------------------------------------------------------------------------
// Sequential models
// ---------------------------------------------------------------------------

/// What a model says about applying one operation to a state.
enum Transition<S> {
    /// The operation's output is impossible in this state.
    Illegal,
    /// Legal, and the state does not change.
    Same,
    /// Legal, and the state becomes this.
    To(S),
}

/// An operation reduced to what the sequential model needs.
trait Step {
    type State: Clone + Eq + Hash;
    fn step(&self, state: &Self::State) -> Transition<Self::State>;
    /// Heap memory a state owns, for the memory estimate.
    fn heap_bytes(state: &Self::State) -> usize;
    /// Human-readable description of a state for explanations.
    fn describe(state: &Self::State) -> String;
}

enum RegisterOp {
    Read(Option<i64>),
    Write(i64),
    /// `outcome` is `None` when unknown.
    Cas {
        from: i64,
        to: i64,
        outcome: Option<bool>,
    },
}

impl Step for RegisterOp {
    type State = Option<i64>;

    fn step(&self, state: &Option<i64>) -> Transition<Option<i64>> {
        match *self {
            RegisterOp::Read(seen) if seen == *state => Transition::Same,
            RegisterOp::Read(_) => Transition::Illegal,
            RegisterOp::Write(v) => Transition::To(Some(v)),
            RegisterOp::Cas { from, to, outcome } => {
                let swaps = *state == Some(from);
                match outcome {
                    Some(ok) if ok != swaps => Transition::Illegal,
                    _ if swaps => Transition::To(Some(to)),
                    _ => Transition::Same,
                }
            }
        }
    }

    fn heap_bytes(_: &Option<i64>) -> usize {
        0
    }

    fn describe(state: &Option<i64>) -> String {
        match state {
            Some(v) => format!("the register holds {v}"),
            None => "the register holds nil".to_string(),
        }
    }
}

/// One key's operation of the Kv model (the key itself is the partition).
enum KvOp {
    Get(String),
    Put(String),
    Append(String),
}

impl Step for KvOp {
    type State = String;

    fn step(&self, state: &String) -> Transition<String> {
        match self {
            KvOp::Get(seen) if seen == state => Transition::Same,
            KvOp::Get(_) => Transition::Illegal,
            KvOp::Put(v) => Transition::To(v.clone()),
            KvOp::Append(v) => Transition::To(format!("{state}{v}")),
        }
    }

    fn heap_bytes(state: &String) -> usize {
        state.capacity()
    }

    fn describe(state: &String) -> String {
        const MAX_CHARS: usize = 120;
        let len = state.chars().count();
        if len <= MAX_CHARS {
            format!("the key holds {state:?}")
        } else {
            let tail: String = state.chars().skip(len - MAX_CHARS).collect();
            format!("the key holds a {len}-character value ending in {tail:?}")
        }
    }
}

/// An operation ready for the search.
struct Prepared<T> {
    op: T,
    call: u64,
    /// `None` is +infinity.
    ret: Option<u64>,
    /// Index into the caller's slice.
    source: usize,
}

/// Checks the times of `original` and wraps its reduced form `op` for the
/// search; `op` is `None` for an operation the search can leave out.
fn prepared<T>(index: usize, original: &Operation, op: Option<T>) -> Result<Option<Prepared<T>>, String> {
    // An operation with an unknown outcome may have taken effect at any time
    // after its call, or never. Giving it a return time of +infinity and an
    // unconstrained output expresses exactly that: the search may linearize
    // it anywhere after its call, and linearizing it after every known
    // operation is the same as it never having happened, since nothing
    // observes the state afterwards.
    let ret = if original.is_indeterminate() { None } else { original.ret };
    if let Some(ret) = ret {
        if ret < original.call {
            return Err(format!("malformed history: operation #{index} ({original}) returns before it is called"));
        }
    }
    Ok(op.map(|op| Prepared { op, call: original.call, ret, source: index }))
}

fn misfit(model: &str, index: usize, op: &Operation) -> String {
    format!("malformed history: operation #{index} ({op}) does not fit the {model} model")
}

fn prepare_register(ops: &[Operation]) -> Result<Vec<Prepared<RegisterOp>>, String> {
    let mut part = Vec::with_capacity(ops.len());
    for (i, o) in ops.iter().enumerate() {
        let op = match (&o.input, &o.output) {
            // A read with an unknown result constrains nothing and changes
            // nothing, so it is dropped.
            (Input::Read, _) if o.is_indeterminate() => None,
            (Input::Read, Output::Value(v)) => Some(RegisterOp::Read(*v)),
            (Input::Write(v), Output::Ok | Output::Unknown) => Some(RegisterOp::Write(*v)),
            (Input::Cas(from, to), Output::CasOk(_) | Output::Unknown) => Some(RegisterOp::Cas {
                from: *from,
                to: *to,
                outcome: match o.output {
                    Output::CasOk(ok) if !o.is_indeterminate() => Some(ok),
                    _ => None,
                },
            }),
            _ => return Err(misfit("register", i, o)),
        };
        part.extend(prepared(i, o, op)?);
    }
    Ok(part)
}

/// Splits a Kv history by key, in key order.
fn prepare_kv(ops: &[Operation]) -> Result<BTreeMap<String, Vec<Prepared<KvOp>>>, String> {
    let mut parts: BTreeMap<String, Vec<Prepared<KvOp>>> = BTreeMap::new();
    for (i, o) in ops.iter().enumerate() {
        let (key, op) = match (&o.input, &o.output) {
            (Input::Get(k), _) if o.is_indeterminate() => (k, None),
            (Input::Get(k), Output::Str(v)) => (k, Some(KvOp::Get(v.clone()))),
            (Input::Put(k, v), Output::Ok | Output::Unknown) => (k, Some(KvOp::Put(v.clone()))),
            (Input::Append(k, v), Output::Ok | Output::Unknown) => (k, Some(KvOp::Append(v.clone()))),
            _ => return Err(misfit("kv", i, o)),
        };
        if let Some(p) = prepared(i, o, op)? {
            parts.entry(key.clone()).or_default().push(p);
        }
    }
    Ok(parts)
}

// ---------------------------------------------------------------------------
// The search
// ---------------------------------------------------------------------------

/// FxHash-style hasher with a final avalanche: the memo cache hashes millions
/// of short bitsets, for which SipHash is needlessly slow, and without the
/// avalanche the low bits (which pick the hash bucket) would ignore the high
/// bits of the last word.
#[derive(Default)]
struct FastHasher(u64);

impl FastHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    fn finish(&self) -> u64 {
        // MurmurHash3's fmix64.
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

type FastBuild = BuildHasherDefault<FastHasher>;

/// How a partition's search ended.
enum Outcome {
    Linearizable,
    Violation(Frontier),
    OutOfTime,
    OutOfMemory { entries: usize, bytes: usize },
}

/// The deepest point the search reached before a partition was found not
/// linearizable. All indices are into the partition.
struct Frontier {
    /// The longest linearizable prefix, in linearization order.
    prefix: Vec<usize>,
    /// The operation whose return was reached without it being linearized.
    blocked: usize,
    /// Other operations that were pending (called, not linearized) there.
    pending: Vec<usize>,
    /// Description of the model state after the prefix.
    state: String,
}

const NIL: usize = usize::MAX;
const HEAD: usize = 0;

/// The Wing–Gong/Lowe search with Porcupine's memo cache over one partition.
fn search<T: Step>(ops: &[Prepared<T>], init: T::State, deadline: Option<Instant>, max_cache_bytes: usize) -> Outcome {
    let n = ops.len();
    if n == 0 {
        return Outcome::Linearizable;
    }

    // Entries sorted by time; at equal times calls come first, so operations
    // that touch at one instant count as concurrent. Unknown returns sort
    // after everything.
    let mut entries: Vec<(u128, bool, usize)> = Vec::with_capacity(2 * n);
    for (i, p) in ops.iter().enumerate() {
        entries.push((u128::from(p.call), false, i));
        entries.push((p.ret.map_or(u128::MAX, u128::from), true, i));
    }
    entries.sort();

    // Doubly linked list over nodes 1..=2n (node 0 is the head sentinel).
    // Lifting a call unlinks it and its return; because lifts are undone in
    // LIFO order, the unlinked nodes' own links stay valid for relinking.
    let nodes = 2 * n + 1;
    let mut next = vec![NIL; nodes];
    let mut prev = vec![NIL; nodes];
    let mut op_of = vec![0usize; nodes];
    let mut is_return = vec![false; nodes];
    let mut return_node = vec![NIL; n];
    for (k, &(_, ret, op)) in entries.iter().enumerate() {
        let node = k + 1;
        prev[node] = k;
        next[k] = node;
        op_of[node] = op;
        is_return[node] = ret;
        if ret {
            return_node[op] = node;
        }
    }

    let lift = |next: &mut [usize], prev: &mut [usize], call: usize| {
        let ret = return_node[op_of[call]];
        next[prev[call]] = next[call];
        prev[next[call]] = prev[call];
        next[prev[ret]] = next[ret];
        if next[ret] != NIL {
            prev[next[ret]] = prev[ret];
        }
    };
    let unlift = |next: &mut [usize], prev: &mut [usize], call: usize| {
        let ret = return_node[op_of[call]];
        next[prev[ret]] = ret;
        if next[ret] != NIL {
            prev[next[ret]] = ret;
        }
        next[prev[call]] = call;
        prev[next[call]] = call;
    };

    // Model states are interned so the cache stores a small id per entry.
    let mut states: Vec<T::State> = vec![init.clone()];
    let mut state_ids: HashMap<T::State, u64, FastBuild> = HashMap::default();
    state_ids.insert(init, 0);
    let mut state: u64 = 0;

    // The key of a configuration: the bitset of linearized operations with the
    // state id appended as one more word. Keeping both in one slice lets the
    // cache be probed with a borrowed `&[u64]`, without allocating.
    let words = n.div_ceil(64);
    let mut key = vec![0u64; words + 1];
    let mut cache: HashSet<Box<[u64]>, FastBuild> = HashSet::default();
    // Rough per-entry cost: the key allocation with allocator overhead, the
    // boxed pointer in the table, and hash-table control bytes and slack.
    let entry_bytes = (words + 1) * 8 + 16 + size_of::<Box<[u64]>>() + 8;
    let mut bytes = 0usize;

    // Stack of (lifted call node, state before it).
    let mut calls: Vec<(usize, u64)> = Vec::new();
    let mut frontier: Option<Frontier> = None;
    let mut steps: u64 = 0;
    let mut node = next[HEAD];

    while next[HEAD] != NIL {
        steps += 1;
        if steps.is_multiple_of(1024) && deadline.is_some_and(|d| Instant::now() >= d) {
            return Outcome::OutOfTime;
        }
        let op = op_of[node];

        if !is_return[node] {
            let new_state = match ops[op].op.step(&states[state as usize]) {
                Transition::Illegal => None,
                Transition::Same => Some(state),
                Transition::To(s) => Some(match state_ids.get(&s) {
                    Some(&id) => id,
                    None => {
                        let id = states.len() as u64;
                        bytes += size_of::<T::State>() * 2 + T::heap_bytes(&s) * 2 + 16;
                        state_ids.insert(s.clone(), id);
                        states.push(s);
                        id
                    }
                }),
            };
            if let Some(new_state) = new_state {
                key[op / 64] |= 1 << (op % 64);
                key[words] = new_state;
                if cache.contains(&key[..]) {
                    key[op / 64] &= !(1 << (op % 64));
                } else {
                    cache.insert(key.clone().into_boxed_slice());
                    bytes += entry_bytes;
                    if bytes > max_cache_bytes {
                        return Outcome::OutOfMemory { entries: cache.len(), bytes };
                    }
                    calls.push((node, state));
                    state = new_state;
                    lift(&mut next, &mut prev, node);
                    node = next[HEAD];
                    continue;
                }
            }
            node = next[node];
        } else {
            // The return of an operation that has not been linearized: every
            // call before it was tried here and led nowhere, so backtrack.
            if frontier.as_ref().is_none_or(|f| calls.len() > f.prefix.len()) {
                let mut pending = Vec::new();
                let mut cursor = next[HEAD];
                while cursor != node {
                    if !is_return[cursor] {
                        pending.push(op_of[cursor]);
                    }
                    cursor = next[cursor];
                }
                frontier = Some(Frontier {
                    prefix: calls.iter().map(|&(call, _)| op_of[call]).collect(),
                    blocked: op,
                    pending,
                    state: T::describe(&states[state as usize]),
                });
            }
            let Some((call, before)) = calls.pop() else {
                // Nothing left to undo: no linearization exists.
                return Outcome::Violation(frontier.expect("recorded just above at the latest"));
            };
            state = before;
            let undone = op_of[call];
            key[undone / 64] &= !(1 << (undone % 64));
            unlift(&mut next, &mut prev, call);
            node = next[call];
        }
    }
    Outcome::Linearizable
}

/// Runs the search over every partition of one history.
struct Checker<'a> {
    ops: &'a [Operation],
    limits: &'a Limits,
    deadline: Option<Instant>,
}

impl Checker<'_> {
    fn run<T: Step>(&self, parts: Vec<(Option<String>, Vec<Prepared<T>>)>, init: T::State) -> Verdict {
        let total = parts.len();
        // Running out of memory in one partition does not end the check: a
        // later partition may still be definitely not linearizable.
        let mut memory_note: Option<String> = None;
        for (i, (key, part)) in parts.iter().enumerate() {
            let which = match key {
                Some(k) => format!("partition {} of {total} (key {k:?}, {} ops)", i + 1, part.len()),
                None => format!("partition {} of {total} ({} ops)", i + 1, part.len()),
            };
            if self.deadline.is_some_and(|d| Instant::now() >= d) {
                return self.out_of_time(&which, i);
            }
            match search(part, init.clone(), self.deadline, self.limits.max_cache_bytes) {
                Outcome::Linearizable => {}
                Outcome::Violation(frontier) => {
                    return Verdict::NotLinearizable(self.witness(key.clone(), part, frontier))
                }
                Outcome::OutOfTime => return self.out_of_time(&which, i),
                Outcome::OutOfMemory { entries, bytes } => {
                    memory_note.get_or_insert(format!(
                        "memo cache for {which} outgrew its cap of {} MiB \
                         ({entries} entries, about {} MiB)",
                        self.limits.max_cache_bytes >> 20,
                        bytes >> 20
                    ));
                }
            }
        }
        memory_note.map_or(Verdict::Linearizable, Verdict::Unknown)
    }

    fn out_of_time(&self, which: &str, done: usize) -> Verdict {
        let budget = self.limits.budget.as_secs_f64();
        Verdict::Unknown(match done {
            0 => format!("time budget of {budget}s ran out while checking {which}"),
            1 => format!(
                "time budget of {budget}s ran out after partition 1 (which is linearizable), \
                 while checking {which}"
            ),
            _ => format!(
                "time budget of {budget}s ran out after partition {done} (partitions 1 to \
                 {done} are linearizable), while checking {which}"
            ),
        })
    }

    fn witness<T>(&self, partition: Option<String>, part: &[Prepared<T>], f: Frontier) -> Witness {
        const PREFIX_TAIL: usize = 5;
        const MAX_OPS: usize = 10;
        let original = |i: usize| self.ops[part[i].source].clone();

        let tail = &f.prefix[f.prefix.len().saturating_sub(PREFIX_TAIL)..];
        let mut ops: Vec<Operation> = tail.iter().map(|&i| original(i)).collect();
        ops.push(original(f.blocked));
        let others: Vec<usize> = f.pending.iter().copied().filter(|&i| i != f.blocked).collect();
        ops.extend(others.iter().take(MAX_OPS - ops.len()).map(|&i| original(i)));

        let scope = match &partition {
            Some(k) => format!("the history of key {k:?}"),
            None => "the history".to_string(),
        };
        let prefix = match tail.last() {
            None => "no operation can be linearized first".to_string(),
            Some(&last) => format!(
                "at most {} of its {} operations can be linearized (the longest prefix found \
                 ends with {})",
                f.prefix.len(),
                part.len(),
                original(last)
            ),
        };
        let others_note = match others.len() {
            0 => String::new(),
            1 => " (nor can the 1 other pending operation)".to_string(),
            k => format!(" (nor can any of the {k} other pending operations)"),
        };
        let explanation = format!(
            "{scope} is not linearizable: {prefix}. Then {}, and {} must take effect before \
             it returns, but it cannot take effect next without leading to a dead end{others_note}.",
            f.state,
            original(f.blocked),
        );
        Witness { partition, ops, explanation }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUDGET: Duration = Duration::from_secs(10);

    fn op(client: u64, input: Input, call: u64, ret: Option<u64>, output: Output) -> Operation {
        Operation { client, input, call, ret, output }
    }

    fn read(client: u64, call: u64, ret: u64, v: Option<i64>) -> Operation {
        op(client, Input::Read, call, Some(ret), Output::Value(v))
    }

    fn write(client: u64, call: u64, ret: u64, v: i64) -> Operation {
        op(client, Input::Write(v), call, Some(ret), Output::Ok)
    }

    fn witness(verdict: Verdict) -> Witness {
        match verdict {
            Verdict::NotLinearizable(w) => w,
            other => panic!("expected a violation, got {other:?}"),
        }
    }

    #[test]
    fn empty_history_is_linearizable() {
        assert_eq!(check(Model::Register, &[], BUDGET), Verdict::Linearizable);
        assert_eq!(check(Model::Kv, &[], BUDGET), Verdict::Linearizable);
    }

    #[test]
    fn overlapping_reads_may_see_old_and_new_value() {
        // The 6.824 quiz example Porcupine's tests use.
        let ops = [write(0, 0, 100, 100), read(1, 25, 75, Some(100)), read(2, 30, 60, None)];
        assert_eq!(check(Model::Register, &ops, BUDGET), Verdict::Linearizable);
    }

    #[test]
    fn stale_read_is_caught() {
        let ops = [
            write(0, 0, 100, 200),
            read(1, 10, 30, Some(200)),
            // Begins after a read already saw 200, so it cannot see nil.
            read(2, 40, 90, None),
        ];
        let w = witness(check(Model::Register, &ops, BUDGET));
        assert_eq!(w.partition, None);
        assert!(w.ops.contains(&ops[2]), "{w:?}");
        assert!(w.explanation.contains("read() -> nil"), "{}", w.explanation);
    }

    #[test]
    fn lost_write_is_caught() {
        let ops = [write(0, 0, 1, 1), write(1, 2, 3, 2), read(2, 4, 5, Some(1))];
        let w = witness(check(Model::Register, &ops, BUDGET));
        assert_eq!(w.ops.last(), Some(&ops[2]), "{w:?}");
        assert!(w.explanation.contains("the register holds 2"), "{}", w.explanation);
    }

    #[test]
    fn compare_and_set_semantics() {
        let cas =
            |client, call, ret, from, to, ok| op(client, Input::Cas(from, to), call, Some(ret), Output::CasOk(ok));
        let good = [write(0, 0, 1, 1), cas(1, 2, 3, 1, 2, true), cas(0, 4, 5, 1, 3, false), read(2, 6, 7, Some(2))];
        assert_eq!(check(Model::Register, &good, BUDGET), Verdict::Linearizable);

        // A compare-and-set cannot succeed against a value it does not match…
        let bad_swap = [write(0, 0, 1, 1), cas(1, 2, 3, 5, 2, true)];
        assert!(matches!(check(Model::Register, &bad_swap, BUDGET), Verdict::NotLinearizable(_)));
        // …nor fail against one it does.
        let bad_fail = [write(0, 0, 1, 1), cas(1, 2, 3, 1, 2, false)];
        assert!(matches!(check(Model::Register, &bad_fail, BUDGET), Verdict::NotLinearizable(_)));
        // Concurrent swaps can be ordered so that both succeed.
        let chain = [write(0, 0, 1, 1), cas(1, 2, 10, 2, 3, true), cas(2, 3, 9, 1, 2, true), read(0, 11, 12, Some(3))];
        assert_eq!(check(Model::Register, &chain, BUDGET), Verdict::Linearizable);
    }

    #[test]
    fn unknown_write_may_take_effect_any_time_after_its_call() {
        let unknown = op(0, Input::Write(1), 5, None, Output::Unknown);
        // Long after the client gave up, the write becomes visible.
        let later = [unknown.clone(), read(1, 100, 101, None), read(1, 200, 201, Some(1))];
        assert_eq!(check(Model::Register, &later, BUDGET), Verdict::Linearizable);
        // It may also never take effect.
        let never = [unknown.clone(), read(1, 100, 101, None)];
        assert_eq!(check(Model::Register, &never, BUDGET), Verdict::Linearizable);
        // But not before it was called.
        let early = [read(1, 0, 1, Some(1)), unknown];
        assert!(matches!(check(Model::Register, &early, BUDGET), Verdict::NotLinearizable(_)));
        // An `:info` return time does not bound it either.
        let info = op(0, Input::Write(1), 5, Some(6), Output::Unknown);
        let late = [info, read(1, 100, 101, None), read(1, 200, 201, Some(1))];
        assert_eq!(check(Model::Register, &late, BUDGET), Verdict::Linearizable);
    }

    #[test]
    fn unknown_cas_and_unknown_reads() {
        let ops = [
            write(0, 0, 1, 1),
            op(1, Input::Cas(1, 2), 2, None, Output::Unknown),
            op(2, Input::Read, 3, None, Output::Unknown),
            read(3, 10, 11, Some(2)),
        ];
        assert_eq!(check(Model::Register, &ops, BUDGET), Verdict::Linearizable);
        // The unknown cas can only ever write 2.
        let ops = [ops[0].clone(), ops[1].clone(), read(3, 10, 11, Some(3))];
        assert!(matches!(check(Model::Register, &ops, BUDGET), Verdict::NotLinearizable(_)));
    }

    fn kv(client: u64, input: Input, call: u64, ret: u64, output: Output) -> Operation {
        op(client, input, call, Some(ret), output)
    }

    #[test]
    fn kv_partitions_by_key_and_names_the_bad_key() {
        let s = |v: &str| v.to_string();
        let ops = [
            kv(0, Input::Append(s("a"), s("x")), 0, 1, Output::Ok),
            kv(1, Input::Put(s("b"), s("p")), 0, 1, Output::Ok),
            kv(0, Input::Append(s("a"), s("y")), 2, 3, Output::Ok),
            kv(1, Input::Get(s("b")), 2, 3, Output::Str(s("p"))),
            kv(2, Input::Get(s("c")), 2, 3, Output::Str(s(""))),
            // Lost append: "xy" was acknowledged in full before this get.
            kv(1, Input::Get(s("a")), 4, 5, Output::Str(s("y"))),
        ];
        let w = witness(check(Model::Kv, &ops, BUDGET));
        assert_eq!(w.partition.as_deref(), Some("a"));
        assert!(w.ops.iter().all(|o| matches!(&o.input, Input::Append(k, _) | Input::Get(k) if k == "a")));
        assert!(w.explanation.contains("\"xy\""), "{}", w.explanation);

        let fine = [ops[0].clone(), ops[2].clone(), kv(1, Input::Get(s("a")), 4, 5, Output::Str(s("xy")))];
        assert_eq!(check(Model::Kv, &fine, BUDGET), Verdict::Linearizable);
    }

    #[test]
    fn malformed_histories_are_unknown() {
        let ops = [op(0, Input::Get("k".into()), 0, Some(1), Output::Str(String::new()))];
        let Verdict::Unknown(why) = check(Model::Register, &ops, BUDGET) else {
            panic!("a kv operation must not pass as a register operation");
        };
        assert!(why.contains("does not fit the register model"), "{why}");
        let backwards = [write(0, 5, 4, 1)];
        assert!(matches!(check(Model::Register, &backwards, BUDGET), Verdict::Unknown(_)));
    }

    /// Many concurrent writes of distinct values followed by a read of a value
    /// nobody wrote: not linearizable, but the search has to visit every
    /// subset of the writes to find out.
    fn exponential_history() -> Vec<Operation> {
        let mut ops: Vec<Operation> = (0..40).map(|i| write(i, 0, 100, i as i64)).collect();
        ops.push(read(99, 101, 102, Some(-1)));
        ops
    }

    #[test]
    fn exhausted_time_budget_gives_unknown() {
        let Verdict::Unknown(why) = check(Model::Register, &exponential_history(), Duration::from_millis(50)) else {
            panic!("expected Unknown");
        };
        assert!(why.starts_with("time budget of 0.05s ran out"), "{why}");
        let Verdict::Unknown(why) = check(Model::Register, &[write(0, 0, 1, 1)], Duration::ZERO) else {
            panic!("expected Unknown");
        };
        assert!(why.starts_with("time budget of 0s ran out"), "{why}");

        // With partitions, the message says how far the check got.
        let mut ops: Vec<Operation> =
            (0..40).map(|i| kv(i, Input::Put("b".into(), i.to_string()), 0, 100, Output::Ok)).collect();
        ops.push(kv(99, Input::Get("b".into()), 101, 102, Output::Str("none".into())));
        ops.push(kv(0, Input::Put("a".into(), "1".into()), 0, 1, Output::Ok));
        let Verdict::Unknown(why) = check(Model::Kv, &ops, Duration::from_millis(50)) else {
            panic!("expected Unknown");
        };
        assert!(
            why.contains(
                "after partition 1 (which is linearizable), while checking partition 2 of 2 (key \"b\", 41 ops)"
            ),
            "{why}"
        );
    }

    #[test]
    fn memory_cap_gives_unknown() {
        let limits = Limits { budget: Duration::from_secs(60), max_cache_bytes: 1 << 20 };
        let Verdict::Unknown(why) = check_with_limits(Model::Register, &exponential_history(), &limits) else {
            panic!("expected Unknown");
        };
        assert!(why.contains("outgrew its cap of 1 MiB"), "{why}");
    }

    #[test]
    fn memory_cap_in_one_key_does_not_hide_a_violation_in_another() {
        let mut ops: Vec<Operation> =
            (0..40).map(|i| kv(i, Input::Put("a".into(), i.to_string()), 0, 100, Output::Ok)).collect();
        ops.push(kv(99, Input::Get("a".into()), 101, 102, Output::Str("none".into())));
        ops.push(kv(0, Input::Put("b".into(), "1".into()), 200, 201, Output::Ok));
        ops.push(kv(0, Input::Get("b".into()), 202, 203, Output::Str("2".into())));
        let limits = Limits { budget: Duration::from_secs(60), max_cache_bytes: 1 << 20 };
        let w = witness(check_with_limits(Model::Kv, &ops, &limits));
        assert_eq!(w.partition.as_deref(), Some("b"));
    }

    #[test]
    fn long_sequential_history_does_not_overflow_the_stack() {
        let ops: Vec<Operation> = (0..10_000u64).map(|i| write(0, 2 * i, 2 * i + 1, i as i64)).collect();
        assert_eq!(check(Model::Register, &ops, Duration::from_secs(60)), Verdict::Linearizable);
    }

    #[test]
    fn witness_stays_small() {
        // 30 sequential writes, then a read of a value nobody wrote.
        let mut ops: Vec<Operation> = (0..30).map(|i| write(i, 2 * i, 2 * i + 1, i as i64)).collect();
        ops.push(read(99, 100, 101, Some(-1)));
        let w = witness(check(Model::Register, &ops, BUDGET));
        // The last five writes of the prefix, then the read.
        assert_eq!(w.ops, ops[25..].to_vec());
        assert!(w.explanation.contains("at most 30 of its 31 operations"), "{}", w.explanation);
    }
}
