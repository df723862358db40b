//! results.json on disk: written atomically with every known secret
//! redacted, read back within a size bound. The schema itself (the record
//! types) is `faultline_model::results`.

use std::path::Path;

use anyhow::Context;

use faultline_model::results::{HostInfo, Results, SCHEMA_VERSION};

/// Writing and reading results.json: the file side of the model's
/// [`Results`], which stays free of redaction and bounded reading.
pub trait ResultsFile: Sized {
    fn write_atomically(&self, path: &Path) -> anyhow::Result<()>;
    fn read(path: &Path) -> anyhow::Result<Self>;
}

impl ResultsFile for Results {
    fn write_atomically(&self, path: &Path) -> anyhow::Result<()> {
        let tmp = path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(self)?;
        let text = crate::redact::text(&text);
        std::fs::write(&tmp, text.as_bytes()).with_context(|| format!("cannot write {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("cannot move {} into place", tmp.display()))?;
        Ok(())
    }

    fn read(path: &Path) -> anyhow::Result<Results> {
        let text = crate::input_file::read_to_string(path, crate::input_file::MAX_RESULTS_BYTES)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let results: Results = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a faultline results file", path.display()))?;
        if results.schema_version != SCHEMA_VERSION {
            anyhow::bail!(
                "{} has schema_version {}, this faultline reads {}",
                path.display(),
                results.schema_version,
                SCHEMA_VERSION
            );
        }
        Ok(results)
    }
}

pub fn host_info() -> HostInfo {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let cpu_model = read("/proc/cpuinfo")
        .lines()
        .find_map(|l| l.strip_prefix("model name").map(|v| v.trim_start_matches([' ', '\t', ':']).to_string()))
        .unwrap_or_else(|| "unknown".into());
    let memory_kib: f64 = read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    let os = read("/etc/os-release")
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME=").map(|v| v.trim_matches('"').to_string()))
        .unwrap_or_else(|| std::env::consts::OS.to_string());
    HostInfo {
        hostname: read("/proc/sys/kernel/hostname").trim().to_string(),
        os,
        kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
        cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        cpu_model,
        memory_gib: (memory_kib / 1024.0 / 1024.0 * 10.0).round() / 10.0,
    }
}
