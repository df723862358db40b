//! The sandbox every plugin instance runs in: its own store, a memory cap,
//! a per-call deadline in CPU time enforced by epoch interruption, and — only for
//! plugins that import WASI — a WASI with every capability withheld: no
//! files, no network, no environment, clocks frozen at zero and randomness
//! drawn from the run's seed, so a plugin's output depends only on what the
//! host hands it.

use std::time::Duration;

use rand_10::SeedableRng;
use wasmtime::component::{Linker, ResourceTable};
use wasmtime::{ResourceLimiter, Store, Trap, UpdateDeadline};
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::{Limits, Plugin, PluginHost, EPOCH_TICK};

pub use crate::interface::PluginError;

pub struct State {
    limiter: MemoryCap,
    call: CpuBudget,
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

/// A call's deadline, counted in CPU time of the thread running it. The
/// epoch ticks wall time, so each time a call reaches its wall-time deadline
/// it is given what is left of its CPU budget, and stopped only once it has
/// used it all: a plugin on a machine whose cores are busy elsewhere (or a
/// VM with CPU steal) is not stopped for time it spent waiting.
#[derive(Debug, Clone, Copy, Default)]
struct CpuBudget {
    started: Duration,
    budget: Duration,
}

impl CpuBudget {
    fn start(budget: Duration) -> CpuBudget {
        CpuBudget { started: thread_cpu_time(), budget }
    }

    /// What to do when the wall-time deadline is reached.
    fn next(&self) -> UpdateDeadline {
        let used = thread_cpu_time().saturating_sub(self.started);
        match self.budget.checked_sub(used) {
            Some(left) if !left.is_zero() => UpdateDeadline::Continue(ticks(left)),
            _ => UpdateDeadline::Interrupt,
        }
    }
}

/// `d` in epoch ticks, at least one.
fn ticks(d: Duration) -> u64 {
    d.as_nanos().div_ceil(EPOCH_TICK.as_nanos()).max(1) as u64
}

/// CPU time the calling thread has used.
fn thread_cpu_time() -> Duration {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes only the timespec it is given.
    let failed = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) } != 0;
    match failed {
        // Linux always has the clock; were it missing, wall time is the budget.
        true => Duration::ZERO,
        false => Duration::new(now.tv_sec as u64, now.tv_nsec as u32),
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
        let limiter = MemoryCap { cap: limits.memory, refused: None };
        let state = State { limiter, call: CpuBudget::default(), wasi, table: ResourceTable::new() };
        let mut store = Store::new(host.engine(), state);
        store.limiter(|s| &mut s.limiter);
        store.epoch_deadline_callback(|store| Ok(store.data().call.next()));
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

    /// Runs one export under `deadline` (CPU time of this thread). Any
    /// failure stops the instance for good.
    pub fn call<R>(
        &mut self,
        export: &str,
        deadline: Duration,
        f: impl FnOnce(&mut Store<State>) -> wasmtime::Result<R>,
    ) -> Result<R, PluginError> {
        if let Some(e) = &self.stopped {
            return Err(e.clone());
        }
        self.store.data_mut().call = CpuBudget::start(deadline);
        // The tick in progress may end at once: one extra keeps the deadline
        // a lower bound.
        self.store.set_epoch_deadline(ticks(deadline) + 1);
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
                    "ran past its {deadline:?} deadline (CPU time) and was stopped (a loop that never ends, or raise `deadline:`)"
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Time a call spends off the CPU is not counted; time on it is.
    #[test]
    fn a_call_is_stopped_for_cpu_time_not_for_waiting() {
        let budget = CpuBudget::start(Duration::from_millis(20));
        std::thread::sleep(Duration::from_millis(60));
        assert!(matches!(budget.next(), UpdateDeadline::Continue(_)), "waiting used the budget");
        let spin_from = thread_cpu_time();
        while thread_cpu_time() - spin_from < Duration::from_millis(25) {
            std::hint::black_box(0u64);
        }
        assert!(matches!(budget.next(), UpdateDeadline::Interrupt));
    }
}
