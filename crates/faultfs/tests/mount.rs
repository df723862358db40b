//! The fault filesystem mounted for real (/dev/fuse, as root): files written
//! through it, synced or not, then a power loss; the disk faults as a
//! program sees them; and the mount gone from the mount table afterwards.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use faultline_faultfs::{mount, stale, Faults, Mounted};

fn mounted(label: &str) -> (tempfile::TempDir, Mounted) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("backing")).unwrap();
    std::fs::create_dir(dir.path().join("mnt")).unwrap();
    std::fs::write(dir.path().join("backing/existing"), b"there before").unwrap();
    let m = mount(&dir.path().join("backing"), &dir.path().join("mnt"), label).unwrap();
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
    let (dir, m) = mounted("power-loss");
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

    let lost = m.power_loss(None);
    assert_eq!((lost.files, lost.changes, lost.bytes), (2, 4, 21), "{lost}");
    assert!(lost.failed.is_empty(), "{lost}");
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
/// it) and moves a directory: both reachable by their new names, with
/// what was synced in them, after a power loss too.
#[test]
fn renamed_files_and_directories_keep_their_content() {
    let (_dir, m) = mounted("renames");
    let mnt = m.mountpoint().to_path_buf();
    std::fs::create_dir(mnt.join("d")).unwrap();
    for (name, content) in [("d/manifest", "old"), ("d/temp", "new manifest")] {
        let mut f = File::create(mnt.join(name)).unwrap();
        f.write_all(content.as_bytes()).unwrap();
        f.sync_all().unwrap();
    }
    std::fs::rename(mnt.join("d/temp"), mnt.join("d/manifest")).unwrap();
    assert!(std::fs::metadata(mnt.join("d/manifest")).unwrap().is_file());
    std::fs::write(mnt.join("d/unsynced"), b"gone").unwrap();
    std::fs::rename(mnt.join("d"), mnt.join("e")).unwrap();
    assert_eq!(read(&mnt.join("e/manifest")), b"new manifest");
    m.power_loss(None);
    assert_eq!(read(&mnt.join("e/manifest")), b"new manifest");
    assert_eq!(read(&mnt.join("e/unsynced")), b"", "created (names are durable at once), its writes not");
}

#[test]
fn a_torn_power_loss_keeps_a_prefix_its_seed_repeats() {
    let outcome = |seed: u64| {
        let (_dir, m) = mounted("torn");
        let mut log = append(&m.mountpoint().join("log"));
        for i in 0..20 {
            log.write_all(format!("write {i:02};").as_bytes()).unwrap();
        }
        drop(log);
        m.power_loss(Some(seed));
        read(&m.mountpoint().join("log"))
    };
    let whole: Vec<u8> = (0..20).flat_map(|i| format!("write {i:02};").into_bytes()).collect();
    let (first, again) = (outcome(7), outcome(7));
    assert_eq!(first, again, "the same seed tears the same way");
    assert!(whole.starts_with(&first) && first.len() < whole.len(), "a prefix survives: {first:?}");
}

#[test]
fn disk_faults_answer_as_a_failing_disk_would_and_heal() {
    let (_dir, m) = mounted("faults");
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
    assert_eq!(m.power_loss(None).changes, 0, "all synced");
    assert_eq!(read(&path), b"written again");
}

#[test]
fn an_unmounted_fault_filesystem_leaves_the_mount_table() {
    let (dir, m) = mounted("gone");
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
