//! WebAssembly plugins: workload shapes and gate rules as components of the
//! `faultline:plugin` WIT package (plugins/wit/faultline.wit).
//!
//! One [`PluginHost`] per run holds the wasmtime engine and the thread that
//! ticks its epochs; each plugin is compiled once (and cached on disk) and
//! gets a fresh, sandboxed store per instance (see [`sandbox`]).

pub mod bench;
mod cache;
pub mod gate;
mod sandbox;
pub mod shape;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use wasmtime::component::Component;
use wasmtime::{Config, Engine};

use std::collections::HashMap;

use faultline_spec::{self as spec, GateRule, LoadedSpec, PluginRef, SpecError};

pub use crate::interface::{Limits, DEFAULT_MEMORY};

/// The WIT package version this host speaks.
pub const INTERFACE_VERSION: &str = "0.2.0";
const PACKAGE: &str = "faultline:plugin";

/// The epoch ticks this often; per-call deadlines are counted in ticks.
const EPOCH_TICK: Duration = Duration::from_millis(1);

/// What a plugin is for: the world it implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum World {
    Workload,
    Gate,
}

impl World {
    fn interface(self) -> &'static str {
        match self {
            World::Workload => "shape",
            World::Gate => "rule",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            World::Workload => "workload",
            World::Gate => "gate",
        }
    }
}

/// A compiled plugin, ready to instantiate.
#[derive(Clone)]
pub struct Plugin {
    pub path: PathBuf,
    pub world: World,
    /// The interface version it was built against.
    pub version: String,
    component: Component,
    /// The plugin imports WASI (e.g. a componentize-py component), which the
    /// sandbox then provides with every capability withheld.
    wants_wasi: bool,
}

impl Plugin {
    /// The name errors use: the file name.
    pub fn label(&self) -> String {
        self.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| self.path.display().to_string())
    }
}

/// The run's wasmtime engine and its epoch ticker.
pub struct PluginHost {
    engine: Engine,
    ticker: Option<std::thread::JoinHandle<()>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl PluginHost {
    pub fn new() -> anyhow::Result<PluginHost> {
        let mut config = Config::new();
        // Epoch interruption stops a plugin that runs past its deadline at
        // the next loop back-edge or call, whatever it is doing.
        config.epoch_interruption(true);
        let engine = Engine::new(&config).map_err(wasm_error).context("cannot start the WebAssembly engine")?;
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let ticker = {
            let (engine, stop) = (engine.weak(), Arc::clone(&stop));
            std::thread::Builder::new()
                .name("wasm-epoch".into())
                .spawn(move || {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        std::thread::sleep(EPOCH_TICK);
                        match engine.upgrade() {
                            Some(e) => e.increment_epoch(),
                            None => return,
                        }
                    }
                })
                .context("cannot start the epoch thread")?
        };
        Ok(PluginHost { engine, ticker: Some(ticker), stop })
    }

    /// Reads, compiles (or takes from the cache) and checks a plugin: it must
    /// be a component implementing `world` at a compatible version, and
    /// import nothing but WASI.
    pub fn load(&self, path: &Path, world: World) -> anyhow::Result<Plugin> {
        let plugin = self.inspect(path)?;
        if plugin.world != world {
            bail!(
                "{} is a {} plugin, but this field takes a {} plugin",
                path.display(),
                plugin.world.name(),
                world.name()
            );
        }
        Ok(plugin)
    }

    /// Loads any faultline plugin and says which world it implements.
    pub fn inspect(&self, path: &Path) -> anyhow::Result<Plugin> {
        let bytes = faultline_model::input_file::read(path, faultline_model::input_file::MAX_PLUGIN_BYTES)
            .with_context(|| format!("cannot read {}", path.display()))?;
        check_header(&bytes).with_context(|| format!("{} is not a faultline plugin", path.display()))?;
        let component = cache::compile(&self.engine, &bytes)
            .with_context(|| format!("{} is not a valid WebAssembly component", path.display()))?;
        let ty = component.component_type();
        let exports: Vec<String> = ty.exports(&self.engine).map(|(name, _)| name.to_string()).collect();
        let (world, version) = exports
            .iter()
            .find_map(|name| world_of(name))
            .with_context(|| {
                format!(
                    "{} exports {}, not a faultline interface: a workload plugin exports `{PACKAGE}/shape@{INTERFACE_VERSION}`, a gate `{PACKAGE}/rule@{INTERFACE_VERSION}`",
                    path.display(),
                    list_or_nothing(&exports)
                )
            })?;
        if !compatible(&version, INTERFACE_VERSION) {
            bail!(
                "{} was built for {PACKAGE}@{version}; this faultline speaks {PACKAGE}@{INTERFACE_VERSION}: rebuild it against the {INTERFACE_VERSION} WIT (plugins/wit) or the matching SDK",
                path.display()
            );
        }
        let imports: Vec<String> = ty.imports(&self.engine).map(|(name, _)| name.to_string()).collect();
        if let Some(other) = imports.iter().find(|i| !i.starts_with("wasi:")) {
            bail!(
                "{} imports `{other}`, which faultline does not provide: plugins may import nothing but WASI (and get no capabilities through it)",
                path.display()
            );
        }
        Ok(Plugin { path: path.to_path_buf(), world, version, component, wants_wasi: !imports.is_empty() })
    }

    fn engine(&self) -> &Engine {
        &self.engine
    }
}

impl Drop for PluginHost {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
    }
}

/// The plugins a spec names, loaded before anything starts so a bad one is
/// a spec error, not a failed run.
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

    pub fn load(spec_path: &Path, loaded: &LoadedSpec) -> Result<SpecPlugins, SpecError> {
        let spec = &loaded.spec;
        let named = spec.plugins();
        if named.is_empty() {
            return Ok(SpecPlugins::none());
        }
        let located = |field: &str, message: String| {
            let (line, column) = spec::locate::locate(&loaded.resolved_text, &spec::locate::parse_path(field)).unzip();
            SpecError { file: spec_path.to_path_buf(), line, column, field: Some(field.to_string()), message }
        };
        let host = PluginHost::new().map_err(|e| located(&named[0].0, format!("{e:#}")))?;
        let base = spec_path.parent().unwrap_or(Path::new("."));
        let load = |field: &str, p: &PluginRef, world: World| {
            host.load(&base.join(&p.plugin), world).map_err(|e| located(field, format!("{e:#}")))
        };
        let mut shapes = HashMap::new();
        for (name, w) in &spec.workloads {
            if let Some(p) = &w.shape {
                let field = format!("workloads.{name}.shape.plugin");
                let plugin = load(&field, p, World::Workload)?;
                // Its init now, so a config it refuses is a spec error, not a failed cell.
                let workload = faultline_kind::workload::Workload::new(w, spec.seed, 0);
                let setup = shape::Setup::of(&workload, 1, !spec.checkers.is_empty());
                let limits = Limits::of(p, shape::DEFAULT_DEADLINE);
                if let Err(e) = shape::Shape::start(&host, &plugin, limits, &p.config, spec.seed, setup) {
                    let at = if e.export == "init" && !p.config.is_null() {
                        format!("workloads.{name}.shape.config")
                    } else {
                        field
                    };
                    return Err(located(&at, e.to_string()));
                }
                shapes.insert(name.clone(), plugin);
            }
        }
        let mut gates = HashMap::new();
        for (name, g) in &spec.gates {
            if let GateRule::Plugin(p) = &g.rule {
                gates.insert(name.clone(), load(&format!("gates.{name}.plugin"), p, World::Gate)?);
            }
        }
        Ok(SpecPlugins { host: Some(host), shapes, gates })
    }
}

/// `faultline plugin check FILE`: what the file is, in one line, or why it
/// is not a faultline plugin.
pub fn check(file: &Path) -> anyhow::Result<String> {
    let p = PluginHost::new().and_then(|host| host.inspect(file))?;
    let interface = p.world.interface();
    let wasi = if p.wants_wasi { "; imports WASI, which it gets with every capability withheld" } else { "" };
    Ok(format!(
        "{}: faultline {} plugin, exports {PACKAGE}/{interface}@{} (this faultline speaks {INTERFACE_VERSION}){wasi}",
        file.display(),
        p.world.name(),
        p.version
    ))
}

/// A file that is not wasm, or is a core module, gets its own message: those
/// are the usual mistakes.
fn check_header(bytes: &[u8]) -> anyhow::Result<()> {
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        bail!("not a WebAssembly file (no `\\0asm` header)");
    }
    // Bytes 4..8: version and layer; layer 0 is a core module, 1 a component.
    if bytes[6..8] == [0, 0] {
        bail!("a core WebAssembly module, not a component: wrap it with `wasm-tools component new` (the SDK's build does this)");
    }
    Ok(())
}

/// `faultline:plugin/shape@0.2.0` → (Workload, "0.2.0").
fn world_of(export: &str) -> Option<(World, String)> {
    let rest = export.strip_prefix(PACKAGE)?.strip_prefix('/')?;
    let (interface, version) = rest.split_once('@')?;
    let world = [World::Workload, World::Gate].into_iter().find(|w| w.interface() == interface)?;
    Some((world, version.to_string()))
}

/// Semver compatibility: the same major version, or for 0.x the same minor.
fn compatible(version: &str, ours: &str) -> bool {
    let parts = |v: &str| -> Option<(u64, u64)> {
        let mut it = v.split(['.', '-', '+']);
        Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
    };
    match (parts(version), parts(ours)) {
        (Some((0, a)), Some((0, b))) => a == b,
        (Some((a, _)), Some((b, _))) => a == b,
        _ => false,
    }
}

fn list_or_nothing(names: &[String]) -> String {
    if names.is_empty() {
        "nothing".into()
    } else {
        names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
    }
}

/// wasmtime's errors as anyhow errors, keeping their whole chain.
fn wasm_error(e: wasmtime::Error) -> anyhow::Error {
    anyhow::anyhow!("{e:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_follow_semver() {
        assert!(compatible("0.1.0", "0.1.0"));
        assert!(compatible("0.1.3", "0.1.0"));
        assert!(!compatible("0.2.0", "0.1.0"));
        assert!(!compatible("1.0.0", "0.1.0"));
        assert!(compatible("1.4.0", "1.0.0"));
        assert!(!compatible("garbage", "0.1.0"));
    }

    #[test]
    fn the_version_is_the_wit_packages() {
        let wit = include_str!("../../../../plugins/wit/faultline.wit");
        assert!(wit.contains(&format!("\npackage {PACKAGE}@{INTERFACE_VERSION};\n")), "plugins/wit/faultline.wit");
    }

    #[test]
    fn exports_name_the_world() {
        assert_eq!(world_of("faultline:plugin/shape@0.1.0"), Some((World::Workload, "0.1.0".into())));
        assert_eq!(world_of("faultline:plugin/rule@1.0.0"), Some((World::Gate, "1.0.0".into())));
        assert_eq!(world_of("wasi:cli/run@0.2.0"), None);
    }

    #[test]
    fn headers_tell_core_modules_and_junk_apart() {
        assert!(check_header(b"hello world").unwrap_err().to_string().contains("not a WebAssembly file"));
        let core = [0, b'a', b's', b'm', 1, 0, 0, 0];
        assert!(check_header(&core).unwrap_err().to_string().contains("core WebAssembly module"));
        let component = [0, b'a', b's', b'm', 0x0d, 0, 1, 0];
        assert!(check_header(&component).is_ok());
    }
}
