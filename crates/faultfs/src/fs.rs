//! The filesystem itself: every call passes through to the same path under
//! the backing directory, with the bookkeeping a power loss needs (each
//! file's [`UndoLog`], committed by fsync, fdatasync and O_SYNC/O_DSYNC
//! writes) and the faults in force ([`Faults`]) answered first.
//!
//! Inodes are faultline's own numbers for backing paths (1 is the backing
//! directory), handed out on lookup and moved with renames. Creations,
//! removals and renames go in the names' journal (names.rs); what is
//! removed waits in its graveyard, which no lookup or listing shows. The
//! kernel keeps entries and attributes as long as it likes: only a power
//! loss changes files behind its back, and it mounts afresh. One lock
//! holds the state; file I/O of reads happens outside it.
//!
//! Write-back ([`Caching::WriteBack`]): the kernel sends writes at its own
//! offsets and turns O_APPEND and O_SYNC/O_DSYNC into those offsets and an
//! fsync of its own, so a handle's flags mean nothing here; a handle opened
//! write-only may be asked to read (the kernel fills a page before writing
//! part of it), which every backing file allows.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::{File, Metadata};
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner, OpenFlags,
    RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs,
    ReplyWrite, Request, TimeOrNow, WriteFlags,
};

use crate::log::UndoLog;
use crate::names::{Journal, GRAVEYARD};
use crate::{Faults, Layer};
use faultline_model::faults::Caching;

/// How long the kernel may keep entries and attributes. Every change
/// comes through the mount but a power loss's, which mounts afresh: so
/// long, as a write must not wait for a round trip asking the file's size.
const TTL: Duration = Duration::from_secs(3600);

/// An open file: the backing file, and how it was opened.
struct Handle {
    file: Arc<File>,
    ino: u64,
    /// O_APPEND: each write lands at the end, whatever offset the kernel gives.
    append: bool,
    /// O_SYNC or O_DSYNC: each write is durable when it returns.
    sync: bool,
}

#[derive(Default)]
pub(crate) struct State {
    /// Each inode's path under the backing directory (`""`: the root).
    paths: HashMap<u64, PathBuf>,
    inodes: HashMap<PathBuf, u64>,
    next_ino: u64,
    handles: HashMap<u64, Handle>,
    next_fh: u64,
    /// The files written since their last durable point.
    pub(crate) logs: HashMap<u64, UndoLog>,
    /// The changes of names since they were durable.
    pub(crate) names: Journal,
    /// A power loss reverted the files: a call of the cut-off connection
    /// still under way must not write.
    pub(crate) powered_off: bool,
}

impl State {
    fn ino_of(&mut self, path: &Path) -> u64 {
        if let Some(ino) = self.inodes.get(path) {
            return *ino;
        }
        self.next_ino += 1;
        let ino = self.next_ino;
        self.inodes.insert(path.to_path_buf(), ino);
        self.paths.insert(ino, path.to_path_buf());
        ino
    }

    /// The inodes at `path` and below it, with their paths.
    fn inodes_under(&self, path: &Path) -> Vec<(PathBuf, u64)> {
        self.inodes.iter().filter(|(p, _)| p.starts_with(path)).map(|(p, i)| (p.clone(), *i)).collect()
    }

    /// The inodes at `from` and below it are at `to` now (a rename, or a
    /// removal into the graveyard, where their logs still apply).
    fn move_path(&mut self, from: &Path, to: &Path) {
        for (old, ino) in self.inodes_under(from) {
            // `from` itself, or a path below it (joining "" would add a slash).
            let below = old.strip_prefix(from).expect("filtered by prefix");
            let new = if below.as_os_str().is_empty() { to.to_path_buf() } else { to.join(below) };
            self.inodes.remove(&old);
            self.inodes.insert(new.clone(), ino);
            self.paths.insert(ino, new);
        }
    }

    /// What was at `grave` and below it is gone for good: no log to undo.
    fn forget_under(&mut self, grave: &Path) {
        for (path, ino) in self.inodes_under(grave) {
            self.inodes.remove(&path);
            self.paths.remove(&ino);
            self.logs.remove(&ino);
        }
    }

    /// An fsync: the names' journal is committed, and the files whose
    /// removal it made final are forgotten.
    fn fsynced(&mut self, backing: &Path, dir: Option<&Path>) {
        let emptied = match dir {
            Some(dir) => self.names.dir_fsynced(dir, backing),
            None => self.names.fsynced(backing),
        };
        for grave in emptied {
            self.forget_under(&grave);
        }
    }

    /// The paths whose files have logs, with them.
    pub(crate) fn logged(&mut self) -> Vec<(PathBuf, &mut UndoLog)> {
        let paths = &self.paths;
        self.logs.iter_mut().filter_map(|(ino, log)| Some((paths.get(ino)?.clone(), log))).collect()
    }
}

/// What the mount and its controller share.
pub(crate) struct Shared {
    pub(crate) backing: PathBuf,
    pub(crate) layer: Layer,
    pub(crate) state: Mutex<State>,
    pub(crate) faults: Mutex<Faults>,
}

impl Shared {
    pub(crate) fn new(backing: PathBuf, layer: Layer, faults: Faults) -> Shared {
        let mut state = State { next_ino: 1, ..State::default() };
        state.names.strict = layer.strict_names;
        state.paths.insert(1, PathBuf::new());
        state.inodes.insert(PathBuf::new(), 1);
        Shared { backing, layer, state: Mutex::new(state), faults: Mutex::new(faults) }
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn faults(&self) -> Faults {
        *self.faults.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// How many of `want` bytes the disk takes now: all of them, or what
    /// room a filling disk has left (it is full once that is taken).
    fn room_for(&self, want: usize) -> Result<usize, Errno> {
        let mut faults = self.faults.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if faults.full {
            return Err(Errno::ENOSPC);
        }
        let Some(room) = faults.room else { return Ok(want) };
        let taken = want.min(usize::try_from(room).unwrap_or(usize::MAX));
        faults.room = Some(room - taken as u64);
        if taken < want || room == taken as u64 {
            faults.full = true;
            faults.room = None;
        }
        match taken {
            0 => Err(Errno::ENOSPC),
            n => Ok(n),
        }
    }

    /// Gives back room a write took but could not use (its backing file
    /// refused it) while the disk is still filling. A disk that write
    /// filled stays full: the backing disk's own error most likely says
    /// it is full too. (A disk fault set between the take and the give
    /// back gets the room: a window of one failing write, left open.)
    fn give_back(&self, taken: usize) {
        let mut faults = self.faults.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(room) = faults.room {
            faults.room = Some(room.saturating_add(taken as u64));
        }
    }
}

pub(crate) struct FaultFs(pub(crate) Arc<Shared>);

fn errno(e: io::Error) -> Errno {
    Errno::from(e)
}

fn time(secs: i64, nanos: i64) -> SystemTime {
    match secs >= 0 {
        true => UNIX_EPOCH + Duration::new(secs as u64, nanos as u32),
        false => UNIX_EPOCH,
    }
}

fn kind(meta: &Metadata) -> FileType {
    FileType::from_std(meta.file_type()).unwrap_or(FileType::RegularFile)
}

fn attr(ino: u64, meta: &Metadata) -> FileAttr {
    FileAttr {
        ino: INodeNo(ino),
        size: meta.len(),
        blocks: meta.blocks(),
        atime: time(meta.atime(), meta.atime_nsec()),
        mtime: time(meta.mtime(), meta.mtime_nsec()),
        ctime: time(meta.ctime(), meta.ctime_nsec()),
        crtime: time(meta.ctime(), meta.ctime_nsec()),
        kind: kind(meta),
        perm: (meta.mode() & 0o7777) as u16,
        nlink: meta.nlink() as u32,
        uid: meta.uid(),
        gid: meta.gid(),
        rdev: meta.rdev() as u32,
        blksize: meta.blksize() as u32,
        flags: 0,
    }
}

impl FaultFs {
    fn real(&self, path: &Path) -> PathBuf {
        self.0.backing.join(path)
    }

    /// The backing path of `parent`/`name`.
    fn child(&self, parent: INodeNo, name: &OsStr) -> Result<PathBuf, Errno> {
        if parent.0 == 1 && name == GRAVEYARD {
            return Err(Errno::ENOENT);
        }
        let state = self.0.state();
        let dir = state.paths.get(&parent.0).ok_or(Errno::ENOENT)?;
        Ok(dir.join(name))
    }

    fn path(&self, ino: INodeNo) -> Result<PathBuf, Errno> {
        self.0.state().paths.get(&ino.0).cloned().ok_or(Errno::ENOENT)
    }

    fn entry(&self, path: &Path, reply: ReplyEntry) {
        match std::fs::symlink_metadata(self.real(path)) {
            Ok(meta) => {
                let ino = self.0.state().ino_of(path);
                reply.entry(&TTL, &attr(ino, &meta), Generation(0));
            }
            Err(e) => reply.error(errno(e)),
        }
    }

    fn file(&self, fh: FileHandle) -> Result<(Arc<File>, bool, bool, u64), Errno> {
        let state = self.0.state();
        let h = state.handles.get(&fh.0).ok_or(Errno::EBADF)?;
        Ok((Arc::clone(&h.file), h.append, h.sync, h.ino))
    }

    fn open_handle(&self, ino: u64, file: File, flags: i32) -> u64 {
        // Write-back: the kernel places appends and fsyncs O_SYNC writes itself.
        let through = self.0.layer.caching == Caching::WriteThrough;
        let mut state = self.0.state();
        state.next_fh += 1;
        let fh = state.next_fh;
        let handle = Handle {
            file: Arc::new(file),
            ino,
            append: through && flags & libc::O_APPEND != 0,
            sync: through && flags & (libc::O_SYNC | libc::O_DSYNC) != 0,
        };
        state.handles.insert(fh, handle);
        fh
    }

    /// Opens the backing file as asked, less O_APPEND (writes land where
    /// this layer puts them) and the sync flags (it syncs itself), and
    /// always readable: the undo log reads what a write overwrites.
    fn options(flags: i32) -> std::fs::OpenOptions {
        let mut options = std::fs::OpenOptions::new();
        options.read(true).write(flags & libc::O_ACCMODE != libc::O_RDONLY);
        let kept = flags
            & !(libc::O_ACCMODE
                | libc::O_APPEND
                | libc::O_SYNC
                | libc::O_DSYNC
                | libc::O_CREAT
                | libc::O_EXCL
                | libc::O_TRUNC);
        options.custom_flags(kept);
        options
    }

    /// Makes `ino`'s writes so far durable: its log is committed and the
    /// backing file synced (so an fsync costs what it costs on the disk).
    /// Being an fsync, it commits the names' journal as ext4's would.
    fn commit(&self, ino: u64, file: &File) -> io::Result<()> {
        file.sync_data()?;
        let mut state = self.0.state();
        if let Some(log) = state.logs.get_mut(&ino) {
            log.commit();
        }
        state.fsynced(&self.0.backing, None);
        Ok(())
    }

    /// Moves what is at `path` into the graveyard; where it went.
    fn bury(&self, state: &mut State, path: &Path) -> io::Result<PathBuf> {
        if state.powered_off {
            return Err(power_is_off());
        }
        let grave = state.names.grave();
        std::fs::create_dir_all(self.real(Path::new(GRAVEYARD)))?;
        std::fs::rename(self.real(path), self.real(&grave))?;
        state.move_path(path, &grave);
        Ok(grave)
    }

    /// Renames `from` to `to`, keeping what `to` was in the graveyard (a
    /// file by a second link, so the rename stays atomic; an empty
    /// directory by one made in its place) and the change in the journal.
    fn rename_keeping(&self, state: &mut State, from: &Path, to: &Path) -> io::Result<()> {
        if state.powered_off {
            return Err(power_is_off());
        }
        let replaced = match std::fs::symlink_metadata(self.real(to)) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
            Ok(meta) => Some((state.names.grave(), meta)),
        };
        if let Some((grave, meta)) = &replaced {
            std::fs::create_dir_all(self.real(Path::new(GRAVEYARD)))?;
            match meta.is_dir() {
                false => std::fs::hard_link(self.real(to), self.real(grave))?,
                true => {
                    std::fs::DirBuilder::new().mode(meta.mode() & 0o7777).create(self.real(grave))?;
                    // A keeper that cannot take the owner goes again: nothing half-made stays.
                    if let Err(e) = std::os::unix::fs::lchown(self.real(grave), Some(meta.uid()), Some(meta.gid())) {
                        let _ = std::fs::remove_dir(self.real(grave));
                        return Err(e);
                    }
                }
            }
        }
        if let Err(e) = std::fs::rename(self.real(from), self.real(to)) {
            if let Some((grave, meta)) = &replaced {
                let _ = match meta.is_dir() {
                    true => std::fs::remove_dir(self.real(grave)),
                    false => std::fs::remove_file(self.real(grave)),
                };
            }
            return Err(e);
        }
        if let Some((grave, _)) = &replaced {
            state.move_path(to, grave);
        }
        // The inodes move with their paths.
        state.move_path(from, to);
        state.names.renamed(from, to, replaced.map(|(grave, _)| grave));
        Ok(())
    }

    /// unlink (`dir`: rmdir): what is at `parent`/`name` goes to the
    /// graveyard, as the kernel's own call would check it first.
    fn remove(&self, parent: INodeNo, name: &OsStr, dir: bool) -> Result<(), Errno> {
        let path = self.child(parent, name)?;
        let removed = (|| -> io::Result<()> {
            let is_dir = std::fs::symlink_metadata(self.real(&path))?.is_dir();
            let refused = match (dir, is_dir) {
                (false, true) => Some(libc::EISDIR),
                (true, false) => Some(libc::ENOTDIR),
                (true, true) if std::fs::read_dir(self.real(&path))?.next().is_some() => Some(libc::ENOTEMPTY),
                _ => None,
            };
            if let Some(code) = refused {
                return Err(io::Error::from_raw_os_error(code));
            }
            let mut state = self.0.state();
            let kept = self.bury(&mut state, &path)?;
            state.names.removed(&path, kept);
            Ok(())
        })();
        removed.map_err(errno)
    }
}

/// What a write or a resize finds when a power loss has reverted the files.
fn power_is_off() -> io::Error {
    io::Error::from_raw_os_error(libc::EIO)
}

impl Filesystem for FaultFs {
    fn init(&mut self, _req: &Request, config: &mut fuser::KernelConfig) -> io::Result<()> {
        if self.0.layer.caching == Caching::WriteBack {
            config.add_capabilities(fuser::InitFlags::FUSE_WRITEBACK_CACHE).map_err(|_| {
                io::Error::new(io::ErrorKind::Unsupported, "this kernel's FUSE has no write-back cache")
            })?;
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match self.child(parent, name) {
            Ok(path) => self.entry(&path, reply),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        let meta = match fh.map(|fh| self.file(fh)) {
            Some(Ok((file, ..))) => file.metadata(),
            _ => match self.path(ino) {
                Ok(path) => std::fs::symlink_metadata(self.real(&path)),
                Err(e) => return reply.error(e),
            },
        };
        match meta {
            Ok(meta) => reply.attr(&TTL, &attr(ino.0, &meta)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let path = match self.path(ino) {
            Ok(path) => self.real(&path),
            Err(e) => return reply.error(e),
        };
        let changed = (|| -> io::Result<Metadata> {
            if let Some(size) = size {
                if self.0.faults().full {
                    return Err(io::Error::from_raw_os_error(libc::ENOSPC));
                }
                let file = match fh.map(|fh| self.file(fh)) {
                    Some(Ok((file, ..))) => file,
                    _ => Arc::new(File::options().read(true).write(true).open(&path)?),
                };
                let mut state = self.0.state();
                if state.powered_off {
                    return Err(power_is_off());
                }
                state.logs.entry(ino.0).or_default().before_resize(&file, size)?;
                file.set_len(size)?;
            }
            if let Some(mode) = mode {
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode & 0o7777))?;
            }
            if uid.is_some() || gid.is_some() {
                std::os::unix::fs::lchown(&path, uid, gid)?;
            }
            std::fs::symlink_metadata(&path)
        })();
        match changed {
            Ok(meta) => reply.attr(&TTL, &attr(ino.0, &meta)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn mkdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        let path = match self.child(parent, name) {
            Ok(path) => path,
            Err(e) => return reply.error(e),
        };
        if self.0.faults().full {
            return reply.error(Errno::ENOSPC);
        }
        // A call of a connection the power loss cut, still under way.
        if self.0.state().powered_off {
            return reply.error(Errno::EIO);
        }
        let made = std::fs::DirBuilder::new().mode(mode & !umask & 0o7777).create(self.real(&path));
        match made {
            Ok(()) => {
                self.0.state().names.created(&path);
                self.entry(&path, reply)
            }
            Err(e) => reply.error(errno(e)),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.remove(parent, name, false) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.remove(parent, name, true) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if flags.bits() != 0 {
            return reply.error(Errno::EINVAL);
        }
        let (from, to) = match (self.child(parent, name), self.child(newparent, newname)) {
            (Ok(from), Ok(to)) => (from, to),
            (Err(e), _) | (_, Err(e)) => return reply.error(e),
        };
        let mut state = self.0.state();
        match self.rename_keeping(&mut state, &from, &to) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let path = match self.path(ino) {
            Ok(path) => self.real(&path),
            Err(e) => return reply.error(e),
        };
        match Self::options(flags.0).open(path) {
            Ok(file) => reply.opened(FileHandle(self.open_handle(ino.0, file, flags.0)), FopenFlags::empty()),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let path = match self.child(parent, name) {
            Ok(path) => path,
            Err(e) => return reply.error(e),
        };
        if self.0.faults().full {
            return reply.error(Errno::ENOSPC);
        }
        // A call of a connection the power loss cut, still under way.
        if self.0.state().powered_off {
            return reply.error(Errno::EIO);
        }
        let mut options = Self::options(flags);
        options.write(true).mode(mode & !umask & 0o7777);
        match flags & libc::O_EXCL != 0 {
            true => options.create_new(true),
            false => options.create(true),
        };
        let existed = std::fs::symlink_metadata(self.real(&path)).is_ok();
        let created = options.open(self.real(&path)).and_then(|file| Ok((file.metadata()?, file)));
        match created {
            Ok((meta, file)) => {
                let ino = {
                    let mut state = self.0.state();
                    if !existed {
                        state.names.created(&path);
                    }
                    state.ino_of(&path)
                };
                let fh = self.open_handle(ino, file, flags);
                reply.created(&TTL, &attr(ino, &meta), Generation(0), FileHandle(fh), FopenFlags::empty());
            }
            Err(e) => reply.error(errno(e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let file = match self.file(fh) {
            Ok((file, ..)) => file,
            Err(e) => return reply.error(e),
        };
        let mut buf = vec![0; size as usize];
        let mut filled = 0;
        while filled < buf.len() {
            match file.read_at(&mut buf[filled..], offset + filled as u64) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return reply.error(errno(e)),
            }
        }
        reply.data(&buf[..filled]);
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let faults = self.0.faults();
        if faults.full {
            return reply.error(Errno::ENOSPC);
        }
        if faults.write_error {
            return reply.error(Errno::EIO);
        }
        std::thread::sleep(faults.slow_write);
        let written = (|| -> Result<(usize, Arc<File>, bool, u64), Errno> {
            // The handle, the power, the room, the log and the write under
            // one lock: a power loss never lands between them, and a write
            // refused before it reaches the disk takes none of its room.
            let mut state = self.0.state();
            let handle = state.handles.get(&fh.0).ok_or(Errno::EBADF)?;
            let (file, append, sync, ino) = (Arc::clone(&handle.file), handle.append, handle.sync, handle.ino);
            if state.powered_off {
                return Err(errno(power_is_off()));
            }
            // A filling disk takes what room it has left: a short write.
            let n = self.0.room_for(data.len())?;
            let at = (!append).then_some(offset);
            let logged = state.logs.entry(ino).or_default().before_write(&file, at, n as u64);
            if let Err(e) = logged.and_then(|at| file.write_all_at(&data[..n], at)) {
                self.0.give_back(n);
                return Err(errno(e));
            }
            Ok((n, file, sync, ino))
        })();
        let (written, file, sync, ino) = match written {
            Ok(w) => w,
            Err(e) => return reply.error(e),
        };
        let through = self.0.layer.caching == Caching::WriteThrough;
        if sync || (through && flags.0 & (libc::O_SYNC | libc::O_DSYNC) != 0) {
            if let Err(e) = self.commit(ino, &file) {
                return reply.error(errno(e));
            }
        }
        reply.written(written as u32);
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.0.state().handles.remove(&fh.0);
        reply.ok();
    }

    /// Must be answered: a filesystem without fsync makes the kernel call
    /// every later fsync a success without asking.
    fn fsync(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        let faults = self.0.faults();
        std::thread::sleep(faults.slow_fsync);
        if faults.fsync_error {
            return reply.error(Errno::EIO);
        }
        if faults.full {
            return reply.error(Errno::ENOSPC);
        }
        let done = self.file(fh).map(|(file, _, _, ino)| self.commit(ino, &file));
        match done {
            Ok(Ok(())) => reply.ok(),
            Ok(Err(e)) => reply.error(errno(e)),
            Err(e) => reply.error(e),
        }
    }

    /// Makes the changes of names in the directory durable (and, being an
    /// fsync, every earlier one as ext4 has it).
    fn fsyncdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        let faults = self.0.faults();
        std::thread::sleep(faults.slow_fsync);
        if faults.fsync_error {
            return reply.error(Errno::EIO);
        }
        let dir = match self.path(ino) {
            Ok(dir) => dir,
            Err(e) => return reply.error(e),
        };
        match File::open(self.real(&dir)).and_then(|d| d.sync_all()) {
            Ok(()) => {
                self.0.state().fsynced(&self.0.backing, Some(&dir));
                reply.ok()
            }
            Err(e) => reply.error(errno(e)),
        }
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let dir = match self.path(ino) {
            Ok(path) => path,
            Err(e) => return reply.error(e),
        };
        let listed = match std::fs::read_dir(self.real(&dir)) {
            Ok(entries) => entries.collect::<io::Result<Vec<_>>>(),
            Err(e) => return reply.error(errno(e)),
        };
        let mut entries = match listed {
            Ok(entries) => entries,
            Err(e) => return reply.error(errno(e)),
        };
        entries.sort_by_key(|e| e.file_name());
        let parent = dir.parent().map(Path::to_path_buf).unwrap_or_default();
        let mut all = vec![(ino.0, FileType::Directory, ".".into())];
        let parent_ino = self.0.state().ino_of(&parent);
        all.push((parent_ino, FileType::Directory, "..".into()));
        for e in entries.into_iter().filter(|e| !(ino.0 == 1 && e.file_name() == GRAVEYARD)) {
            let kind = e.file_type().ok().and_then(FileType::from_std).unwrap_or(FileType::RegularFile);
            let child = self.0.state().ino_of(&dir.join(e.file_name()));
            all.push((child, kind, e.file_name()));
        }
        for (i, (child, kind, name)) in all.into_iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(child), i as u64 + 1, kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let path = std::ffi::CString::new(self.0.backing.as_os_str().as_encoded_bytes()).unwrap_or_default();
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: a NUL-terminated path and a statvfs to fill, both owned here.
        if unsafe { libc::statvfs(path.as_ptr(), &mut st) } != 0 {
            return reply.error(errno(io::Error::last_os_error()));
        }
        let (bfree, bavail) = match self.0.faults().full {
            true => (0, 0),
            false => (st.f_bfree, st.f_bavail),
        };
        reply.statfs(
            st.f_blocks,
            bfree,
            bavail,
            st.f_files,
            st.f_ffree,
            st.f_bsize as u32,
            st.f_namemax as u32,
            st.f_frsize as u32,
        );
    }
}
