//! The sandbox every plugin instance runs in: its own store, a memory cap,
//! a per-call deadline enforced by epoch interruption, and — only for
//! plugins that import WASI — a WASI with every capability withheld: no
//! files, no network, no environment, clocks frozen at zero and randomness
//! drawn from the run's seed, so a plugin's output depends only on what the
//! host hands it.

use std::time::Duration;

use rand_10::SeedableRng;
use wasmtime::component::{Linker, ResourceTable};
use wasmtime::{ResourceLimiter, Store, Trap};
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::{Limits, Plugin, PluginHost, EPOCH_TICK};

pub use super::interface::PluginError;

pub struct State {
    limiter: MemoryCap,
    wasi: WasiCtx,
    table: ResourceTable,
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

/// Refuses to grow any memory past the cap, and remembers that it did so
/// the error can say so rather than report the plugin's own abort.
struct MemoryCap {
    cap: u64,
    refused: Option<u64>,
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(&mut self, _current: usize, desired: usize, _max: Option<usize>) -> wasmtime::Result<bool> {
        if desired as u64 > self.cap {
            self.refused = Some(desired as u64);
            wasmtime::bail!("memory cap reached");
        }
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _max: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= 1 << 20)
    }
}

struct FrozenClock;

impl HostWallClock for FrozenClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }
    fn now(&self) -> Duration {
        Duration::ZERO
    }
}

impl HostMonotonicClock for FrozenClock {
    fn resolution(&self) -> u64 {
        1_000_000_000
    }
    fn now(&self) -> u64 {
        0
    }
}

/// One plugin instance's store, and what it needs to report failures.
pub struct Sandbox {
    pub store: Store<State>,
    pub limits: Limits,
    pub label: String,
    /// Set once a call failed: the instance may be in any state, so it is
    /// not called again.
    pub stopped: Option<PluginError>,
}

impl Sandbox {
    pub fn new(host: &PluginHost, plugin: &Plugin, limits: Limits, seed: u64) -> Sandbox {
        let wasi = WasiCtxBuilder::new()
            .wall_clock(FrozenClock)
            .monotonic_clock(FrozenClock)
            .secure_random(rand_10::rngs::StdRng::seed_from_u64(seed))
            .insecure_random(rand_10::rngs::StdRng::seed_from_u64(seed ^ 0x5eed))
            .insecure_random_seed(seed as u128)
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        let state =
            State { limiter: MemoryCap { cap: limits.memory, refused: None }, wasi, table: ResourceTable::new() };
        let mut store = Store::new(host.engine(), state);
        store.limiter(|s| &mut s.limiter);
        Sandbox { store, limits, label: plugin.label(), stopped: None }
    }

    /// The linker a plugin's instance is made with: WASI (capabilities
    /// withheld) for plugins that import it, nothing for the rest.
    pub fn linker(host: &PluginHost, plugin: &Plugin) -> anyhow::Result<Linker<State>> {
        let mut linker = Linker::new(host.engine());
        if plugin.wants_wasi {
            wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(super::wasm_error)?;
        }
        Ok(linker)
    }

    /// Runs one export under `deadline`. Any failure stops the instance for good.
    pub fn call<R>(
        &mut self,
        export: &str,
        deadline: Duration,
        f: impl FnOnce(&mut Store<State>) -> wasmtime::Result<R>,
    ) -> Result<R, PluginError> {
        if let Some(e) = &self.stopped {
            return Err(e.clone());
        }
        let ticks = deadline.as_nanos().div_ceil(EPOCH_TICK.as_nanos()).max(1) as u64;
        // The tick in progress may end at once: one extra keeps the deadline
        // a lower bound.
        self.store.set_epoch_deadline(ticks + 1);
        f(&mut self.store).map_err(|e| {
            let error = self.error(export, self.describe(&e, deadline));
            self.stopped = Some(error.clone());
            error
        })
    }

    pub fn error(&self, export: &str, reason: String) -> PluginError {
        PluginError { plugin: self.label.clone(), export: export.to_string(), reason }
    }

    /// Stops the instance with a reason found by the host (malformed output).
    pub fn reject(&mut self, export: &str, reason: String) -> PluginError {
        let error = self.error(export, reason);
        self.stopped = Some(error.clone());
        error
    }

    fn describe(&self, e: &wasmtime::Error, deadline: Duration) -> String {
        if let Some(bytes) = self.store.data().limiter.refused {
            return format!(
                "exceeded its memory cap of {} (it asked for {}): raise `memory:` if it really needs more",
                mib(self.limits.memory),
                mib(bytes)
            );
        }
        match e.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) => {
                format!(
                    "ran past its {deadline:?} deadline and was stopped (a loop that never ends, or raise `deadline:`)"
                )
            }
            Some(trap) => format!("trapped: {trap}"),
            None => format!("failed: {}", format!("{e:#}").lines().next().unwrap_or("unknown error")),
        }
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.0}MiB", bytes as f64 / (1 << 20) as f64)
}
