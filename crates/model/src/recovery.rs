//! One row of the crash-recovery matrix (per scenario, matrix point and
//! variant: the restarts, and whether every acknowledged write survived
//! them) and its sentence. Building the rows from the cells is the runner's.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::format::thousands;

/// One row of the matrix.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecoveryRow {
    pub scenario: String,
    #[serde(skip_serializing_if = "IndexMap::is_empty", default)]
    pub matrix: IndexMap<String, String>,
    pub variant: String,
    /// `crash` (SIGKILL) or `clean` (SIGTERM, then start).
    pub restart: String,
    /// Restarts confirmed (the server answered its probe again).
    pub restarts: u64,
    /// Of those, in cells where no acknowledged write was lost.
    pub nothing_lost: u64,
    /// Restarts in cells whose check could not decide (with why).
    pub unchecked: u64,
    /// Acknowledged writes judged, and lost, over the row's cells.
    pub acknowledged: u64,
    pub lost: u64,
    /// When the lost writes had been acknowledged, in seconds relative to
    /// the request of the restart that lost them (negative: before it; a
    /// little after it while the signal lands): the earliest and the latest.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub lost_acked_relative_s: Option<(f64, f64)>,
    /// Some lost writes, as the checker describes them.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub examples: Vec<String>,
    /// Restarts that failed (the server did not come back), with why.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub failures: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub notes: Vec<String>,
}

impl RecoveryRow {
    /// "3/3 crashes with nothing lost", or what was lost.
    pub fn sentence(&self) -> String {
        let what = match self.restart.as_str() {
            "clean" => "clean restarts",
            "power-loss" => "power losses",
            _ => "crashes",
        };
        let mut text = format!("{}/{} {what} with nothing lost", self.nothing_lost, self.restarts);
        if self.lost > 0 {
            text.push_str(&format!(
                "; {} of {} acknowledged writes lost",
                thousands(self.lost),
                thousands(self.acknowledged)
            ));
            if let Some((earliest, latest)) = self.lost_acked_relative_s {
                let ms = |s: f64| format!("{:+.1} ms", s * 1000.0);
                text.push_str(&format!(
                    ", acknowledged from {} to {} around the restart request",
                    ms(earliest),
                    ms(latest)
                ));
            }
        }
        if self.unchecked > 0 {
            text.push_str(&format!("; {} not checked ({})", self.unchecked, self.notes.join("; ")));
        }
        if !self.failures.is_empty() {
            text.push_str(&format!("; {} restarts failed", self.failures.len()));
        }
        text
    }
}
