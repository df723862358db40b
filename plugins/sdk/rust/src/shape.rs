//! Workload shapes: the `workload` world.
//!
//! `use faultline_plugin::shape::*;` brings in everything a shape needs.

use crate::workload_bindings::exports::faultline::plugin::shape::Batch;
pub use crate::workload_bindings::exports::faultline::plugin::shape::{Completed, Info, Op, Setup};
pub use crate::{Config, Mix, Rng, SplitMix64, Streams, Zipf};

/// A workload shape. The host creates one per cell with [`Shape::init`],
/// then asks it for ops worker by worker.
pub trait Shape: Sized + 'static {
    /// Builds the shape for a cell. `seed` is the run's seed mixed with the
    /// cell's: draw everything from it (e.g. `Rng::for_stream(seed, worker)`)
    /// so runs repeat. An error stops the cell and is shown to the user.
    fn init(config: &Config, seed: u64, setup: &Setup) -> Result<Self, String>;

    /// Whether the host should report completed ops through
    /// [`Shape::observe`]. Costs host time: ask only when the next ops depend
    /// on earlier outcomes. Asked once, right after `init`.
    fn observes(&self) -> bool {
        false
    }

    /// Appends up to `n` ops for `worker` to `out` (which starts empty, with
    /// room for `n`). Fewer is allowed; none means the worker is done.
    fn next_ops(&mut self, worker: u32, n: u32, out: &mut Ops);

    /// Ops that completed since the last call (only if [`Shape::observes`]).
    fn observe(&mut self, completed: Vec<Completed>) {
        let _ = completed;
    }
}

impl Op {
    /// An op of kind `kind` (an index into `setup.ops`; see [`Kinds`] to
    /// look kinds up by name), no args.
    #[inline]
    pub fn new(kind: u8, key: u64, value_size: u32) -> Op {
        Op { kind, key, value_size, args: Vec::new() }
    }

    /// A write of exactly `value` (the op's one arg) with kind `kind`.
    pub fn with_value(kind: u8, key: u64, value: impl Into<String>) -> Op {
        let value = value.into();
        Op { kind, key, value_size: value.len() as u32, args: vec![value] }
    }
}

/// The ops one [`Shape::next_ops`] call hands the host. Push [`Op`]s as into
/// a `Vec`; they are kept the way the interface sends them, in columns (the
/// WIT's `batch`), which the host reads far faster than a list of records.
#[derive(Debug, Clone, PartialEq)]
pub struct Ops(Batch);

impl Ops {
    pub fn new() -> Ops {
        Ops::with_capacity(0)
    }

    pub fn with_capacity(n: usize) -> Ops {
        Ops(Batch {
            kinds: Vec::with_capacity(n),
            keys: Vec::with_capacity(n),
            value_sizes: Vec::with_capacity(n),
            args: Vec::new(),
        })
    }

    #[inline]
    pub fn push(&mut self, op: Op) {
        let b = &mut self.0;
        if !op.args.is_empty() {
            b.args.push((b.kinds.len() as u32, op.args));
        }
        b.kinds.push(op.kind);
        b.keys.push(op.key);
        b.value_sizes.push(op.value_size);
    }

    pub fn len(&self) -> usize {
        self.0.kinds.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.kinds.is_empty()
    }

    /// The ops as records again, in order (for tests).
    pub fn into_vec(self) -> Vec<Op> {
        let Batch { kinds, keys, value_sizes, args } = self.0;
        let mut args = args.into_iter().peekable();
        (0..kinds.len())
            .map(|i| {
                let own = args.next_if(|(at, _)| *at as usize == i).map(|(_, a)| a).unwrap_or_default();
                Op { kind: kinds[i], key: keys[i], value_size: value_sizes[i], args: own }
            })
            .collect()
    }
}

impl Default for Ops {
    fn default() -> Ops {
        Ops::new()
    }
}

/// The spec's op kinds by name, resolved to the numbers ops carry (indices
/// into `setup.ops`). Make it in `init` with [`Setup::kinds`], check the
/// kinds the shape needs with [`Kinds::require`], then build ops with
/// `kinds.get(key)`, `kinds.set(key, size)`, ...
#[derive(Debug, Clone)]
pub struct Kinds {
    names: Vec<String>,
    get: Option<u8>,
    set: Option<u8>,
    incr: Option<u8>,
    del: Option<u8>,
}

impl Kinds {
    pub fn new(setup: &Setup) -> Kinds {
        let names: Vec<String> = setup.ops.iter().take(256).map(|(k, _)| k.clone()).collect();
        let find = |n: &str| names.iter().position(|k| k == n).map(|i| i as u8);
        Kinds { get: find("get"), set: find("set"), incr: find("incr"), del: find("del"), names }
    }

    /// The kind number of `name`, if the spec declares it (with any weight).
    pub fn index(&self, name: &str) -> Option<u8> {
        self.names.iter().position(|k| k == name).map(|i| i as u8)
    }

    /// The kind number of `name`, or an error for `init` to return naming
    /// the kinds the spec does declare.
    pub fn require(&self, name: &str) -> Result<u8, String> {
        self.index(name).ok_or_else(|| {
            format!("this shape needs `{name}` in the workload's ops (it declares: {})", self.names.join(", "))
        })
    }

    /// The name of kind number `kind`.
    pub fn name(&self, kind: u8) -> Option<&str> {
        self.names.get(kind as usize).map(String::as_str)
    }

    #[inline]
    fn expect(kind: Option<u8>, name: &str) -> u8 {
        match kind {
            Some(k) => k,
            None => panic!("the workload does not declare `{name}`: check with Kinds::require in init"),
        }
    }

    /// `get key`. Panics (traps) if the spec does not declare `get`.
    #[inline]
    pub fn get(&self, key: u64) -> Op {
        Op::new(Self::expect(self.get, "get"), key, 0)
    }

    /// `set key` with `size` generated bytes.
    #[inline]
    pub fn set(&self, key: u64, size: u32) -> Op {
        Op::new(Self::expect(self.set, "set"), key, size)
    }

    /// `set key` writing exactly `value`.
    pub fn set_value(&self, key: u64, value: impl Into<String>) -> Op {
        Op::with_value(Self::expect(self.set, "set"), key, value)
    }

    /// `incr key`.
    #[inline]
    pub fn incr(&self, key: u64) -> Op {
        Op::new(Self::expect(self.incr, "incr"), key, 0)
    }

    /// `del key`.
    #[inline]
    pub fn del(&self, key: u64) -> Op {
        Op::new(Self::expect(self.del, "del"), key, 0)
    }
}

impl Setup {
    /// The spec's op mix, ready to draw from.
    pub fn mix(&self) -> Mix {
        Mix::new(&self.ops)
    }

    /// The op kinds by name.
    pub fn kinds(&self) -> Kinds {
        Kinds::new(self)
    }

    /// Whether the spec declares `kind` (with any weight).
    pub fn declares(&self, kind: &str) -> bool {
        self.ops.iter().any(|(k, _)| k == kind)
    }

    /// A value size in `value_size_min..=value_size_max`, drawn like the
    /// host does (no draw when they are equal).
    #[inline]
    pub fn value_size(&self, rng: &mut Rng) -> u32 {
        if self.value_size_min >= self.value_size_max {
            self.value_size_min
        } else {
            rng.range_u32_inclusive(self.value_size_min, self.value_size_max)
        }
    }
}

/// Glue between [`Shape`] and the generated bindings; used by
/// [`export_shape!`](crate::export_shape).
#[doc(hidden)]
pub mod __glue {
    use super::*;
    use crate::__rt::State;

    pub use crate::workload_bindings::exports::faultline::plugin::shape::{Batch, Guest};

    pub fn init<T: Shape>(state: &State<T>, config: String, seed: u64, setup: Setup) -> Result<Info, String> {
        let config = Config::parse(&config)?;
        let shape = T::init(&config, seed, &setup)?;
        let info = Info { observe: shape.observes() };
        state.set(shape);
        Ok(info)
    }

    pub fn next_ops<T: Shape>(state: &State<T>, worker: u32, n: u32) -> Batch {
        // Cap the up-front reservation: a host asking for a huge batch should
        // not make every call allocate it.
        let mut out = Ops::with_capacity(n.min(4096) as usize);
        state.with(|s| s.next_ops(worker, n, &mut out));
        out.0
    }

    pub fn observe<T: Shape>(state: &State<T>, completed: Vec<Completed>) {
        state.with(|s| s.observe(completed));
    }
}

/// Exports a [`Shape`] as the component's `shape` interface. Use it once,
/// at the crate root of a `cdylib`.
#[macro_export]
macro_rules! export_shape {
    ($ty:ty) => {
        // Only on wasm: natively the exports' names (`faultline:plugin/...`)
        // are no valid symbols, and `cargo test` of a plugin crate needs none.
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            static __FAULTLINE_SHAPE: $crate::__rt::State<$ty> = $crate::__rt::State::new();

            struct __FaultlineShape;

            impl $crate::shape::__glue::Guest for __FaultlineShape {
                fn init(
                    config: ::std::string::String,
                    seed: u64,
                    setup: $crate::shape::Setup,
                ) -> ::std::result::Result<$crate::shape::Info, ::std::string::String> {
                    $crate::shape::__glue::init::<$ty>(&__FAULTLINE_SHAPE, config, seed, setup)
                }

                fn next_ops(worker: u32, n: u32) -> $crate::shape::__glue::Batch {
                    $crate::shape::__glue::next_ops::<$ty>(&__FAULTLINE_SHAPE, worker, n)
                }

                fn observe(completed: ::std::vec::Vec<$crate::shape::Completed>) {
                    $crate::shape::__glue::observe::<$ty>(&__FAULTLINE_SHAPE, completed)
                }
            }

    $crate::workload_bindings::__export_workload!(__FaultlineShape with_types_in $crate::workload_bindings);
        };
    };
}
