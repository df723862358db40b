//! A probe's recorded run (its command, status, output file and any
//! `strace -c` counts) and when a probe runs. Running probes is the engine's.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProbeStatus {
    Ok,
    /// Cannot run here (no such program, no ptrace permission, no pid).
    Unavailable,
    /// Ran, but exited with an error or printed nothing.
    Failed,
}

/// One run of one probe.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProbeOutput {
    pub name: String,
    pub when: ProbeWhen,
    /// The instance it ran against.
    pub target: String,
    /// The command as run.
    pub command: String,
    pub status: ProbeStatus,
    /// Why it is unavailable or failed.
    #[serde(skip_serializing_if = "String::is_empty", default)]
    pub note: String,
    /// Its output file, relative to the run directory.
    #[serde(skip_serializing_if = "String::is_empty", default)]
    pub file: String,
    /// `start` probes: the output itself (cut at 4 KiB), for the manifest.
    #[serde(skip_serializing_if = "String::is_empty", default)]
    pub output: String,
    /// An `strace -c` table in the output: calls per syscall, most first.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub syscalls: Vec<SyscallCount>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SyscallCount {
    pub syscall: String,
    pub calls: u64,
    #[serde(skip_serializing_if = "is_zero", default)]
    pub errors: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ProbeWhen {
    /// Once, when the target has started (its output goes into the run's
    /// provenance manifest: the configuration the server really ran with).
    Start,
    /// Before each cell's load starts.
    #[default]
    Before,
    /// After each cell's load has stopped.
    After,
    /// Started when the measured window opens and sent SIGINT when it
    /// closes (which makes `strace -c` print its table).
    Window,
}

impl ProbeWhen {
    pub fn as_str(self) -> &'static str {
        match self {
            ProbeWhen::Start => "start",
            ProbeWhen::Before => "before",
            ProbeWhen::After => "after",
            ProbeWhen::Window => "window",
        }
    }
}
