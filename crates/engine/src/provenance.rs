//! The provenance manifest: what exactly ran, so a number in a report can be
//! traced to a build, a binary and a configuration. The run's own facts
//! (faultline's version and commit, host, kernel, CPU, seed, params) are in
//! results.json's `run`, each target's server version, arguments, binary
//! checksum and probed configuration in `targets`; this adds what belongs
//! to neither: the plugins' hashes and how competitors were isolated. The
//! report (faultline-report) renders all of it as its provenance table.

use std::path::Path;

use sha2::{Digest, Sha256};

/// The commit this faultline was built from (see build.rs).
pub const COMMIT: &str = env!("FAULTLINE_COMMIT");

pub(crate) use faultline_model::provenance::{Binary, FileHash, Manifest};

/// `command` resolved the way the process provider starts it (PATH lookup
/// when it has no `/`), and hashed; a binary that cannot be read says why
/// in place of the hash.
pub(crate) fn binary(command: &str) -> Binary {
    let resolved = match command.contains('/') {
        true => Some(std::path::PathBuf::from(command)),
        false => std::env::var_os("PATH")
            .and_then(|paths| std::env::split_paths(&paths).map(|d| d.join(command)).find(|p| p.is_file())),
    };
    match resolved {
        // The path as started (a Debian redis-server is a symlink): the hash is of what it points to.
        Some(path) => Binary { sha256: sha256_of(&path), path: path.display().to_string() },
        None => Binary { path: command.to_string(), sha256: "unavailable: not found on PATH".into() },
    }
}

pub fn sha256_of(path: &Path) -> String {
    // Streamed: a binary may be large; only a regular file is read.
    let mut hasher = Sha256::new();
    match crate::input_file::open(path).and_then(|mut f| std::io::copy(&mut f, &mut hasher)) {
        Ok(_) => hasher.finalize().iter().map(|b| format!("{b:02x}")).collect(),
        Err(e) => format!("unavailable: {e}"),
    }
}

/// The manifest's own part for a spec loaded from `spec_path`.
pub fn manifest(spec: &crate::spec::Spec, spec_path: &Path) -> Manifest {
    let base = spec_path.parent().unwrap_or(Path::new("."));
    let mut plugins: Vec<FileHash> = Vec::new();
    for (_, plugin) in spec.plugins() {
        if !plugins.iter().any(|p| p.path == plugin.plugin) {
            plugins.push(FileHash { path: plugin.plugin.clone(), sha256: sha256_of(&base.join(&plugin.plugin)) });
        }
    }
    let isolation = spec
        .scenarios
        .iter()
        .filter(|s| s.variants().len() > 1)
        .map(|s| (s.name.clone(), s.isolation.as_str().to_string()))
        .collect();
    Manifest { plugins, isolation }
}
