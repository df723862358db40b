//! The provenance manifest: what exactly ran, so a number in a report can be
//! traced to a build, a binary and a configuration. The run's own facts
//! (faultline's version and commit, host, kernel, CPU, seed, params) are in
//! results.json's `run`, each target's server version, arguments, binary
//! checksum and probed configuration in `targets`; this adds what belongs
//! to neither: the plugins' hashes and how competitors were isolated. It
//! also renders all of it as the report's provenance table, which every
//! shipped template shows (`provenance` in the template context).

use std::path::Path;

use sha2::{Digest, Sha256};

/// The commit this faultline was built from (see build.rs).
pub const COMMIT: &str = env!("FAULTLINE_COMMIT");

pub use faultline_model::provenance::{Binary, FileHash, Manifest};

/// `command` resolved the way the process provider starts it (PATH lookup
/// when it has no `/`), and hashed; a binary that cannot be read says why
/// in place of the hash.
pub fn binary(command: &str) -> Binary {
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

/// The report's provenance table, the same in every shipped template: the
/// run, the spec, each target (the server as it described itself, binary
/// and digest or image, arguments, start probes), isolation, plugins, the
/// host and faultline itself.
pub fn markdown(results: &crate::results::Results) -> String {
    use faultline_model::format::one_line;
    let run = &results.run;
    let mut out = String::from("| Item | Value |\n|---|---|\n");
    out.push_str(&format!(
        "| Run | `{}`, {} → {}{} |\n",
        run.id,
        run.started,
        run.finished,
        if run.interrupted { " (interrupted)" } else { "" }
    ));
    let mut spec = format!("`{}`, seed {}", run.spec_path, run.seed);
    for (k, v) in &run.params {
        let v = v.as_str().map_or_else(|| v.to_string(), str::to_string);
        spec.push_str(&format!(", {k}={v}"));
    }
    if run.quick {
        spec.push_str(", --quick");
    }
    if !run.only.is_empty() {
        spec.push_str(&format!(", --only {}", run.only.join(",")));
    }
    out.push_str(&format!("| Spec | {} |\n", one_line(&spec)));
    for t in &results.targets {
        let mut row = format!("{} ({} via {}, {})", t.server, t.kind, t.provider, t.uri);
        if let Some(b) = &t.binary {
            row.push_str(&format!("; `{}` sha256 {}", b.path, b.sha256.get(..16).unwrap_or(&b.sha256)));
        }
        if let Some(image) = &t.image {
            row.push_str(&format!("; image `{image}`"));
        }
        if !t.args.is_empty() {
            row.push_str(&format!("; args `{}`", t.args.join(" ")));
        } else if t.binary.is_some() {
            row.push_str("; no args beyond faultline's own (port, data directory)");
        }
        for p in &t.probes {
            match p.status {
                crate::probe::ProbeStatus::Ok => row.push_str(&format!("; {}: `{}`", p.name, p.output.trim())),
                _ => row.push_str(&format!("; {}: {:?} ({})", p.name, p.status, p.note)),
            }
        }
        out.push_str(&format!("| Target `{}` | {} |\n", t.instance.as_deref().unwrap_or(&t.name), one_line(&row)));
    }
    for (scenario, isolation) in &results.manifest.isolation {
        let how = match isolation.as_str() {
            "stop" => "the other targets frozen (SIGSTOP) during each cell",
            "own-cells" => "each target running only for its own cells",
            _ => "the other targets up and idle during each cell",
        };
        out.push_str(&format!("| Isolation, `{scenario}` | {isolation}: {how} |\n"));
    }
    for p in &results.manifest.plugins {
        out.push_str(&format!("| Plugin `{}` | sha256 {} |\n", p.path, p.sha256));
    }
    let h = &run.host;
    out.push_str(&format!(
        "| Host | {}: {} × {}, {} GiB, {}, Linux {} |\n",
        h.hostname, h.cpus, h.cpu_model, h.memory_gib, h.os, h.kernel
    ));
    let commit = match run.faultline_commit.is_empty() {
        true => String::new(),
        false => format!(", commit {}", run.faultline_commit),
    };
    out.push_str(&format!("| faultline | {}{commit} |\n", run.faultline_version));
    out
}
