//! The disk faults as a spec writes them, one typed action each, shared by
//! the backends that put a target's data on this filesystem (the process
//! provider in faultline-engine, the docker provider in faultline-docker):
//! each implements `Apply` for what it reaches a target by, and lists them
//! in its registry.

use std::time::Duration;

use faultline_model::faults::Restart;
use faultline_model::units::{Dur, Size};
use faultline_spec::fault::{DiskUse, Site};
use faultline_spec::Action;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::Faults;

fn on_this_host() -> Result<(), (&'static str, String)> {
    faultline_spec::host::check_fault_filesystem().map_err(|why| ("action", why))
}

/// The power goes out: the server is killed with SIGKILL, every write its
/// disk had not made durable (fsync, fdatasync, O_SYNC) is thrown away,
/// and it is started again on what a disk would really hold.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PowerLoss {
    /// A disk that kept part of what it was sent: of each file's unsynced
    /// writes a random part survives (default false).
    #[serde(default)]
    pub torn: bool,
    /// The seed of a torn power loss's choices, to repeat one (default 1).
    pub seed: Option<u64>,
    /// When a creation, removal or rename survives: `ordered` (the
    /// default), once any fsync followed it, as ext4's journal has it;
    /// `strict`, only once its directory was fsynced, as POSIX promises.
    #[serde(default)]
    pub names: crate::Names,
}

impl PowerLoss {
    /// What [`crate::Mounted::power_loss`] takes.
    pub fn torn_seed(&self) -> Option<u64> {
        self.torn.then_some(self.seed.unwrap_or(1))
    }
}

impl Action for PowerLoss {
    const NAME: &'static str = "power-loss";
    const ON_FAULT_FILESYSTEM: bool = true;
    fn disk_use(&self) -> DiskUse {
        DiskUse { strict_names: self.names == crate::Names::Strict, ..DiskUse::default() }
    }
    fn restarts(&self) -> Option<Restart> {
        Some(Restart::PowerLoss)
    }
    fn check(&self, _: &Site) -> Result<(), (&'static str, String)> {
        if self.seed.is_some() && !self.torn {
            return Err((
                "seed",
                "a seed chooses what a torn power loss keeps: add `torn: true` or drop `seed`".into(),
            ));
        }
        on_this_host()
    }
}

/// A fault of the disk that holds while in force: what it sets, and what
/// puts the disk back.
pub trait DiskWindow: Action {
    fn set(&self, faults: &mut Faults);
    fn healer(&self) -> fn(&mut Faults);
}

/// The disk is full: writes, creations, truncations and fsyncs answer
/// ENOSPC until it heals; with `after`, once that many more bytes were
/// written (the write that reaches the end is cut short).
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiskFull {
    /// The disk takes this much more of writes before it is full, e.g.
    /// 64KiB (default: full at once).
    pub after: Option<Size>,
}

impl Action for DiskFull {
    const NAME: &'static str = "disk-full";
    const HEALS: bool = true;
    const ON_FAULT_FILESYSTEM: bool = true;
    fn check(&self, _: &Site) -> Result<(), (&'static str, String)> {
        on_this_host()
    }
    fn disk_use(&self) -> DiskUse {
        DiskUse { each_write: true, ..DiskUse::default() }
    }
}

impl DiskWindow for DiskFull {
    fn set(&self, faults: &mut Faults) {
        match self.after {
            Some(room) => faults.room = Some(room.0),
            None => faults.full = true,
        }
    }
    fn healer(&self) -> fn(&mut Faults) {
        |f| {
            f.full = false;
            f.room = None;
        }
    }
}

/// Which calls a disk fault answers.
#[derive(Deserialize, JsonSchema, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum DiskCall {
    #[default]
    Fsync,
    Write,
}

/// The disk fails: fsync (or write) answers EIO until it heals; a failed
/// fsync makes nothing durable.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiskError {
    /// The calls that fail: fsync (the default) or write.
    #[serde(default)]
    pub on: DiskCall,
}

impl Action for DiskError {
    const NAME: &'static str = "disk-error";
    const HEALS: bool = true;
    const ON_FAULT_FILESYSTEM: bool = true;
    fn check(&self, _: &Site) -> Result<(), (&'static str, String)> {
        on_this_host()
    }
    fn disk_use(&self) -> DiskUse {
        DiskUse { each_write: self.on == DiskCall::Write, ..DiskUse::default() }
    }
}

impl DiskWindow for DiskError {
    fn set(&self, faults: &mut Faults) {
        match self.on {
            DiskCall::Fsync => faults.fsync_error = true,
            DiskCall::Write => faults.write_error = true,
        }
    }
    fn healer(&self) -> fn(&mut Faults) {
        match self.on {
            DiskCall::Fsync => |f| f.fsync_error = false,
            DiskCall::Write => |f| f.write_error = false,
        }
    }
}

/// The disk is slow: each fsync (or write) takes `delay` longer until it heals.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SlowDisk {
    /// How much longer each call takes, e.g. 50ms.
    pub delay: Dur,
    /// The calls it slows: fsync (the default) or write.
    #[serde(default)]
    pub on: DiskCall,
}

impl Action for SlowDisk {
    const NAME: &'static str = "slow-disk";
    const HEALS: bool = true;
    const ON_FAULT_FILESYSTEM: bool = true;
    fn check(&self, _: &Site) -> Result<(), (&'static str, String)> {
        if self.delay.0 > Duration::from_secs(60) {
            return Err(("delay", "at most 60s: a call slower than that is a hung disk (use pause)".into()));
        }
        on_this_host()
    }
    fn disk_use(&self) -> DiskUse {
        DiskUse { each_write: self.on == DiskCall::Write, ..DiskUse::default() }
    }
}

impl DiskWindow for SlowDisk {
    fn set(&self, faults: &mut Faults) {
        match self.on {
            DiskCall::Fsync => faults.slow_fsync = self.delay.0,
            DiskCall::Write => faults.slow_write = self.delay.0,
        }
    }
    fn healer(&self) -> fn(&mut Faults) {
        match self.on {
            DiskCall::Fsync => |f| f.slow_fsync = Duration::ZERO,
            DiskCall::Write => |f| f.slow_write = Duration::ZERO,
        }
    }
}
