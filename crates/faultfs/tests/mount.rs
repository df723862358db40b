//! The fault filesystem mounted for real (/dev/fuse, as root): files written
//! through it, synced or not, then a power loss, in both caching modes; the
//! disk faults as a program sees them; and the mount gone from the mount
//! table afterwards.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use faultline_faultfs::{mount, stale, Faults, Layer, Mounted, Names};
use faultline_model::faults::Caching;

fn mounted(label: &str, caching: Caching) -> (tempfile::TempDir, Mounted) {
    mounted_for(label, Layer { caching, strict_names: false })
}

fn mounted_for(label: &str, layer: Layer) -> (tempfile::TempDir, Mounted) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("backing")).unwrap();
    std::fs::create_dir(dir.path().join("mnt")).unwrap();
    std::fs::write(dir.path().join("backing/existing"), b"there before").unwrap();
    let m = mount(&dir.path().join("backing"), &dir.path().join("mnt"), label, layer).unwrap();
    (dir, m)
}

fn read(path: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    File::open(path).unwrap().read_to_end(&mut out).unwrap();
    out
}

fn append(path: &Path) -> File {
    OpenOptions::new().create(true).append(true).open(path).unwrap()
}

#[test]
fn a_power_loss_keeps_what_was_synced_and_loses_the_rest() {
    for caching in [Caching::WriteThrough, Caching::WriteBack] {
        keeps_what_was_synced(caching);
    }
}

fn keeps_what_was_synced(caching: Caching) {
    let (dir, mut m) = mounted("power-loss", caching);
    let mnt = m.mountpoint().to_path_buf();
    assert_eq!(read(&mnt.join("existing")), b"there before");
    let mut log = append(&mnt.join("log"));
    log.write_all(b"one;").unwrap();
    log.sync_data().unwrap();
    log.write_all(b"two;").unwrap();
    log.write_all(b"three;").unwrap();
    let mut sync = OpenOptions::new().create(true).write(true).custom_flags_dsync().open(mnt.join("dsync")).unwrap();
    sync.write_all(b"durable by O_DSYNC").unwrap();
    std::fs::write(mnt.join("existing"), b"overwritten").unwrap();
    drop((log, sync));
    assert_eq!(read(&mnt.join("log")), b"one;two;three;");

    let lost = m.power_loss(None, Names::Ordered).unwrap();
    assert!(lost.failed.is_empty(), "{lost}");
    // Write-back hands the kernel's pages over as it likes: whole pages, runs together.
    if caching == Caching::WriteThrough {
        assert_eq!((lost.files, lost.changes, lost.bytes), (2, 4, 21), "{lost}");
    }
    assert_eq!(read(&mnt.join("log")), b"one;", "through the mount");
    assert_eq!(read(&dir.path().join("backing/log")), b"one;", "on the disk");
    assert_eq!(read(&mnt.join("dsync")), b"durable by O_DSYNC");
    assert_eq!(read(&mnt.join("existing")), b"there before", "the truncation and the overwrite are undone");
    // Writing on after it lands after what survived.
    let mut log = append(&mnt.join("log"));
    log.write_all(b"four;").unwrap();
    drop(log);
    assert_eq!(read(&mnt.join("log")), b"one;four;");
    m.unmount().unwrap();
}

/// The way a server replaces a file (a temp file, fsynced, renamed over
/// it) and moves a directory: the renames, the new file and a removal
/// are undone by a power loss before any fsync follows them, and kept
/// (as ext4's journal keeps them) once one does, whichever file it syncs.
#[test]
fn changes_of_names_survive_once_an_fsync_follows_them() {
    for synced_after in [false, true] {
        let (_dir, mut m) = mounted("renames", Caching::WriteBack);
        let mnt = m.mountpoint().to_path_buf();
        std::fs::create_dir(mnt.join("d")).unwrap();
        for (name, content) in [("d/manifest", "old"), ("d/temp", "new manifest"), ("d/history", "h")] {
            let mut f = File::create(mnt.join(name)).unwrap();
            f.write_all(content.as_bytes()).unwrap();
            f.sync_all().unwrap();
        }
        std::fs::rename(mnt.join("d/temp"), mnt.join("d/manifest")).unwrap();
        std::fs::remove_file(mnt.join("d/history")).unwrap();
        std::fs::write(mnt.join("d/unsynced"), b"gone").unwrap();
        std::fs::rename(mnt.join("d"), mnt.join("e")).unwrap();
        assert_eq!(read(&mnt.join("e/manifest")), b"new manifest");
        if synced_after {
            File::open(mnt.join("existing")).unwrap().sync_all().unwrap();
        }
        let lost = m.power_loss(None, Names::Ordered).unwrap();
        assert!(lost.failed.is_empty(), "{lost}");
        let listed = |dir: &str| -> Vec<String> {
            let mut names: Vec<String> = std::fs::read_dir(mnt.join(dir))
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            names.sort();
            names
        };
        if synced_after {
            assert_eq!(lost.names, 0, "{lost}");
            assert_eq!(read(&mnt.join("e/manifest")), b"new manifest");
            assert_eq!(read(&mnt.join("e/unsynced")), b"", "its name durable, its write not");
            assert_eq!(listed("e"), ["manifest", "unsynced"]);
        } else {
            assert_eq!(lost.names, 4, "{lost}");
            assert!(!mnt.join("e").exists());
            assert_eq!(listed("d"), ["history", "manifest", "temp"]);
            assert_eq!(read(&mnt.join("d/manifest")), b"old");
            assert_eq!(read(&mnt.join("d/temp")), b"new manifest");
            assert_eq!(read(&mnt.join("d/history")), b"h", "the removed file is back");
        }
        let top = if synced_after { ["e", "existing"] } else { ["d", "existing"] };
        assert_eq!(listed(""), top, "the graveyard never shows");
        m.unmount().unwrap();
    }
}

/// A file removed with writes it never synced: once the removal is
/// durable (an fsync follows it) the file is gone for good, from the
/// graveyard too, and a power loss has nothing of it left to undo.
#[test]
fn a_removal_made_durable_is_final() {
    let (dir, mut m) = mounted("removed", Caching::WriteThrough);
    let mnt = m.mountpoint().to_path_buf();
    let mut wal = append(&mnt.join("wal"));
    wal.write_all(b"synced;").unwrap();
    wal.sync_data().unwrap();
    wal.write_all(b"never synced;").unwrap();
    drop(wal);
    std::fs::remove_file(mnt.join("wal")).unwrap();
    File::open(mnt.join("existing")).unwrap().sync_all().unwrap();
    let graveyard = dir.path().join("backing/.faultline-removed");
    assert_eq!(std::fs::read_dir(&graveyard).map(|d| d.count()).unwrap_or(0), 0, "nothing kept past its fsync");
    let lost = m.power_loss(None, Names::Ordered).unwrap();
    assert!(lost.failed.is_empty() && lost.names == 0, "{lost}");
    assert!(!mnt.join("wal").exists());
    m.unmount().unwrap();
}

/// A removal not yet durable waits in the graveyard for a power loss that
/// could undo it; once the mount is gone none can, and nothing of it is
/// left in the backing directory.
#[test]
fn an_unmount_leaves_no_removal_behind() {
    let (dir, m) = mounted("unmounted", Caching::WriteBack);
    let mnt = m.mountpoint().to_path_buf();
    std::fs::write(mnt.join("segment"), b"compacted away").unwrap();
    std::fs::remove_file(mnt.join("segment")).unwrap();
    let graveyard = dir.path().join("backing/.faultline-removed");
    assert!(std::fs::read_dir(&graveyard).unwrap().count() > 0, "kept until it is durable");
    m.unmount().unwrap();
    assert!(!graveyard.exists());
    let left: Vec<_> = std::fs::read_dir(dir.path().join("backing")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, ["existing"]);
}

/// POSIX's letter: a file created, written and fsynced in a new directory,
/// and that directory fsynced, is lost with the directory when nothing
/// fsynced the directory holding it; ext4's order keeps it.
#[test]
fn strict_names_need_each_directory_fsynced() {
    for names in [Names::Strict, Names::Ordered] {
        let layer = Layer { caching: Caching::WriteBack, strict_names: names == Names::Strict };
        let (dir, mut m) = mounted_for("strict", layer);
        let mnt = m.mountpoint().to_path_buf();
        std::fs::create_dir(mnt.join("appendonlydir")).unwrap();
        let mut f = File::create(mnt.join("appendonlydir/aof")).unwrap();
        f.write_all(b"acknowledged").unwrap();
        f.sync_all().unwrap();
        File::open(mnt.join("appendonlydir")).unwrap().sync_all().unwrap();
        drop(f);
        let lost = m.power_loss(None, names).unwrap();
        assert!(lost.failed.is_empty(), "{lost}");
        match names {
            Names::Strict => {
                assert_eq!(lost.names, 1, "{lost}");
                assert!(!mnt.join("appendonlydir").exists());
                assert!(!dir.path().join("backing/appendonlydir").exists());
            }
            Names::Ordered => {
                assert_eq!(lost.names, 0, "{lost}");
                assert_eq!(read(&mnt.join("appendonlydir/aof")), b"acknowledged");
            }
        }
        m.unmount().unwrap();
    }
}

#[test]
fn a_torn_power_loss_keeps_a_prefix_its_seed_repeats() {
    let outcome = |seed: u64| {
        let (_dir, mut m) = mounted("torn", Caching::WriteThrough);
        // Created and synced empty: its name survives, its writes are torn.
        File::create(m.mountpoint().join("log")).unwrap().sync_all().unwrap();
        let mut log = append(&m.mountpoint().join("log"));
        for i in 0..20 {
            log.write_all(format!("write {i:02};").as_bytes()).unwrap();
        }
        drop(log);
        m.power_loss(Some(seed), Names::Ordered).unwrap();
        read(&m.mountpoint().join("log"))
    };
    let whole: Vec<u8> = (0..20).flat_map(|i| format!("write {i:02};").into_bytes()).collect();
    let (first, again) = (outcome(7), outcome(7));
    assert_eq!(first, again, "the same seed tears the same way");
    assert!(whole.starts_with(&first) && first.len() < whole.len(), "a prefix survives: {first:?}");
}

/// Write-back: the server is killed with its file open and unsynced
/// writes in the kernel's cache. The power loss cuts the connection (an
/// fsync of the dead server's descriptor answers ENOTCONN), and the fresh mount serves
/// the file as its last fsync left it: no page and no size of the
/// kernel's survives.
#[test]
fn the_kernels_cache_goes_with_the_power() {
    let (dir, mut m) = mounted("cache", Caching::WriteBack);
    let mnt = m.mountpoint().to_path_buf();
    let mut server = append(&mnt.join("aof"));
    server.write_all(b"acknowledged after fsync;").unwrap();
    server.sync_data().unwrap();
    server.write_all(&[b'x'; 100_000]).unwrap();
    assert_eq!(std::fs::metadata(mnt.join("aof")).unwrap().len(), 100_025, "the kernel's size");
    m.power_loss(None, Names::Ordered).unwrap();
    // The dead server's descriptor: a write may still land in the dead
    // connection's cache, but nothing reaches the disk.
    let _ = server.write_all(b"after");
    let e = server.sync_data().unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOTCONN), "{e}");
    drop(server);
    assert_eq!(std::fs::metadata(mnt.join("aof")).unwrap().len(), 25);
    assert_eq!(read(&mnt.join("aof")), b"acknowledged after fsync;");
    assert_eq!(read(&dir.path().join("backing/aof")), b"acknowledged after fsync;");
    let ours: Vec<_> =
        stale::mounts().unwrap().into_iter().filter(|f| f.mountpoint == mnt.canonicalize().unwrap()).collect();
    assert_eq!(ours.len(), 1, "one mount serves the place: {ours:?}");
    let mut again = append(&mnt.join("aof"));
    again.write_all(b"next;").unwrap();
    again.sync_data().unwrap();
    assert_eq!(read(&dir.path().join("backing/aof")), b"acknowledged after fsync;next;");
    m.unmount().unwrap();
}

#[test]
fn disk_faults_answer_as_a_failing_disk_would_and_heal() {
    let (_dir, mut m) = mounted("faults", Caching::WriteThrough);
    let path = m.mountpoint().join("data");
    let mut file = append(&path);
    m.set_faults(Faults { full: true, ..Faults::default() });
    let e = file.write_all(b"x").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
    assert_eq!(File::create(m.mountpoint().join("new")).unwrap_err().raw_os_error(), Some(libc::ENOSPC));
    m.set_faults(Faults { fsync_error: true, ..Faults::default() });
    file.write_all(b"written").unwrap();
    assert_eq!(file.sync_data().unwrap_err().raw_os_error(), Some(libc::EIO));
    m.set_faults(Faults { slow_fsync: Duration::from_millis(200), ..Faults::default() });
    let started = Instant::now();
    file.sync_data().unwrap();
    assert!(started.elapsed() >= Duration::from_millis(200));
    m.set_faults(Faults::default());
    file.write_all(b" again").unwrap();
    file.sync_data().unwrap();
    drop(file);
    assert_eq!(m.power_loss(None, Names::Ordered).unwrap().changes, 0, "all synced");
    assert_eq!(read(&path), b"written again");
}

/// A disk that fills: it takes `room` more bytes, the write that reaches
/// the end is cut short there, and everything after answers ENOSPC.
#[test]
fn a_filling_disk_takes_its_room_then_is_full() {
    let (_dir, m) = mounted("filling", Caching::WriteThrough);
    let mut file = append(&m.mountpoint().join("data"));
    m.set_faults(Faults { room: Some(10), ..Faults::default() });
    file.write_all(b"123456").unwrap();
    assert_eq!(file.write(b"7890abc").unwrap(), 4, "cut short at the end of the room");
    assert_eq!(file.write(b"x").unwrap_err().raw_os_error(), Some(libc::ENOSPC));
    assert!(m.faults().full, "{}", m.faults());
    m.set_faults(Faults::default());
    file.write_all(b"!").unwrap();
    drop(file);
    assert_eq!(read(&m.mountpoint().join("data")), b"1234567890!");
}

#[test]
fn an_unmounted_fault_filesystem_leaves_the_mount_table() {
    let (dir, m) = mounted("gone", Caching::WriteBack);
    let mnt = m.mountpoint().canonicalize().unwrap();
    let ours = |mounts: Vec<stale::FaultMount>| mounts.into_iter().any(|f| f.mountpoint == mnt);
    let listed: Vec<_> = stale::mounts().unwrap().into_iter().filter(|f| f.mountpoint == mnt).collect();
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0].pid, listed[0].label.as_str(), listed[0].orphaned()), (std::process::id(), "gone", false));
    m.unmount().unwrap();
    assert!(!ours(stale::mounts().unwrap()));
    assert!(!dir.path().join("mnt/existing").exists(), "the mountpoint is the empty directory again");
    assert_eq!(std::fs::read_dir(dir.path().join("mnt")).unwrap().count(), 0);
    assert!(matches!(stale::unmount(&mnt).unwrap_err().kind(), ErrorKind::InvalidInput));
}

/// O_DSYNC on an OpenOptions, without an extension trait import at each use.
trait Dsync {
    fn custom_flags_dsync(&mut self) -> &mut Self;
}

impl Dsync for OpenOptions {
    fn custom_flags_dsync(&mut self) -> &mut Self {
        std::os::unix::fs::OpenOptionsExt::custom_flags(self, libc::O_DSYNC)
    }
}
