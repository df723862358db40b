//! faultline's fault filesystem: a FUSE filesystem put over a server's data
//! directory that passes every call through to the real files and knows,
//! per file, what has been made durable (fsync, fdatasync, O_SYNC/O_DSYNC
//! writes). A power loss ([`Mounted::power_loss`]) throws away every write
//! since each file's last durable point, as a disk whose cache was lost
//! would; "torn", a random prefix of one write survives. While mounted,
//! faults answer for the disk ([`Faults`]): ENOSPC (full), EIO (failing),
//! slow fsyncs or writes. It is what lets a crash test tell `appendfsync
//! always` from `no`: a SIGKILL alone never loses what the kernel holds.
//!
//! Why FUSE: the server runs unchanged on a real directory, and the layer
//! sees exactly the calls that decide durability (docs/spec.md#power-loss
//! for what it does not model). `fuser` is pure Rust; the mount needs
//! /dev/fuse and root. The filesystem runs in this process: if faultline
//! is SIGKILLed the mount is left answering ENOTCONN (never hanging), and
//! [`stale`] finds and removes such mounts by the name they carry.
//!
//! [`Caching`]: write-back (the kernel keeps the server's writes in its
//! page cache until an fsync, a close or its writeback timer hands them
//! over, as it does for a disk) costs a round trip per flush rather than
//! per write; write-through is for faults that must answer each write as
//! it is made (a full disk, a failing or slow write). Either way a power
//! loss cuts the connection first, so what the kernel still held is lost
//! with the rest, and serves what is left from a fresh mount: nothing the
//! kernel cached of the old contents (sizes, pages) survives it.
//!
//! - log.rs: one file's undo log (what each unsynced change replaced);
//! - [`names`]: the journal of creations, removals and renames, and when
//!   each is durable ([`Names`]: at any fsync, as ext4; or strictly at its
//!   directory's);
//! - fs.rs: the filesystem, a passthrough that keeps the logs;
//! - [`stale`]: mounts of faultline's that nothing serves any more;
//! - [`actions`]: the disk faults as a spec writes them, which the process
//!   and docker providers apply to the mounts under their targets.

pub mod actions;
mod fs;
mod log;
pub mod names;
pub mod stale;

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use faultline_model::faults::Caching;
use rand::{Rng, SeedableRng};

pub use log::Reverted;
pub use names::Names;

/// What the disk does wrong while a fault is in force.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Faults {
    /// Writes, creations, truncations and fsyncs answer ENOSPC.
    pub full: bool,
    /// The disk takes this many more bytes of writes, then is full (the
    /// write that reaches the end is cut short there).
    pub room: Option<u64>,
    /// Writes answer EIO.
    pub write_error: bool,
    /// fsync answers EIO (and makes nothing durable).
    pub fsync_error: bool,
    /// Each fsync takes this much longer.
    pub slow_fsync: Duration,
    /// Each write takes this much longer.
    pub slow_write: Duration,
}

impl std::fmt::Display for Faults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut said = Vec::new();
        if self.full {
            said.push("writes and fsyncs answer ENOSPC".to_string());
        } else if let Some(room) = self.room {
            said.push(format!("full after {room} more byte(s) of writes"));
        }
        if self.write_error {
            said.push("writes answer EIO".to_string());
        }
        if self.fsync_error {
            said.push("fsyncs answer EIO".to_string());
        }
        let slower = |d: Duration| faultline_model::units::format_duration(d);
        if !self.slow_fsync.is_zero() {
            said.push(format!("each fsync {} slower", slower(self.slow_fsync)));
        }
        if !self.slow_write.is_zero() {
            said.push(format!("each write {} slower", slower(self.slow_write)));
        }
        match said.is_empty() {
            true => f.write_str("healthy"),
            false => f.write_str(&said.join(", ")),
        }
    }
}

/// What a power loss threw away.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Lost {
    /// Files that had writes not made durable.
    pub files: usize,
    /// Changes (writes, truncations) undone.
    pub changes: usize,
    /// Bytes of writes undone.
    pub bytes: u64,
    /// Creations, removals and renames undone.
    pub names: usize,
    /// Files whose log could not be undone, with why.
    pub failed: Vec<String>,
}

impl std::fmt::Display for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} unsynced write(s) of {} byte(s) in {} file(s) thrown away",
            self.changes, self.bytes, self.files
        )?;
        if self.names > 0 {
            write!(f, ", {} creation(s), removal(s) or rename(s) undone", self.names)?;
        }
        for failed in &self.failed {
            write!(f, "; {failed}")?;
        }
        Ok(())
    }
}

/// What a mount is for: what the faults of the target on it need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layer {
    pub caching: Caching,
    /// A power loss may undo changes of names strictly ([`Names::Strict`]):
    /// each is kept until its directory is fsynced, not only until the
    /// next fsync.
    pub strict_names: bool,
}

/// A mounted fault filesystem; dropping it unmounts it.
pub struct Mounted {
    shared: Arc<fs::Shared>,
    mountpoint: PathBuf,
    label: String,
    session: Option<fuser::BackgroundSession>,
}

/// Mounts the fault filesystem over `mountpoint`, passing through to
/// `backing` (a directory of the same machine). `label` names the mount in
/// the mount table (letters, digits, `.`, `_`, `-`), with this process's
/// id, so [`stale`] can tell whose it is. Everything already in `backing`
/// counts as durable.
pub fn mount(backing: &Path, mountpoint: &Path, label: &str, layer: Layer) -> io::Result<Mounted> {
    if !Path::new("/dev/fuse").exists() {
        return Err(io::Error::new(io::ErrorKind::Unsupported, "this machine has no /dev/fuse: FUSE is not available"));
    }
    let label: String =
        label.chars().map(|c| if c.is_ascii_alphanumeric() || ".-_".contains(c) { c } else { '_' }).collect();
    let backing = backing.canonicalize()?;
    // What an earlier mount buried is nobody's now.
    let graveyard = backing.join(names::GRAVEYARD);
    if graveyard.exists() {
        std::fs::remove_dir_all(&graveyard)?;
    }
    let shared = Arc::new(fs::Shared::new(backing, layer, Faults::default()));
    let session = serve(&shared, mountpoint, &label)?;
    Ok(Mounted { shared, mountpoint: mountpoint.to_path_buf(), label, session: Some(session) })
}

/// Mounts `shared`'s filesystem over `mountpoint` and serves it on threads of its own.
fn serve(shared: &Arc<fs::Shared>, mountpoint: &Path, label: &str) -> io::Result<fuser::BackgroundSession> {
    let mut config = fuser::Config::default();
    config.mount_options = vec![
        fuser::MountOption::FSName(stale::fs_name(std::process::id(), label)),
        fuser::MountOption::DefaultPermissions,
        fuser::MountOption::NoDev,
        fuser::MountOption::NoSuid,
    ];
    // A server in a container runs as its own user: let it in, and let
    // the kernel check modes (DefaultPermissions).
    config.acl = fuser::SessionACL::All;
    config.n_threads = Some(2);
    fuser::spawn_mount(fs::FaultFs(Arc::clone(shared)), mountpoint, &config)
}

impl Mounted {
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// The faults in force from now on (all off: a healthy disk).
    pub fn set_faults(&self, faults: Faults) {
        *self.shared.faults.lock().unwrap_or_else(|p| p.into_inner()) = faults;
    }

    /// The faults in force now.
    pub fn faults(&self) -> Faults {
        *self.shared.faults.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Changes the faults in force; says what the disk under
    /// `mountpoint` does now (the layer holds it from the next call on).
    pub fn change(&self, change: impl FnOnce(&mut Faults)) -> String {
        let mut faults = self.shared.faults.lock().unwrap_or_else(|p| p.into_inner());
        change(&mut faults);
        format!("the disk under {} now: {}", self.mountpoint.display(), *faults)
    }

    /// The power goes out: the mount's connection is cut (the kernel drops
    /// what it held of the server's writes; a process still using the mount
    /// gets ENOTCONN), every write the layer had not made durable is thrown
    /// away, file by file, and a fresh mount at the same place serves what
    /// is left. Kill the server first. `torn`: a seed, and of each file's
    /// unsynced writes a random part survives (appends that followed one
    /// another count as one write here), the rest is lost. `names`: which
    /// creations, removals and renames were durable. An error: the fresh
    /// mount could not be made (the files are reverted all the same).
    pub fn power_loss(&mut self, torn: Option<u64>, names: Names) -> io::Result<Lost> {
        if let Some(session) = self.session.take() {
            match stale::cut_off(&self.mountpoint) {
                // Not a mount any more: nothing serves it but this session.
                Err(e) if e.raw_os_error() != Some(libc::EINVAL) => {
                    self.session = Some(session);
                    return Err(io::Error::other(format!("cannot cut the mount's connection: {e}")));
                }
                _ => {
                    wait_for_end(session);
                }
            }
        }
        let lost = self.revert(torn, names);
        let shared = Arc::new(fs::Shared::new(self.shared.backing.clone(), self.shared.layer, self.faults()));
        self.session = Some(serve(&shared, &self.mountpoint, &self.label)?);
        self.shared = shared;
        Ok(lost)
    }

    /// Undoes every file's log, then the names' journal; calls still under
    /// way on the old connection find the power off and touch nothing.
    fn revert(&self, torn: Option<u64>, names: Names) -> Lost {
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(torn.unwrap_or(0));
        let mut lost = Lost::default();
        let backing = self.shared.backing.clone();
        let mut state = self.shared.state();
        state.powered_off = true;
        let mut logged = state.logged();
        logged.sort_by(|a, b| a.0.cmp(&b.0));
        for (path, log) in logged {
            if log.is_empty() {
                continue;
            }
            // Torn: some entries survive, and a part of the next one.
            let cut = torn.map(|_| (rng.random_range(0..log.len()), rng.random::<u64>()));
            let reverted =
                File::options().read(true).write(true).open(backing.join(&path)).and_then(|f| log.revert(&f, cut));
            match reverted {
                Ok(r) => {
                    lost.files += 1;
                    lost.changes += r.changes;
                    lost.bytes += r.bytes;
                }
                Err(e) => lost.failed.push(format!("{}: {e}", path.display())),
            }
        }
        state.logs.clear();
        let (undone, failed) = state.names.revert(&backing, names);
        lost.names = undone;
        lost.failed.extend(failed);
        lost
    }

    /// Unmounts (lazily: a process still holding a file keeps it until it
    /// lets go) and stops serving, within a bounded wait. Once nothing is
    /// served any more, the graveyard goes too: no power loss can come to
    /// undo a removal.
    pub fn unmount(mut self) -> io::Result<()> {
        self.stop()
    }

    fn stop(&mut self) -> io::Result<()> {
        let Some(session) = self.session.take() else { return Ok(()) };
        let detached = stale::unmount(&self.mountpoint);
        let ended = wait_for_end(session);
        // Only when nothing serves the mount: a process that still holds
        // it could remove a file into the graveyard meanwhile. Else the
        // graveyard waits for the next mount of the backing directory.
        if detached.is_ok() && ended {
            let _serving = self.shared.state();
            match std::fs::remove_dir_all(self.shared.backing.join(names::GRAVEYARD)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        detached
    }
}

/// The session's loop ends once the kernel lets the mount go: waits for
/// it a bounded while, then lets it go (its own unmount finds nothing
/// mounted, so it never takes a later mount at the same place with it).
/// Whether it ended within the wait.
fn wait_for_end(session: fuser::BackgroundSession) -> bool {
    let until = Instant::now() + Duration::from_secs(2);
    while !session.guard.is_finished() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    let ended = session.guard.is_finished();
    drop(session);
    ended
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}
