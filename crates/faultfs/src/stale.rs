//! Fault filesystems faultline mounted, found in the mount table by the
//! name each carries (`faultline-faultfs:PID:LABEL`, the mount's source),
//! and removed lazily. A mount whose process is gone answers ENOTCONN to
//! every call; nothing here touches the mountpoint itself (no stat, no
//! walk), so a mount whose server hangs cannot hang teardown either.

use std::io;
use std::path::{Path, PathBuf};

const PREFIX: &str = "faultline-faultfs:";

/// The name a mount made by process `pid` carries in the mount table.
pub fn fs_name(pid: u32, label: &str) -> String {
    format!("{PREFIX}{pid}:{label}")
}

/// One fault filesystem in the mount table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultMount {
    pub mountpoint: PathBuf,
    /// The process that serves it (or did).
    pub pid: u32,
    pub label: String,
}

impl FaultMount {
    /// Whether the process that mounted it is gone, so nothing serves it.
    pub fn orphaned(&self) -> bool {
        !Path::new(&format!("/proc/{}", self.pid)).exists()
    }
}

/// The fault filesystems mounted on this machine now.
pub fn mounts() -> io::Result<Vec<FaultMount>> {
    Ok(parse(&std::fs::read_to_string("/proc/self/mountinfo")?))
}

/// Mountinfo's octal escapes (`\040` for a space) undone.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|d| u8::from_str_radix(std::str::from_utf8(d).ok()?, 8).ok());
        match (bytes[i], octal) {
            (b'\\', Some(byte)) => {
                out.push(byte);
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The fault filesystems in a mountinfo text (`ID PARENT MAJ:MIN ROOT
/// MOUNTPOINT OPTIONS [OPTIONAL…] - FSTYPE SOURCE SUPEROPTIONS`).
pub fn parse(mountinfo: &str) -> Vec<FaultMount> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let mountpoint = fields.get(4)?;
            let dash = fields.iter().position(|f| *f == "-")?;
            let (fstype, source) = (fields.get(dash + 1)?, fields.get(dash + 2)?);
            if !fstype.starts_with("fuse") {
                return None;
            }
            let (pid, label) =
                unescape(source).strip_prefix(PREFIX)?.split_once(':').map(|(p, l)| (p.to_string(), l.to_string()))?;
            Some(FaultMount { mountpoint: PathBuf::from(unescape(mountpoint)), pid: pid.parse().ok()?, label })
        })
        .collect()
}

/// Detaches the mount at `mountpoint` (MNT_DETACH: processes holding files
/// in it keep them until they let go; the path is free at once).
pub fn unmount(mountpoint: &Path) -> io::Result<()> {
    umount2(mountpoint, libc::MNT_DETACH)
}

/// Cuts the FUSE connection of the mount at `mountpoint` and detaches it:
/// MNT_FORCE aborts a FUSE connection, so whatever the kernel still held
/// for it is dropped and every call on it answers ENOTCONN from then on.
pub(crate) fn cut_off(mountpoint: &Path) -> io::Result<()> {
    umount2(mountpoint, libc::MNT_FORCE | libc::MNT_DETACH)
}

fn umount2(mountpoint: &Path, flags: libc::c_int) -> io::Result<()> {
    let path = std::ffi::CString::new(mountpoint.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a mountpoint with a NUL byte"))?;
    // SAFETY: a NUL-terminated path owned here.
    match unsafe { libc::umount2(path.as_ptr(), flags | libc::UMOUNT_NOFOLLOW) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_faultlines_mounts_by_their_source() {
        let text = "\
36 35 98:0 / /mnt1 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
120 29 0:52 / /work/run\\040dir/data rw,nosuid,nodev,relatime shared:60 - fuse faultline-faultfs:4242:kv-0 rw,user_id=0,group_id=0,default_permissions,allow_other
121 29 0:53 / /other rw - fuse.sshfs host:/x rw
122 29 0:54 / /mine rw - fuse.faultfs faultline-faultfs:7:a:b rw";
        let found = parse(text);
        assert_eq!(
            found,
            vec![
                FaultMount { mountpoint: "/work/run dir/data".into(), pid: 4242, label: "kv-0".into() },
                FaultMount { mountpoint: "/mine".into(), pid: 7, label: "a:b".into() },
            ]
        );
        assert_eq!(fs_name(4242, "kv-0"), "faultline-faultfs:4242:kv-0");
    }
}
