//! The plugin module of a build without WebAssembly plugins (the cargo
//! feature `plugins` off, as the quickstart builds: wasmtime and cranelift
//! are the largest part of a cold build). A spec that names a plugin is
//! refused when it is loaded, at the plugin's field, with the command that
//! builds them in; `faultline plugin` says the same. The engine and the
//! workload name the same types as with plugins, but here a host, a plugin,
//! a shape and its feed are uninhabited: no run can hold one, and the
//! compiler proves every plugin path unreachable instead of a stub
//! pretending to run it.

use std::collections::HashMap;
use std::path::Path;

pub use crate::interface::Limits;

use faultline_spec::{self as spec, LoadedSpec, SpecError};

use crate::BUILD_WITH_PLUGINS;

/// The run's WebAssembly engine: none in this build.
pub enum PluginHost {}

/// A compiled plugin: none in this build.
pub enum Plugin {}

/// The plugins a spec names: always none in this build, since [`Self::load`]
/// refuses a spec that names one.
pub struct SpecPlugins {
    pub host: Option<PluginHost>,
    /// By workload name.
    pub shapes: HashMap<String, Plugin>,
    /// By gate name.
    pub gates: HashMap<String, Plugin>,
}

impl SpecPlugins {
    pub fn none() -> SpecPlugins {
        SpecPlugins { host: None, shapes: HashMap::new(), gates: HashMap::new() }
    }

    /// A spec without plugins, or a located error at the first it names.
    pub fn load(spec_path: &Path, loaded: &LoadedSpec) -> Result<SpecPlugins, SpecError> {
        let Some((field, _)) = loaded.spec.plugins().into_iter().next() else {
            return Ok(SpecPlugins::none());
        };
        let (line, column) = spec::locate::locate(&loaded.resolved_text, &spec::locate::parse_path(&field)).unzip();
        Err(SpecError {
            file: spec_path.to_path_buf(),
            line,
            column,
            field: Some(field),
            message: BUILD_WITH_PLUGINS.into(),
        })
    }
}

/// `faultline plugin check FILE`.
pub fn check(_file: &Path) -> anyhow::Result<String> {
    anyhow::bail!(BUILD_WITH_PLUGINS)
}

pub mod bench {
    /// `faultline plugin bench FILE`.
    pub fn run(_file: &std::path::Path, _ops: u64, _config: &str) -> anyhow::Result<String> {
        anyhow::bail!(crate::BUILD_WITH_PLUGINS)
    }
}

pub mod shape {
    use std::sync::{Arc, Mutex};

    use super::{Limits, Plugin, PluginHost};
    use faultline_kind::workload::{Op, OpSource};

    pub use crate::interface::{PluginError, Setup, SHAPE_DEADLINE as DEFAULT_DEADLINE};

    /// A cell's instance of a shape plugin: none in this build.
    pub enum Shape {}

    impl Shape {
        pub fn start(
            host: &PluginHost,
            _plugin: &Plugin,
            _limits: Limits,
            _config: &serde_json::Value,
            _seed: u64,
            _setup: Setup,
        ) -> Result<Shape, PluginError> {
            match *host {}
        }

        pub fn stopped(&self) -> Option<&PluginError> {
            match *self {}
        }
    }

    /// One connection's ops from a shape: none in this build.
    pub enum Feed {}

    impl Feed {
        pub fn new(shape: &Arc<Mutex<Shape>>, _worker: u32, _in_flight: u32) -> Feed {
            match *shape.lock().unwrap_or_else(|e| e.into_inner()) {}
        }
    }

    impl OpSource for Feed {
        fn next_op(&mut self) -> Option<Op> {
            match *self {}
        }

        fn prepare(&mut self, _need: usize) {
            match *self {}
        }

        fn observes(&self) -> bool {
            match *self {}
        }

        fn completed(&mut self, _op: &Op, _ok: bool) {
            match *self {}
        }
    }
}

pub mod gate {
    use super::{Limits, Plugin, PluginHost};
    use faultline_model::results::CellResult;

    pub use crate::interface::{Decision, PluginError, GATE_DEADLINE as DEFAULT_DEADLINE};

    pub fn evaluate(
        host: &PluginHost,
        _plugin: &Plugin,
        _limits: Limits,
        _config: &serde_json::Value,
        _run_name: &str,
        _complete: bool,
        _cells: &[&CellResult],
    ) -> Result<Decision, PluginError> {
        match *host {}
    }
}
