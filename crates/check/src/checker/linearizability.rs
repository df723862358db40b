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
//! first (the key-value model is checked per key): a history is linearizable
//! exactly when every partition is.
//!
//! The partitions are searched in turns of a few thousand steps each, so one
//! intractable partition cannot starve the others: the first partition found
//! not linearizable ends the check and is the answer, whatever state the
//! others are in.
//!
//! The search is iterative, so long histories cannot overflow the stack, and
//! it is bounded by a wall-clock budget and by an estimate of the memory of
//! every search together (arrays, model states, memo caches). Running out of
//! either yields [`Verdict::Unknown`] naming the undecided partitions, never a
//! guess.

use std::cell::RefCell;
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
    /// Search steps the failing partition took to reach its dead end.
    pub steps: u64,
    /// The other partitions still undecided when it was found, each
    /// described with the steps its search had taken, the most searched
    /// first: what shows the partitions took turns (an intractable one
    /// cannot have had many more steps than the one decided).
    pub undecided: Vec<(String, u64)>,
}

/// Resource bounds of a check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock time for the whole check, all partitions together,
    /// counted from `started`.
    pub budget: Duration,
    /// When the budget began: before parsing, for a command whose budget
    /// covers reading its input too.
    pub started: Instant,
    /// Approximate memory the check may use: the history as given
    /// (`history_bytes`) plus every partition's search (its arrays, model
    /// states and memo cache).
    pub max_bytes: usize,
    /// Estimated memory of the history the caller already holds.
    pub history_bytes: usize,
    /// Time at the end of the budget the search leaves to its caller (a
    /// command must still print and exit, and the exit frees the memory the
    /// search held, which takes tens of milliseconds near the cap).
    pub reserve: Duration,
}

impl Limits {
    /// 1 GiB: enough for millions of explored configurations of histories
    /// with a few hundred operations per partition.
    pub const DEFAULT_MAX_BYTES: usize = 1 << 30;

    /// The given time budget, starting now, and the default memory cap.
    pub fn with_budget(budget: Duration) -> Self {
        Limits {
            budget,
            started: Instant::now(),
            max_bytes: Self::DEFAULT_MAX_BYTES,
            history_bytes: 0,
            reserve: Duration::ZERO,
        }
    }
}

/// Checks whether `ops` is linearizable with respect to `model`, within the
/// time `budget` and the default memory cap.
///
/// Failed operations (Jepsen `:fail`, which definitely did not take effect)
/// must already have been removed by the caller. A compare-and-set that was
/// refused because the value did not match is not failed in that sense: it
/// observed the register, and is passed as [`Output::CasOk`]`(false)`.
#[cfg(test)]
pub fn check(model: Model, ops: &[Operation], budget: Duration) -> Verdict {
    check_with_limits(model, ops, &Limits::with_budget(budget))
}

/// [`check`] with explicit resource bounds.
pub fn check_with_limits(model: Model, ops: &[Operation], limits: &Limits) -> Verdict {
    check_partitions(model, ops, limits).verdict
}

/// A check's verdict and, of a Kv check left unknown, the keys it did not
/// decide: every other key was found linearizable.
pub struct Checked {
    pub verdict: Verdict,
    pub undecided: Vec<String>,
}

/// [`check_with_limits`], naming the keys a Kv check left undecided, so a
/// check that gave up on one hot key still counts the others it judged.
pub fn check_partitions(model: Model, ops: &[Operation], limits: &Limits) -> Checked {
    let deadline = limits.started.checked_add(limits.budget.saturating_sub(limits.reserve));
    let checker = Checker { ops, limits, deadline, undecided: RefCell::new(Vec::new()) };
    let result = match model {
        Model::Register => prepare_register(ops).map(|part| checker.run(vec![(None, part)], None)),
        Model::Kv => prepare_kv(ops).map(|parts| {
            let parts = parts.into_iter().map(|(k, p)| (Some(k.to_string()), p)).collect();
            checker.run(parts, String::new())
        }),
    };
    let verdict = result.unwrap_or_else(Verdict::Unknown);
    let undecided = match verdict {
        Verdict::Unknown(_) => checker.undecided.into_inner(),
        _ => Vec::new(),
    };
    Checked { verdict, undecided }
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
    /// `Send + 'static` so a finished search can be freed on another thread.
    type State: Clone + Eq + Hash + Send + 'static;
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
/// Values are borrowed from the history, so partitioning copies no strings.
enum KvOp<'h> {
    Get(&'h str),
    Put(&'h str),
    Append(&'h str),
}

impl Step for KvOp<'_> {
    type State = String;

    fn step(&self, state: &String) -> Transition<String> {
        match self {
            KvOp::Get(seen) if *seen == state => Transition::Same,
            KvOp::Get(_) => Transition::Illegal,
            KvOp::Put(v) => Transition::To(v.to_string()),
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
fn prepare_kv(ops: &[Operation]) -> Result<BTreeMap<&str, Vec<Prepared<KvOp<'_>>>>, String> {
    let mut parts: BTreeMap<&str, Vec<Prepared<KvOp>>> = BTreeMap::new();
    for (i, o) in ops.iter().enumerate() {
        let (key, op) = match (&o.input, &o.output) {
            (Input::Get(k), _) if o.is_indeterminate() => (k, None),
            (Input::Get(k), Output::Str(v)) => (k, Some(KvOp::Get(v.as_str()))),
            (Input::Put(k, v), Output::Ok | Output::Unknown) => (k, Some(KvOp::Put(v.as_str()))),
            (Input::Append(k, v), Output::Ok | Output::Unknown) => (k, Some(KvOp::Append(v.as_str()))),
            _ => return Err(misfit("kv", i, o)),
        };
        if let Some(p) = prepared(i, o, op)? {
            parts.entry(key.as_str()).or_default().push(p);
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

/// How a partition's search ended, or why it stopped.
enum Outcome {
    Linearizable,
    Violation(Frontier),
    OutOfTime,
    /// The search would have grown past the bytes it was allowed.
    OutOfMemory,
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

/// The Wing–Gong/Lowe search with Porcupine's memo cache over one partition,
/// resumable so that partitions can take turns: [`Search::advance`] runs a
/// bounded number of steps and keeps its place.
struct Search<'p, T: Step> {
    ops: &'p [Prepared<T>],
    // Doubly linked list over nodes 1..=2n (node 0 is the head sentinel).
    // Lifting a call unlinks it and its return; because lifts are undone in
    // LIFO order, the unlinked nodes' own links stay valid for relinking.
    next: Vec<usize>,
    prev: Vec<usize>,
    op_of: Vec<usize>,
    is_return: Vec<bool>,
    return_node: Vec<usize>,
    // Model states are interned so the cache stores a small id per entry.
    states: Vec<T::State>,
    state_ids: HashMap<T::State, u64, FastBuild>,
    state: u64,
    // The key of a configuration: the bitset of linearized operations with
    // the state id appended as one more word. Keeping both in one slice lets
    // the cache be probed with a borrowed `&[u64]`, without allocating.
    words: usize,
    key: Vec<u64>,
    cache: HashSet<Box<[u64]>, FastBuild>,
    /// Rough cost of one cache entry: the key allocation with allocator
    /// overhead, the boxed pointer in the table, control bytes and slack.
    entry_bytes: usize,
    /// Estimated bytes this search holds: its arrays, states and cache.
    bytes: usize,
    /// Stack of (lifted call node, state before it).
    calls: Vec<(usize, u64)>,
    frontier: Option<Frontier>,
    node: usize,
    /// Steps between looks at the clock: fewer when a step is expensive
    /// (each new cache entry copies a bitset of `words` words).
    clock_every: u64,
    /// Steps taken so far, over all turns.
    steps: u64,
}

impl<'p, T: Step> Search<'p, T> {
    /// What [`Search::new`] will hold for `n` operations, before any cache
    /// entry; known before allocating so a huge partition can be refused.
    fn setup_bytes(n: usize) -> usize {
        let nodes = 2 * n + 1;
        // next, prev, op_of, is_return, return_node, the sort buffer (freed
        // after setup, but held at the same time), the prepared operations.
        nodes * (3 * size_of::<usize>() + 1) + n * size_of::<usize>() + 2 * n * 32 + n * size_of::<Prepared<T>>()
    }

    fn new(ops: &'p [Prepared<T>], init: T::State) -> Self {
        let n = ops.len();
        // Entries sorted by time; at equal times calls come first, so
        // operations that touch at one instant count as concurrent. Unknown
        // returns sort after everything.
        let mut entries: Vec<(u128, bool, usize)> = Vec::with_capacity(2 * n);
        for (i, p) in ops.iter().enumerate() {
            entries.push((u128::from(p.call), false, i));
            entries.push((p.ret.map_or(u128::MAX, u128::from), true, i));
        }
        entries.sort_unstable();

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
        drop(entries);

        let words = n.div_ceil(64);
        let mut state_ids: HashMap<T::State, u64, FastBuild> = HashMap::default();
        state_ids.insert(init.clone(), 0);
        let node = next[HEAD];
        Search {
            ops,
            next,
            prev,
            op_of,
            is_return,
            return_node,
            states: vec![init],
            state_ids,
            state: 0,
            words,
            key: vec![0u64; words + 1],
            cache: HashSet::default(),
            entry_bytes: (words + 1) * 8 + 16 + size_of::<Box<[u64]>>() + 8,
            bytes: Self::setup_bytes(n),
            calls: Vec::new(),
            frontier: None,
            node,
            clock_every: (1024 / words.max(1) as u64).max(1),
            steps: 0,
        }
    }

    fn lift(&mut self, call: usize) {
        let (next, prev) = (&mut self.next, &mut self.prev);
        let ret = self.return_node[self.op_of[call]];
        next[prev[call]] = next[call];
        prev[next[call]] = prev[call];
        next[prev[ret]] = next[ret];
        if next[ret] != NIL {
            prev[next[ret]] = prev[ret];
        }
    }

    fn unlift(&mut self, call: usize) {
        let (next, prev) = (&mut self.next, &mut self.prev);
        let ret = self.return_node[self.op_of[call]];
        next[prev[ret]] = ret;
        if next[ret] != NIL {
            prev[next[ret]] = ret;
        }
        next[prev[call]] = call;
        prev[next[call]] = call;
    }

    /// Runs at most `steps` steps; `None` if the search is not finished.
    /// Stops with [`Outcome::OutOfTime`] at `deadline` and with
    /// [`Outcome::OutOfMemory`] rather than grow past `max_bytes`.
    fn advance(&mut self, steps: u64, deadline: Option<Instant>, max_bytes: usize) -> Option<Outcome> {
        for step in 0..steps {
            if self.next[HEAD] == NIL {
                return Some(Outcome::Linearizable);
            }
            if step % self.clock_every == 0 && deadline.is_some_and(|d| Instant::now() >= d) {
                return Some(Outcome::OutOfTime);
            }
            self.steps += 1;
            let node = self.node;
            let op = self.op_of[node];

            if !self.is_return[node] {
                let new_state = match self.ops[op].op.step(&self.states[self.state as usize]) {
                    Transition::Illegal => None,
                    Transition::Same => Some(self.state),
                    Transition::To(s) => Some(match self.state_ids.get(&s) {
                        Some(&id) => id,
                        None => {
                            let id = self.states.len() as u64;
                            self.bytes += size_of::<T::State>() * 2 + T::heap_bytes(&s) * 2 + 16;
                            self.state_ids.insert(s.clone(), id);
                            self.states.push(s);
                            id
                        }
                    }),
                };
                if let Some(new_state) = new_state {
                    self.key[op / 64] |= 1 << (op % 64);
                    self.key[self.words] = new_state;
                    if self.cache.contains(&self.key[..]) {
                        self.key[op / 64] &= !(1 << (op % 64));
                    } else {
                        if self.bytes + self.entry_bytes > max_bytes {
                            return Some(Outcome::OutOfMemory);
                        }
                        // Growing the cache moves every entry at once (a
                        // tenth of a second at millions): one that cannot
                        // end within the budget is not begun.
                        if self.cache.len() == self.cache.capacity() {
                            let rehash = REHASH_PER_ENTRY * self.cache.len() as u32;
                            if deadline.is_some_and(|d| Instant::now() + rehash >= d) {
                                return Some(Outcome::OutOfTime);
                            }
                        }
                        self.cache.insert(self.key.clone().into_boxed_slice());
                        self.bytes += self.entry_bytes;
                        self.calls.push((node, self.state));
                        self.state = new_state;
                        self.lift(node);
                        self.node = self.next[HEAD];
                        continue;
                    }
                }
                self.node = self.next[node];
            } else {
                // The return of an operation that has not been linearized:
                // every call before it was tried here and led nowhere, so
                // backtrack.
                if self.frontier.as_ref().is_none_or(|f| self.calls.len() > f.prefix.len()) {
                    self.record_frontier(node, op);
                }
                let Some((call, before)) = self.calls.pop() else {
                    // Nothing left to undo: no linearization exists.
                    let frontier = self.frontier.take().expect("recorded just above at the latest");
                    return Some(Outcome::Violation(frontier));
                };
                self.state = before;
                let undone = self.op_of[call];
                self.key[undone / 64] &= !(1 << (undone % 64));
                self.unlift(call);
                self.node = self.next[call];
            }
        }
        (self.next[HEAD] == NIL).then_some(Outcome::Linearizable)
    }

    fn record_frontier(&mut self, node: usize, blocked: usize) {
        let mut pending = Vec::new();
        let mut cursor = self.next[HEAD];
        while cursor != node {
            if !self.is_return[cursor] {
                pending.push(self.op_of[cursor]);
            }
            cursor = self.next[cursor];
        }
        let old = self.frontier.as_ref().map_or(0, |f| (f.prefix.len() + f.pending.len()) * 8 + f.state.len());
        let frontier = Frontier {
            prefix: self.calls.iter().map(|&(call, _)| self.op_of[call]).collect(),
            blocked,
            pending,
            state: T::describe(&self.states[self.state as usize]),
        };
        self.bytes = self.bytes - old + (frontier.prefix.len() + frontier.pending.len()) * 8 + frontier.state.len();
        self.frontier = Some(frontier);
    }
}

/// Frees searches on a thread of their own: a search that explored
/// millions of configurations holds millions of small allocations, and
/// freeing them takes a good part of a second the verdict need not wait for.
fn release<'p, T: Step + 'p>(searches: impl IntoIterator<Item = Search<'p, T>>) {
    let heavy: Vec<_> = searches.into_iter().map(|s| (s.cache, s.states, s.state_ids)).collect();
    if heavy.iter().map(|(cache, states, _)| cache.len() + states.len()).sum::<usize>() < 100_000 {
        return;
    }
    // If no thread can be started, the closure (and with it the searches)
    // is dropped here instead.
    let _ = std::thread::Builder::new().name("checker-free".into()).spawn(move || drop(heavy));
}

/// What growing the search cache costs per entry it holds, a generous
/// bound of what rehashing measured on this project's machines.
const REHASH_PER_ENTRY: Duration = Duration::from_nanos(120);

/// Steps a partition's search runs before the next partition's turn: small
/// enough that every partition gets a turn within milliseconds, large enough
/// that switching costs nothing measurable.
const SLICE: u64 = 4096;

/// One partition of a history and its search, once started.
struct Partition<'p, T: Step> {
    key: Option<String>,
    ops: &'p [Prepared<T>],
    search: Option<Search<'p, T>>,
}

impl<T: Step> Partition<'_, T> {
    fn describe(&self) -> String {
        match &self.key {
            Some(k) => format!("key {k:?} ({} ops)", self.ops.len()),
            None => format!("{} ops", self.ops.len()),
        }
    }

    fn bytes(&self) -> usize {
        self.search.as_ref().map_or(0, |s| s.bytes)
    }

    fn steps(&self) -> u64 {
        self.search.as_ref().map_or(0, |s| s.steps)
    }
}

/// Runs the search over every partition of one history, taking turns.
struct Checker<'a> {
    ops: &'a [Operation],
    limits: &'a Limits,
    deadline: Option<Instant>,
    /// The keys of the partitions given up (out of memory) or left live
    /// when time ran out.
    undecided: RefCell<Vec<String>>,
}

impl Checker<'_> {
    /// The partitions take turns of [`SLICE`] steps, so one intractable
    /// partition cannot keep the others from being decided: the first
    /// violation found anywhere ends the check, and the history is
    /// linearizable only when every partition is. Memory is shared: when the
    /// searches together would pass the cap, the largest one is given up
    /// (its partition is undecided) so that the others can go on.
    fn run<T: Step>(&self, parts: Vec<(Option<String>, Vec<Prepared<T>>)>, init: T::State) -> Verdict {
        let total = parts.len();
        let mut live: Vec<Partition<'_, T>> =
            parts.iter().map(|(key, ops)| Partition { key: key.clone(), ops, search: None }).collect();
        // Each partition given up for memory: its key and a description.
        let mut out_of_memory: Vec<(Option<String>, String)> = Vec::new();
        let max_bytes = self.limits.max_bytes.saturating_sub(self.limits.history_bytes);
        // Bytes the live searches hold together.
        let mut held = 0usize;

        while !live.is_empty() {
            let mut i = 0;
            while i < live.len() {
                if self.deadline.is_some_and(|d| Instant::now() >= d) {
                    return self.stop(self.undecided(total, &live, &out_of_memory, true), live);
                }
                let before = live[i].bytes();
                let allowed = max_bytes.saturating_sub(held - before);
                let p = &mut live[i];
                let outcome = if p.ops.is_empty() {
                    Some(Outcome::Linearizable)
                } else if p.search.is_none() && Search::<T>::setup_bytes(p.ops.len()) > allowed {
                    Some(Outcome::OutOfMemory)
                } else {
                    let search = p.search.get_or_insert_with(|| Search::new(p.ops, init.clone()));
                    search.advance(SLICE, self.deadline, allowed)
                };
                held = held + live[i].bytes() - before;
                match outcome {
                    None => i += 1,
                    Some(Outcome::Linearizable) => {
                        let p = live.swap_remove(i);
                        held -= p.bytes();
                        release(p.search);
                    }
                    Some(Outcome::Violation(frontier)) => {
                        let p = &live[i];
                        let mut witness = self.witness(p.key.clone(), p.ops, frontier);
                        witness.steps = p.steps();
                        witness.undecided = live
                            .iter()
                            .enumerate()
                            .filter(|&(j, _)| j != i)
                            .map(|(_, other)| (other.describe(), other.steps()))
                            .collect();
                        // The most searched first: the one that shows the turns.
                        witness.undecided.sort_by_key(|(_, steps)| std::cmp::Reverse(*steps));
                        return self.stop(Verdict::NotLinearizable(witness), live);
                    }
                    Some(Outcome::OutOfTime) => {
                        return self.stop(self.undecided(total, &live, &out_of_memory, true), live)
                    }
                    Some(Outcome::OutOfMemory) => {
                        // Give up the partition holding the most, which frees
                        // the most for the others; one whose set-up alone
                        // exceeds the cap goes itself, sparing the others.
                        let hopeless =
                            live[i].search.is_none() && Search::<T>::setup_bytes(live[i].ops.len()) > max_bytes;
                        let largest = match hopeless {
                            true => i,
                            false => (0..live.len()).max_by_key(|&j| (live[j].bytes(), j == i)).unwrap_or(i),
                        };
                        let p = live.swap_remove(largest);
                        held -= p.bytes();
                        out_of_memory
                            .push((p.key.clone(), format!("{} after about {} MiB", p.describe(), p.bytes() >> 20)));
                        release(p.search);
                        if largest != i {
                            i += 1;
                        }
                    }
                }
            }
        }
        if out_of_memory.is_empty() {
            Verdict::Linearizable
        } else {
            self.undecided(total, &live, &out_of_memory, false)
        }
    }

    /// Ends the check early with `verdict`, freeing the searches still live.
    fn stop<T: Step>(&self, verdict: Verdict, live: Vec<Partition<'_, T>>) -> Verdict {
        release(live.into_iter().filter_map(|p| p.search));
        verdict
    }

    /// Unknown, naming each partition left undecided and why.
    fn undecided<T: Step>(
        &self,
        total: usize,
        live: &[Partition<'_, T>],
        out_of_memory: &[(Option<String>, String)],
        out_of_time: bool,
    ) -> Verdict {
        let live_keys = live.iter().filter(|_| out_of_time).filter_map(|p| p.key.clone());
        *self.undecided.borrow_mut() = out_of_memory.iter().filter_map(|(k, _)| k.clone()).chain(live_keys).collect();
        const MAX_NAMED: usize = 5;
        let name = |names: Vec<String>| {
            let more = names.len().saturating_sub(MAX_NAMED);
            let mut text = names.into_iter().take(MAX_NAMED).collect::<Vec<_>>().join(", ");
            if more > 0 {
                text.push_str(&format!(" and {more} more"));
            }
            text
        };
        let mut reasons = Vec::new();
        if out_of_time {
            let budget = self.limits.budget.as_secs_f64();
            reasons.push(format!(
                "time budget of {budget}s ran out before deciding {}",
                name(live.iter().map(Partition::describe).collect())
            ));
        }
        if !out_of_memory.is_empty() {
            reasons.push(format!(
                "memory cap of {} MiB reached: gave up {}",
                self.limits.max_bytes >> 20,
                name(out_of_memory.iter().map(|(_, d)| d.clone()).collect())
            ));
        }
        let undecided = out_of_memory.len() + if out_of_time { live.len() } else { 0 };
        let decided = total - undecided;
        let rest = match (total, decided) {
            (1, _) => String::new(),
            (_, 0) => format!(" ({undecided} of {total} partitions undecided)"),
            _ => format!(" ({undecided} of {total} partitions undecided; the other {decided} are linearizable)"),
        };
        Verdict::Unknown(format!("{}{rest}", reasons.join("; ")))
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
        Witness { partition, ops, explanation, steps: 0, undecided: Vec::new() }
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

        // With partitions, the message says how far the check got. Key "a"
        // is decided in its first turn; the budget is long enough that a
        // busy machine cannot use it all up before that turn, and the
        // exponential key "b" is still undecided at its end.
        let mut ops: Vec<Operation> =
            (0..40).map(|i| kv(i, Input::Put("b".into(), i.to_string()), 0, 100, Output::Ok)).collect();
        ops.push(kv(99, Input::Get("b".into()), 101, 102, Output::Str("none".into())));
        ops.push(kv(0, Input::Put("a".into(), "1".into()), 0, 1, Output::Ok));
        let Verdict::Unknown(why) = check(Model::Kv, &ops, Duration::from_secs(1)) else {
            panic!("expected Unknown");
        };
        assert_eq!(
            why,
            "time budget of 1s ran out before deciding key \"b\" (41 ops) \
             (1 of 2 partitions undecided; the other 1 are linearizable)"
        );
    }

    fn generated(shape: &crate::history::partitioned_kv::Shape) -> Vec<Operation> {
        let text = crate::history::partitioned_kv::generate(shape).unwrap();
        crate::checker::jepsen_edn::parse(&text, Model::Kv).unwrap()
    }

    fn fifty_clients(hard: u64, violations: Vec<u64>) -> crate::history::partitioned_kv::Shape {
        crate::history::partitioned_kv::Shape { clients: 50, keys: 20, ops_per_client: 40, hard, violations, seed: 1 }
    }

    /// The shape that used to stall the check: key "hard" sorts before the
    /// keys `k…`, so a one-partition-after-another search ground on it for
    /// the whole budget and never reached the violation. Taking turns, the
    /// hard key has had at most one turn more than k7 when k7's dead end is
    /// found: counted in the steps the search records, not timed (a busy
    /// machine changes how long a step takes, never how many there are).
    #[test]
    fn an_intractable_key_does_not_hide_a_violation_in_another() {
        let ops = generated(&fifty_clients(24, vec![7]));
        let w = witness(check(Model::Kv, &ops, Duration::from_secs(30)));
        assert_eq!(w.partition.as_deref(), Some("k7"));
        let hard = w.undecided.iter().find(|(p, _)| p.starts_with("key \"hard\"")).expect("hard is undecided");
        assert!(hard.1 > 0 && hard.1 < w.steps + SLICE, "k7 after {} steps, {hard:?}", w.steps);
    }

    /// Alone with the intractable key, the budget ends the check. How soon
    /// after the budget is the machine's business (a thread that is not
    /// scheduled cannot stop on time); the bound only catches a budget
    /// that is not looked at.
    #[test]
    fn an_intractable_key_alone_is_unknown_within_the_budget() {
        let ops = generated(&fifty_clients(24, vec![]));
        let budget = Duration::from_millis(800);
        let started = Instant::now();
        let Verdict::Unknown(why) = check(Model::Kv, &ops, budget) else {
            panic!("expected Unknown");
        };
        let took = started.elapsed();
        assert!(took < budget + Duration::from_secs(30), "took {took:?}");
        // How many easy partitions were decided by then is the machine's
        // business too; that the hard key is the one named is the check's.
        assert!(why.starts_with("time budget of 0.8s ran out before deciding key \"hard\" (25 ops) ("), "{why}");
        assert!(why.contains(" of 21 partitions undecided"), "{why}");
        // Within a memory cap instead, the hard key is given up and named.
        let limits = Limits { max_bytes: 64 << 20, ..Limits::with_budget(Duration::from_secs(60)) };
        let Verdict::Unknown(why) = check_with_limits(Model::Kv, &ops, &limits) else {
            panic!("expected Unknown");
        };
        assert!(why.starts_with("memory cap of 64 MiB reached: gave up key \"hard\" (25 ops)"), "{why}");
        // The keys left undecided are named, so a caller counts what the
        // others judged.
        let checked = check_partitions(Model::Kv, &ops, &limits);
        assert!(matches!(checked.verdict, Verdict::Unknown(_)));
        assert_eq!(checked.undecided, ["hard"]);
        assert!(check_partitions(Model::Kv, &generated(&fifty_clients(0, vec![])), &limits).undecided.is_empty());
    }

    #[test]
    fn the_memory_cap_counts_the_history_the_caller_holds() {
        let ops = generated(&fifty_clients(0, vec![]));
        assert_eq!(check(Model::Kv, &ops, BUDGET), Verdict::Linearizable);
        let limits = Limits { max_bytes: 1 << 20, history_bytes: 1 << 20, ..Limits::with_budget(BUDGET) };
        assert!(matches!(check_with_limits(Model::Kv, &ops, &limits), Verdict::Unknown(_)));
    }

    #[test]
    fn memory_cap_gives_unknown() {
        let limits = Limits { max_bytes: 1 << 20, ..Limits::with_budget(Duration::from_secs(60)) };
        let Verdict::Unknown(why) = check_with_limits(Model::Register, &exponential_history(), &limits) else {
            panic!("expected Unknown");
        };
        assert!(why.starts_with("memory cap of 1 MiB reached: gave up 41 ops after about 0 MiB"), "{why}");
    }

    #[test]
    fn memory_cap_in_one_key_does_not_hide_a_violation_in_another() {
        let mut ops: Vec<Operation> =
            (0..40).map(|i| kv(i, Input::Put("a".into(), i.to_string()), 0, 100, Output::Ok)).collect();
        ops.push(kv(99, Input::Get("a".into()), 101, 102, Output::Str("none".into())));
        ops.push(kv(0, Input::Put("b".into(), "1".into()), 200, 201, Output::Ok));
        ops.push(kv(0, Input::Get("b".into()), 202, 203, Output::Str("2".into())));
        let limits = Limits { max_bytes: 1 << 20, ..Limits::with_budget(Duration::from_secs(60)) };
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
