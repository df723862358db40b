//! Compiled components cached on disk, keyed by the component's content hash
//! and the engine's compatibility hash (wasmtime version and settings), so a
//! plugin is compiled once per machine: a componentize-py component takes
//! seconds to compile and milliseconds to load.

use std::hash::{Hash, Hasher};
use std::path::PathBuf;

use sha2::{Digest, Sha256};
use wasmtime::component::Component;
use wasmtime::Engine;

use super::wasm_error;

pub fn compile(engine: &Engine, bytes: &[u8]) -> anyhow::Result<Component> {
    let Some(file) = cache_dir().map(|dir| dir.join(format!("{}.cwasm", key(engine, bytes)))) else {
        return Component::new(engine, bytes).map_err(wasm_error);
    };
    if file.is_file() {
        // SAFETY: the file is one this function wrote from a component
        // wasmtime compiled, in the user's own cache directory, under a key
        // that changes whenever the engine's compatibility hash does.
        if let Ok(component) = unsafe { Component::deserialize_file(engine, &file) } {
            return Ok(component);
        }
    }
    let component = Component::new(engine, bytes).map_err(wasm_error)?;
    // A cache that cannot be written only costs the next run a compile.
    if let Ok(serialized) = component.serialize() {
        let _ = store(&file, &serialized);
    }
    Ok(component)
}

fn store(file: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = file.parent().expect("cache files live in a directory");
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(tmp.as_file_mut(), bytes)?;
    tmp.persist(file).map_err(|e| e.error)?;
    Ok(())
}

fn key(engine: &Engine, bytes: &[u8]) -> String {
    let content = Sha256::digest(bytes);
    let mut engine_hash = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut engine_hash);
    let hex: String = content.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("{hex}-{:016x}", engine_hash.finish())
}

/// `$FAULTLINE_CACHE/plugins`, else `$XDG_CACHE_HOME/faultline/plugins`, else
/// `~/.cache/faultline/plugins`.
fn cache_dir() -> Option<PathBuf> {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = env("FAULTLINE_CACHE") {
        return Some(dir.join("plugins"));
    }
    let base = env("XDG_CACHE_HOME").or_else(|| env("HOME").map(|h| h.join(".cache")))?;
    Some(base.join("faultline").join("plugins"))
}
