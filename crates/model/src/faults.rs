//! What happened to one scheduled fault: requested, confirmed, healed, with
//! its evidence and its share of the lost writes; and how a target's disk
//! ran under the disk faults. Applying faults is the engine's.

use serde::{Deserialize, Serialize};

/// What happened to one scheduled fault. Times are seconds since the measured
/// window began.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FaultRecord {
    pub name: String,
    pub action: String,
    /// The selector as written, e.g. `kv.primary`.
    pub target: String,
    /// The containers or processes it hit, resolved when it was applied.
    pub hit: Vec<String>,
    pub requested_s: f64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub confirmed_s: Option<f64>,
    /// How the effect was confirmed.
    #[serde(skip_serializing_if = "String::is_empty", default)]
    pub evidence: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub healed_s: Option<f64>,
    #[serde(skip_serializing_if = "String::is_empty", default)]
    pub heal_evidence: String,
    /// Why it could not be applied or healed.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error: Option<String>,
    /// Output of an `exec` fault.
    #[serde(skip_serializing_if = "String::is_empty", default)]
    pub output: String,
    /// The server went down this way and was started again on its own
    /// data (a `restart`, or a `kill` once healed): a row of the
    /// crash-recovery matrix. Said by the fault that did it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub restart: Option<Restart>,
    /// With lost-acknowledged-write: this fault's share of the lost writes,
    /// held against the spans a demoted primary was still primary.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub lost_writes: Option<crate::checks::LostWritesAround>,
}

impl FaultRecord {
    /// A fault as requested at `requested_s`, before anything is known of it.
    pub fn requested(name: &str, action: &str, target: &str, requested_s: f64) -> FaultRecord {
        FaultRecord {
            name: name.into(),
            action: action.into(),
            target: target.into(),
            hit: vec![],
            requested_s,
            confirmed_s: None,
            evidence: String::new(),
            healed_s: None,
            heal_evidence: String::new(),
            error: None,
            output: String::new(),
            restart: None,
            lost_writes: None,
        }
    }
}

/// How a server went down before it was started again on its own data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Restart {
    /// Killed without warning (SIGKILL): what it had not written is gone.
    Crash,
    /// Asked to shut down (SIGTERM, SIGINT, a container stop) and given the time to.
    Clean,
    /// Killed, and the disk lost every write not made durable (fsync).
    #[serde(rename = "power-loss")]
    PowerLoss,
}

impl Restart {
    pub fn as_str(self) -> &'static str {
        match self {
            Restart::Crash => "crash",
            Restart::Clean => "clean",
            Restart::PowerLoss => "power-loss",
        }
    }

    /// A crash for SIGKILL (or no signal named), clean for the signals a
    /// server shuts down on.
    pub fn by_signal(signal: Option<&str>) -> Restart {
        match signal.map(|s| s.trim_start_matches("SIG")) {
            Some("TERM") | Some("INT") => Restart::Clean,
            _ => Restart::Crash,
        }
    }
}

/// How the kernel passes a server's writes to faultline's fault filesystem
/// (faultline-faultfs), as a mount is made and as results.json records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Caching {
    /// The kernel keeps writes in its page cache and hands them over at an
    /// fsync, a close or its own writeback, as it does for a disk: a write
    /// costs what a page-cache write costs.
    WriteBack,
    /// Each write reaches the layer as the server makes it, so a fault can
    /// refuse it (a full disk, a failing write) or slow it.
    WriteThrough,
}
