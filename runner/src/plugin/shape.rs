//! Workload shape plugins (world `workload`): the host asks a cell's shape
//! instance for ops in batches, one worker (connection) at a time, and —
//! when the shape asks for it — tells it which ops completed.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::sandbox::{PluginError, Sandbox};
use super::{Limits, Plugin, PluginHost};
use crate::spec::OpKind;
use crate::workload::Op;

mod bindings {
    wasmtime::component::bindgen!({ path: "../plugins/wit", world: "workload" });
}

use bindings::exports::faultline::plugin::shape as wit;

/// Per `next-ops` or `observe` call, unless the spec says otherwise. Wall
/// time, so generous: a busy machine can preempt a call for milliseconds.
pub const DEFAULT_DEADLINE: Duration = Duration::from_millis(50);

/// `init` may take longer than a batch: shapes build their tables there.
const INIT_DEADLINE: Duration = Duration::from_secs(1);

/// Ops per `next-ops` call for shapes that do not observe outcomes: large
/// enough that the call's fixed cost vanishes per op.
const BATCH: u32 = 128;

/// What the host tells a shape about the workload it runs in.
pub struct Setup {
    pub kinds: Vec<(OpKind, f64)>,
    pub key_count: u64,
    pub value_size: (u32, u32),
    pub workers: u32,
    /// Checkers are on: every write's value must name the write, so a shape
    /// may not choose the value itself.
    pub recording: bool,
}

impl Setup {
    pub fn of(workload: &crate::workload::Workload, workers: u32, recording: bool) -> Setup {
        Setup {
            kinds: workload.declared.clone(),
            key_count: workload.key_count(),
            value_size: workload.value_size(),
            workers,
            recording,
        }
    }
}

/// One cell's instance of a shape plugin, shared by the cell's connections.
pub struct Shape {
    sandbox: Sandbox,
    bindings: bindings::Workload,
    setup: Setup,
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
        Ok(Shape { sandbox, bindings, setup, observes: info.observe })
    }

    pub fn observes(&self) -> bool {
        self.observes
    }

    /// The error that stopped the instance, if one did.
    pub fn stopped(&self) -> Option<&PluginError> {
        self.sandbox.stopped.as_ref()
    }

    /// Hands over what completed, then appends up to `n` ops for `worker`.
    fn refill(
        &mut self,
        worker: u32,
        n: u32,
        completed: &mut Vec<wit::Completed>,
        out: &mut VecDeque<Op>,
    ) -> Result<(), PluginError> {
        let deadline = self.sandbox.limits.deadline;
        let shape = self.bindings.faultline_plugin_shape();
        if !completed.is_empty() {
            self.sandbox.call("observe", deadline, |store| shape.call_observe(store, completed))?;
            completed.clear();
        }
        let ops = self.sandbox.call("next-ops", deadline, |store| shape.call_next_ops(store, worker, n))?;
        if ops.len() > n as usize {
            let reason = format!("returned {} ops when asked for {n}", ops.len());
            return Err(self.sandbox.reject("next-ops", reason));
        }
        for (i, op) in ops.into_iter().enumerate() {
            match self.convert(op) {
                Ok(op) => out.push_back(op),
                Err(why) => {
                    return Err(self.sandbox.reject("next-ops", format!("returned a malformed op #{i}: {why}")))
                }
            }
        }
        Ok(())
    }

    /// Checks an op against what the spec declared.
    fn convert(&self, op: wit::Op) -> Result<Op, String> {
        let s = &self.setup;
        let kind = s.kinds.get(op.kind as usize).map(|(k, _)| *k).ok_or_else(|| {
            let declared: Vec<String> =
                s.kinds.iter().enumerate().map(|(i, (k, _))| format!("{i} {}", k.as_str())).collect();
            format!("kind {} is not one of the workload's op kinds ({})", op.kind, declared.join(", "))
        })?;
        if op.key >= s.key_count {
            return Err(format!("key {} is outside the key space 0..{}", op.key, s.key_count));
        }
        if op.value_size > s.value_size.1 {
            return Err(format!("value-size {} is above the workload's value_size {}B", op.value_size, s.value_size.1));
        }
        let value = match (kind, op.args.len()) {
            (_, 0) => None,
            (OpKind::Set, 1) if s.recording => {
                return Err(
                    "`set` carries its own value, but the spec's checkers need values that name their write".into()
                )
            }
            (OpKind::Set, 1) => Some(Arc::from(op.args.into_iter().next().expect("one arg"))),
            (OpKind::Set, n) => return Err(format!("`set` takes at most one argument (the value), got {n}")),
            (k, n) => return Err(format!("`{}` takes no arguments, got {n}", k.as_str())),
        };
        let value_len = value.as_ref().map(|v: &Arc<str>| v.len() as u32).unwrap_or(op.value_size);
        Ok(Op { kind, key: op.key, value_len, write_id: None, value })
    }
}

/// One connection's view of a cell's shape: the ops it was handed and not
/// yet sent, and the outcomes it has not yet reported.
pub struct Feed {
    shape: Arc<Mutex<Shape>>,
    /// The declared kinds, in the order `kind` indexes them.
    kinds: Vec<OpKind>,
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
        let (observes, kinds) = {
            let shape = shape.lock().expect("shape lock");
            (shape.observes(), shape.setup.kinds.iter().map(|(k, _)| *k).collect())
        };
        Feed {
            shape: Arc::clone(shape),
            kinds,
            worker,
            batch: if observes { in_flight.max(1) } else { BATCH },
            ready: VecDeque::new(),
            completed: Vec::new(),
            observes,
            done: false,
        }
    }

    pub fn observes(&self) -> bool {
        self.observes
    }

    /// The next op, or `None` once the shape has no more for this worker
    /// or has failed (the cell then reads the error from the shape).
    pub fn next_op(&mut self) -> Option<Op> {
        if self.ready.is_empty() && !self.done {
            let mut shape = self.shape.lock().expect("shape lock");
            let refilled = shape.refill(self.worker, self.batch, &mut self.completed, &mut self.ready);
            self.done = refilled.is_err() || self.ready.is_empty();
        }
        self.ready.pop_front()
    }

    pub fn completed(&mut self, op: &Op, ok: bool) {
        let args = op.value.as_ref().map(|v| vec![v.to_string()]).unwrap_or_default();
        let kind = self.kinds.iter().position(|k| *k == op.kind).expect("ops come from the declared kinds") as u8;
        let op = wit::Op { kind, key: op.key, value_size: op.value_len, args };
        self.completed.push(wit::Completed { worker: self.worker, op, ok });
    }
}
