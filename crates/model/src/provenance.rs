//! What exactly ran, beyond `run` and `targets`: the plugins' hashes and
//! how competitors were isolated, and a process target's binary with its
//! checksum. Computing and rendering them is the runner's and the report's.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Manifest {
    /// Every plugin the spec names, by its path relative to the spec, with its SHA-256.
    #[serde(default)]
    pub plugins: Vec<FileHash>,
    /// Per scenario with several variants: what the other targets did while
    /// one variant's cell ran (`idle`, `stop`, `own-cells`).
    #[serde(default)]
    pub isolation: IndexMap<String, String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileHash {
    pub path: String,
    /// Hex SHA-256, or why there is none.
    pub sha256: String,
}

/// A process target's binary as found on PATH, with its checksum.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Binary {
    pub path: String,
    pub sha256: String,
}
