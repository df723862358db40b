//! The names' journal: creations, removals and renames since they were
//! last made durable, so a power loss can undo them as it undoes writes.
//!
//! When is a change of names durable? POSIX's letter: once its directory
//! is fsynced ([`Names::Strict`]). What ext4 (data=ordered) does, and what
//! servers written against it count on: once any fsync follows it, since
//! one journal commit carries every metadata change before it
//! ([`Names::Ordered`], the default). The journal keeps both answers for
//! each change, and the power loss asks the one its fault chose.
//!
//! A removed file's data must be there to put back: a removal (unlink,
//! rmdir, a rename over a file) moves it into the graveyard, a hidden
//! directory of the backing directory, until the removal is durable as
//! the mount's power losses ask (strictly only where one of them may be
//! strict: else the graveyard would keep every file a server that never
//! fsyncs its directories removed), the power loss is over, or the mount
//! is gone (an unmount empties it).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use schemars::JsonSchema;
use serde::Deserialize;

/// The graveyard's name in the backing directory, which the mount never shows.
pub(crate) const GRAVEYARD: &str = ".faultline-removed";

/// When a creation, removal or rename is durable.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Names {
    /// Once any fsync follows it (ext4's journal commits every earlier
    /// change of names with it).
    #[default]
    Ordered,
    /// Only once its directory (each, for a rename across two) is fsynced,
    /// as POSIX promises no more.
    Strict,
}

/// One change of names.
enum Change {
    /// A file or directory created at `path`.
    Created { path: PathBuf },
    /// What was at `path` removed, kept in the graveyard at `kept`.
    Removed { path: PathBuf, kept: PathBuf },
    /// `from` renamed to `to`; what `to` was is in the graveyard at `replaced`.
    Renamed { from: PathBuf, to: PathBuf, replaced: Option<PathBuf> },
}

struct Entry {
    change: Change,
    /// An fsync has followed it.
    ordered: bool,
    /// The directories still to be fsynced for it to be durable strictly.
    unsynced_dirs: Vec<PathBuf>,
}

impl Entry {
    fn durable(&self, names: Names) -> bool {
        match names {
            Names::Ordered => self.ordered,
            Names::Strict => self.unsynced_dirs.is_empty(),
        }
    }
}

fn parent(path: &Path) -> PathBuf {
    path.parent().map(Path::to_path_buf).unwrap_or_default()
}

/// Names given in graveyards so far, by every mount of this process: a
/// grave's name is never taken, even by what an earlier mount left.
static BURIED: AtomicU64 = AtomicU64::new(0);

/// The changes of names since they were durable, oldest first.
#[derive(Default)]
pub(crate) struct Journal {
    entries: Vec<Entry>,
    /// A power loss of this mount may be strict: keep each change until
    /// its directory is fsynced, not only until the next fsync.
    pub(crate) strict: bool,
}

impl Journal {
    fn push(&mut self, change: Change, mut dirs: Vec<PathBuf>) {
        dirs.dedup();
        self.entries.push(Entry { change, ordered: false, unsynced_dirs: dirs });
    }

    pub(crate) fn created(&mut self, path: &Path) {
        self.push(Change::Created { path: path.to_path_buf() }, vec![parent(path)]);
    }

    /// A place in the graveyard (relative to the backing directory) for
    /// something about to be removed.
    pub(crate) fn grave(&mut self) -> PathBuf {
        let n = BURIED.fetch_add(1, Ordering::Relaxed) + 1;
        Path::new(GRAVEYARD).join(format!("{}-{n}", std::process::id()))
    }

    pub(crate) fn removed(&mut self, path: &Path, kept: PathBuf) {
        self.push(Change::Removed { path: path.to_path_buf(), kept }, vec![parent(path)]);
    }

    pub(crate) fn renamed(&mut self, from: &Path, to: &Path, replaced: Option<PathBuf>) {
        // A directory moved: what waits for an fsync of it (or of one in
        // it) waits for it under its new name.
        for e in &mut self.entries {
            for dir in &mut e.unsynced_dirs {
                if let Ok(below) = dir.strip_prefix(from) {
                    *dir = if below.as_os_str().is_empty() { to.to_path_buf() } else { to.join(below) };
                }
            }
        }
        let dirs = vec![parent(from), parent(to)];
        self.push(Change::Renamed { from: from.to_path_buf(), to: to.to_path_buf(), replaced }, dirs);
    }

    /// An fsync (of anything): every change so far is durable as ext4 has
    /// it. The graves emptied, whose files are gone for good.
    pub(crate) fn fsynced(&mut self, backing: &Path) -> Vec<PathBuf> {
        for e in &mut self.entries {
            e.ordered = true;
        }
        self.forget_durable(backing)
    }

    /// `dir` was fsynced: the changes in it are durable as POSIX has it
    /// (and, being an fsync, as ext4 has it). The graves emptied.
    pub(crate) fn dir_fsynced(&mut self, dir: &Path, backing: &Path) -> Vec<PathBuf> {
        for e in &mut self.entries {
            e.unsynced_dirs.retain(|d| d != dir);
        }
        self.fsynced(backing)
    }

    /// Changes no power loss of this mount can undo any more are
    /// forgotten, and what they removed is removed for good; the graves
    /// emptied.
    fn forget_durable(&mut self, backing: &Path) -> Vec<PathBuf> {
        let strict = self.strict;
        let mut emptied = Vec::new();
        self.entries.retain(|e| {
            let done = e.durable(Names::Ordered) && (!strict || e.durable(Names::Strict));
            if done {
                let kept = match &e.change {
                    Change::Removed { kept, .. } => Some(kept),
                    Change::Renamed { replaced, .. } => replaced.as_ref(),
                    Change::Created { .. } => None,
                };
                if let Some(kept) = kept {
                    // Best effort: what is left goes with the graveyard at the next power loss.
                    let _ = remove_any(&backing.join(kept));
                    emptied.push(kept.clone());
                }
            }
            !done
        });
        emptied
    }

    /// Undoes, newest first, every change not durable as `names` has it,
    /// then empties the graveyard. The count of changes undone, and what
    /// could not be undone.
    pub(crate) fn revert(&mut self, backing: &Path, names: Names) -> (usize, Vec<String>) {
        let (mut undone, mut failed) = (0, Vec::new());
        let real = |p: &Path| backing.join(p);
        for entry in std::mem::take(&mut self.entries).into_iter().rev() {
            if entry.durable(names) {
                continue;
            }
            let (path, result) = match &entry.change {
                // What was created in a created directory afterwards is not
                // reachable without it either.
                Change::Created { path } => (path, remove_any(&real(path))),
                Change::Removed { path, kept } => (path, put_back(&real(kept), &real(path))),
                Change::Renamed { from, to, replaced } => (
                    to,
                    put_back(&real(to), &real(from)).and_then(|()| match replaced {
                        Some(kept) => put_back(&real(kept), &real(to)),
                        None => Ok(()),
                    }),
                ),
            };
            match result {
                Ok(()) => undone += 1,
                Err(e) => failed.push(format!("{}: {e}", path.display())),
            }
        }
        if let Err(e) = empty(&real(Path::new(GRAVEYARD))) {
            failed.push(format!("{GRAVEYARD}: {e}"));
        }
        (undone, failed)
    }
}

/// Renames `from` back to `to`, never over what is there: under strict
/// names a later change kept may have taken the place (a file created
/// where one was moved away), and it must not be destroyed.
fn put_back(from: &Path, to: &Path) -> io::Result<()> {
    let c = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_encoded_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL byte"))
    };
    let (from, to) = (c(from)?, c(to)?);
    // SAFETY: two NUL-terminated paths owned here.
    let done =
        unsafe { libc::renameat2(libc::AT_FDCWD, from.as_ptr(), libc::AT_FDCWD, to.as_ptr(), libc::RENAME_NOREPLACE) };
    match done {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// Removes a file, or a directory with everything in it.
fn remove_any(path: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(path)?.is_dir() {
        true => std::fs::remove_dir_all(path),
        false => std::fs::remove_file(path),
    }
}

/// Removes everything in `dir` (there or not).
fn empty(dir: &Path) -> io::Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for entry in entries {
        remove_any(&entry?.path())?;
    }
    Ok(())
}
