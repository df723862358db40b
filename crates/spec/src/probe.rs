//! `probes:` on a scenario: commands a campaign runs beside its cells to
//! explain the numbers (`strace -c -f -p {pid}` over the measured window,
//! `redis-cli -p {port} INFO persistence` before and after, the server's
//! configuration once at start). They are plain shell commands, so they work
//! for every target kind; what they print is kept, never judged.

use faultline_model::probes::ProbeWhen;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One command to run against the scenario's targets.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProbeSpec {
    /// Names its output files and its rows in the report.
    pub name: String,
    /// Run with `sh -c`; `{port}`, `{pid}`, `{uri}`, `{target_dir}`,
    /// `{run_dir}` and the scenario's matrix placeholders are filled in.
    pub run: String,
    #[serde(default)]
    pub when: ProbeWhen,
    /// Only against these targets (default: every target of the scenario).
    #[serde(default)]
    pub targets: Vec<String>,
}
