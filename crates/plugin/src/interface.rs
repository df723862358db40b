//! What the rest of faultline knows of plugins without the WebAssembly
//! engine: the limits an instance runs under, what a shape is told of its
//! workload, what a gate plugin decided and how a plugin failed. A build
//! without the `plugins` feature (no wasmtime) shares these with the real
//! host (absent.rs), so both present the engine the same types.

use std::time::Duration;

use faultline_model::results::{Criterion, GateOutcome};

use faultline_model::ops::OpKind;
use faultline_spec::PluginRef;

pub const DEFAULT_MEMORY: u64 = 64 << 20;

/// Per `next-ops` or `observe` call of a shape, unless the spec says
/// otherwise; CPU time of the calling thread, so a call preempted on a busy
/// machine is not stopped for the time it waited.
pub const SHAPE_DEADLINE: Duration = Duration::from_millis(50);

/// Per evaluation of a gate plugin, unless the spec says otherwise.
pub const GATE_DEADLINE: Duration = Duration::from_secs(1);

/// The limits a plugin instance runs under.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub deadline: Duration,
    pub memory: u64,
}

impl Limits {
    pub fn of(plugin: &PluginRef, default_deadline: Duration) -> Limits {
        Limits {
            deadline: plugin.deadline.map(|d| d.0).unwrap_or(default_deadline),
            memory: plugin.memory.map(|m| m.0).unwrap_or(DEFAULT_MEMORY),
        }
    }
}

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
    pub fn of(workload: &faultline_kind::workload::Workload, workers: u32, recording: bool) -> Setup {
        Setup {
            kinds: workload.declared.clone(),
            key_count: workload.key_count(),
            value_size: workload.value_size(),
            workers,
            recording,
        }
    }
}

/// What a gate plugin decided.
pub struct Decision {
    pub outcome: GateOutcome,
    pub criteria: Vec<Criterion>,
}

/// Why a plugin call did not return a value: names the plugin, the export
/// and the reason.
#[derive(Debug, Clone, thiserror::Error)]
#[error("plugin {plugin}: `{export}` {reason}")]
pub struct PluginError {
    pub plugin: String,
    pub export: String,
    pub reason: String,
}
