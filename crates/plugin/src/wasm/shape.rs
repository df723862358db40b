//! Workload shape plugins (world `workload`): the host asks a cell's shape
//! instance for ops in batches, one worker (connection) at a time, and —
//! when the shape asks for it — tells it which ops completed. A connection's
//! [`Feed`] is the workload's [`OpSource`] for it.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::sandbox::{PluginError, Sandbox};
use super::{Limits, Plugin, PluginHost};
use faultline_kind::workload::{Op, OpSource};
use faultline_model::ops::OpKind;

mod bindings {
    wasmtime::component::bindgen!({ path: "../../plugins/wit", world: "workload" });
}

use bindings::exports::faultline::plugin::shape as wit;

pub use crate::interface::{Setup, SHAPE_DEADLINE as DEFAULT_DEADLINE};

/// `init` may take longer than a batch: shapes build their tables there.
const INIT_DEADLINE: Duration = Duration::from_secs(1);

/// Ops per `next-ops` call for shapes that do not observe outcomes: large
/// enough that the call's fixed cost vanishes per op.
const BATCH: u32 = 128;

/// One cell's instance of a shape plugin, shared by the cell's connections.
pub struct Shape {
    sandbox: Sandbox,
    bindings: bindings::Workload,
    setup: Arc<Setup>,
    observes: bool,
}

impl Shape {
    pub fn start(
        host: &PluginHost,
        plugin: &Plugin,
        limits: Limits,
        config: &serde_json::Value,
        seed: u64,
        setup: Setup,
    ) -> Result<Shape, PluginError> {
        let mut sandbox = Sandbox::new(host, plugin, limits, seed);
        let instantiate = Sandbox::linker(host, plugin)
            .map_err(|e| sandbox.error("instantiate", format!("{e:#}")))
            .and_then(|linker| {
                sandbox.call("instantiate", INIT_DEADLINE, |store| {
                    bindings::Workload::instantiate(store, &plugin.component, &linker)
                })
            });
        let bindings = instantiate?;
        let wit_setup = wit::Setup {
            ops: setup.kinds.iter().map(|(k, w)| (k.as_str().to_string(), *w)).collect(),
            key_count: setup.key_count,
            value_size_min: setup.value_size.0,
            value_size_max: setup.value_size.1,
            workers: setup.workers,
        };
        let config = if config.is_null() { "{}".to_string() } else { config.to_string() };
        let shape = bindings.faultline_plugin_shape();
        let info = sandbox.call("init", INIT_DEADLINE.max(limits.deadline), |store| {
            shape.call_init(store, &config, seed, &wit_setup)
        })?;
        let info = info.map_err(|reason| sandbox.reject("init", format!("refused its config: {reason}")))?;
        Ok(Shape { sandbox, bindings, setup: Arc::new(setup), observes: info.observe })
    }

    pub fn observes(&self) -> bool {
        self.observes
    }

    /// The error that stopped the instance, if one did.
    pub fn stopped(&self) -> Option<&PluginError> {
        self.sandbox.stopped.as_ref()
    }

    /// Hands over what completed, then asks for up to `n` ops for `worker`.
    fn next_batch(
        &mut self,
        worker: u32,
        n: u32,
        completed: &mut Vec<wit::Completed>,
    ) -> Result<wit::Batch, PluginError> {
        let deadline = self.sandbox.limits.deadline;
        let shape = self.bindings.faultline_plugin_shape();
        if !completed.is_empty() {
            self.sandbox.call("observe", deadline, |store| shape.call_observe(store, completed))?;
            completed.clear();
        }
        self.sandbox.call("next-ops", deadline, |store| shape.call_next_ops(store, worker, n))
    }
}

/// Checks a batch against what the spec declared and appends its ops.
fn unpack(setup: &Setup, batch: wit::Batch, n: u32, out: &mut VecDeque<Op>) -> Result<(), String> {
    let len = batch.kinds.len();
    if batch.keys.len() != len || batch.value_sizes.len() != len {
        return Err(format!(
            "returned a batch whose columns differ in length: {len} kinds, {} keys, {} value-sizes",
            batch.keys.len(),
            batch.value_sizes.len()
        ));
    }
    if len > n as usize {
        return Err(format!("returned {len} ops when asked for {n}"));
    }
    // Whole columns first, in loops the compiler vectorizes; the message
    // names the first bad op.
    let malformed = |i: usize, why: String| format!("returned a malformed op #{i}: {why}");
    if let Some(i) = batch.kinds.iter().position(|k| *k as usize >= setup.kinds.len()) {
        let declared: Vec<String> =
            setup.kinds.iter().enumerate().map(|(i, (k, _))| format!("{i} {}", k.as_str())).collect();
        let why = format!("kind {} is not one of the workload's op kinds ({})", batch.kinds[i], declared.join(", "));
        return Err(malformed(i, why));
    }
    if let Some(i) = batch.keys.iter().position(|k| *k >= setup.key_count) {
        return Err(malformed(i, format!("key {} is outside the key space 0..{}", batch.keys[i], setup.key_count)));
    }
    let max = setup.value_size.1;
    if let Some(i) = batch.value_sizes.iter().position(|v| *v > max) {
        let why = format!("value-size {} is above the workload's value_size {max}B", batch.value_sizes[i]);
        return Err(malformed(i, why));
    }
    out.reserve(len);
    let mut args = batch.args.into_iter().peekable();
    for i in 0..len {
        let kind = setup.kinds[batch.kinds[i] as usize].0;
        let value = match args.next_if(|(at, _)| *at as usize == i) {
            None => None,
            Some((_, args)) => value_of(setup, kind, args).map_err(|why| malformed(i, why))?,
        };
        let value_len = value.as_ref().map_or(batch.value_sizes[i], |v: &Arc<str>| v.len() as u32);
        out.push_back(Op { kind, key: batch.keys[i], value_len, write_id: None, value, message: None });
    }
    match args.next() {
        Some((at, _)) => Err(format!("returned args for op #{at}, which is out of order or not in the batch of {len}")),
        None => Ok(()),
    }
}

/// The value an op's args give: `set` may carry the exact value to write.
fn value_of(s: &Setup, kind: OpKind, args: Vec<String>) -> Result<Option<Arc<str>>, String> {
    match (kind, args.len()) {
        (_, 0) => Ok(None),
        (OpKind::Set, 1) if s.recording => {
            Err("`set` carries its own value, but the spec's checkers need values that name their write".into())
        }
        (OpKind::Set, 1) => Ok(Some(Arc::from(args.into_iter().next().expect("one arg")))),
        (OpKind::Set, n) => Err(format!("`set` takes at most one argument (the value), got {n}")),
        (k, n) => Err(format!("`{}` takes no arguments, got {n}", k.as_str())),
    }
}

/// One connection's view of a cell's shape: the ops it was handed and not
/// yet sent, and the outcomes it has not yet reported.
pub struct Feed {
    shape: Arc<Mutex<Shape>>,
    setup: Arc<Setup>,
    worker: u32,
    batch: u32,
    ready: VecDeque<Op>,
    completed: Vec<wit::Completed>,
    observes: bool,
    /// The shape has nothing more for this worker, or it failed.
    done: bool,
}

impl Feed {
    /// `in_flight` bounds how far ahead of the outcomes an observing shape is asked.
    pub fn new(shape: &Arc<Mutex<Shape>>, worker: u32, in_flight: u32) -> Feed {
        let (observes, setup) = {
            let shape = shape.lock().expect("shape lock");
            (shape.observes(), Arc::clone(&shape.setup))
        };
        Feed {
            shape: Arc::clone(shape),
            setup,
            worker,
            batch: if observes { in_flight.max(1) } else { BATCH },
            ready: VecDeque::new(),
            completed: Vec::new(),
            observes,
            done: false,
        }
    }

    fn refill(&mut self, mut shape: MutexGuard<'_, Shape>) {
        if self.done {
            return;
        }
        // The lock is held for the plugin call only: the checks run while
        // other connections use the shape.
        let batch = shape.next_batch(self.worker, self.batch, &mut self.completed);
        drop(shape);
        let Ok(batch) = batch else {
            self.done = true;
            return;
        };
        let before = self.ready.len();
        match unpack(&self.setup, batch, self.batch, &mut self.ready) {
            Ok(()) => self.done = self.ready.len() == before,
            Err(why) => {
                self.ready.truncate(before);
                self.shape.lock().expect("shape lock").sandbox.reject("next-ops", why);
                self.done = true;
            }
        }
    }
}

impl OpSource for Feed {
    fn observes(&self) -> bool {
        self.observes
    }

    /// The next op, or `None` once the shape has no more for this worker
    /// or has failed (the cell then reads the error from the shape).
    fn next_op(&mut self) -> Option<Op> {
        if self.ready.is_empty() {
            let shape = Arc::clone(&self.shape);
            let locked = shape.lock().expect("shape lock");
            self.refill(locked);
        }
        self.ready.pop_front()
    }

    /// Asks for another batch when fewer than `need` ops are queued, while
    /// the connection waits for replies, so the plugin call does not sit
    /// between a reply and the next request. A shape that observes is asked only when its queue is
    /// empty, after the outcomes: its next ops depend on them. Another
    /// connection using the shape is not waited for (this runs on the
    /// runtime's threads): the queue is topped up next time, or by `next_op`.
    fn prepare(&mut self, need: usize) {
        if !self.observes && self.ready.len() < need {
            let shape = Arc::clone(&self.shape);
            let locked = shape.try_lock().ok();
            if let Some(locked) = locked {
                self.refill(locked);
            }
        }
    }

    fn completed(&mut self, op: &Op, ok: bool) {
        let args = op.value.as_ref().map(|v| vec![v.to_string()]).unwrap_or_default();
        let kind =
            self.setup.kinds.iter().position(|(k, _)| *k == op.kind).expect("ops come from the declared kinds") as u8;
        let op = wit::Op { kind, key: op.key, value_size: op.value_len, args };
        self.completed.push(wit::Completed { worker: self.worker, op, ok });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> Setup {
        Setup {
            kinds: vec![(OpKind::Get, 1.0), (OpKind::Set, 1.0)],
            key_count: 100,
            value_size: (8, 64),
            workers: 1,
            recording: false,
        }
    }

    fn batch(kinds: &[u8], args: Vec<(u32, Vec<String>)>) -> wit::Batch {
        let n = kinds.len();
        wit::Batch { kinds: kinds.to_vec(), keys: (0..n as u64).collect(), value_sizes: vec![16; n], args }
    }

    fn unpacked(b: wit::Batch, n: u32) -> Result<Vec<Op>, String> {
        let mut out = VecDeque::new();
        unpack(&setup(), b, n, &mut out).map(|()| out.into())
    }

    #[test]
    fn a_batch_unpacks_in_order_with_its_args() {
        let ops = unpacked(batch(&[0, 1, 1], vec![(2, vec!["grant:1".into()])]), 3).unwrap();
        let seen: Vec<_> = ops.iter().map(|o| (o.kind, o.key, o.value_len, o.value.as_deref())).collect();
        assert_eq!(
            seen,
            vec![(OpKind::Get, 0, 16, None), (OpKind::Set, 1, 16, None), (OpKind::Set, 2, 7, Some("grant:1"))]
        );
    }

    #[test]
    fn malformed_batches_are_named() {
        let mut ragged = batch(&[0, 0], vec![]);
        ragged.keys.pop();
        let cases = [
            (ragged, 2, "columns differ in length: 2 kinds, 1 keys, 2 value-sizes"),
            (batch(&[0, 0, 0], vec![]), 2, "returned 3 ops when asked for 2"),
            (batch(&[0, 7], vec![]), 2, "malformed op #1: kind 7 is not one of the workload's op kinds (0 get, 1 set)"),
            (
                batch(&[1, 1], vec![(1, vec!["a".into()]), (0, vec!["b".into()])]),
                2,
                "args for op #0, which is out of order",
            ),
            (
                batch(&[1], vec![(5, vec!["a".into()])]),
                1,
                "args for op #5, which is out of order or not in the batch of 1",
            ),
            (batch(&[0], vec![(0, vec!["a".into()])]), 1, "`get` takes no arguments, got 1"),
        ];
        for (b, n, want) in cases {
            let err = unpacked(b, n).unwrap_err();
            assert!(err.contains(want), "{err}");
        }
    }
}
