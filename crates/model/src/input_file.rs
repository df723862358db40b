//! The one way faultline opens a file it was handed (results.json, a
//! template, a plugin, a history, a spec, the `--into` document): only a
//! regular file, opened without waiting (a FIFO would block the open, and
//! then the read, forever; /dev/zero never ends), and read whole only up to
//! a limit the caller names, so no input grows the process without bound.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The largest results.json read back (`report`, `compare`, `history`):
/// the largest campaigns write a few MiB.
pub const MAX_RESULTS_BYTES: u64 = 256 << 20;
/// The largest report template, or document a section is written into.
pub const MAX_TEXT_BYTES: u64 = 64 << 20;
/// The largest WebAssembly plugin.
pub const MAX_PLUGIN_BYTES: u64 = 256 << 20;

/// Opens `path` for reading if it is a regular file (symlinks followed);
/// anything else is refused with what it is.
pub fn open(path: &Path) -> std::io::Result<File> {
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
    // writer. It changes nothing for a regular file.
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    let kind = file.metadata()?.file_type();
    if !kind.is_file() {
        use std::os::unix::fs::FileTypeExt;
        let what = if kind.is_dir() {
            "a directory"
        } else if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_char_device() || kind.is_block_device() {
            "a device"
        } else if kind.is_socket() {
            "a socket"
        } else {
            "not a regular file"
        };
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{what}, not a regular file")));
    }
    Ok(file)
}

/// The whole of `path`, a regular file of at most `limit` bytes.
pub fn read(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    let file = open(path)?;
    let mut bytes = Vec::new();
    // One byte past the limit is enough to know it is too large.
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {}, more than faultline reads", size_text(limit)),
        ));
    }
    Ok(bytes)
}

/// A limit as people write it: MiB when whole, else bytes.
fn size_text(bytes: u64) -> String {
    match bytes % (1 << 20) {
        0 => format!("{} MiB", bytes >> 20),
        _ => format!("{bytes} bytes"),
    }
}

/// [`read`], as UTF-8 text.
pub fn read_to_string(path: &Path, limit: u64) -> std::io::Result<String> {
    String::from_utf8(read(path, limit)?)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("not UTF-8 text: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_within_the_limit_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid C string; mkfifo only creates the node.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let started = std::time::Instant::now();
        assert!(read(&fifo, 10).unwrap_err().to_string().contains("a FIFO"));
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        assert!(read(Path::new("/dev/zero"), 10).unwrap_err().to_string().contains("a device"));
        assert!(read(dir.path(), 10).unwrap_err().to_string().contains("a directory"));
        let link = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        assert!(read(&link, 10).unwrap_err().to_string().contains("a device"));
        let file = dir.path().join("f");
        std::fs::write(&file, "0123456789").unwrap();
        assert_eq!(read_to_string(&file, 10).unwrap(), "0123456789");
        assert!(read(&file, 9).unwrap_err().to_string().contains("larger than"));
    }
}
