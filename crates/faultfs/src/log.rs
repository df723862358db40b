//! The undo log of one file: for every write and size change since the
//! file's last durable point (an fsync, an fdatasync, an O_SYNC write),
//! what it overwrote. Writes go through to the real file at once (so reads
//! need nothing of this); a power loss walks the log backwards and puts the
//! old bytes and sizes back. An append overwrote nothing, and appends that
//! follow one another are one entry, so a log of appends (a write-ahead
//! log, Redis's AOF) costs a few words however long it grows.

use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};

/// One change since the last durable point, with what it replaced.
enum Entry {
    /// `len` bytes written at `offset` of a file `old_len` long, by
    /// `writes` calls (appends run together); `pre` is what they
    /// overwrote (the part below `old_len`).
    Write { offset: u64, len: u64, old_len: u64, pre: Vec<u8>, writes: usize },
    /// The file cut or grown from `old_len` to `new_len`; `cut` is what a
    /// shrink dropped.
    Resize { new_len: u64, old_len: u64, cut: Cut },
}

/// Up to this much of what a truncation drops is kept in memory; more
/// goes to an unnamed temporary file, so truncating a large file never
/// allocates its size.
const IN_MEMORY: u64 = 1 << 20;

/// What a truncation dropped, kept to put back.
enum Cut {
    Bytes(Vec<u8>),
    /// In an unnamed temporary file (gone when closed), `len` bytes long.
    File {
        file: File,
        len: u64,
    },
}

/// Copies `len` bytes from `from` at `at` to `to` at `to_at`, a chunk at a time.
fn copy_range(from: &File, at: u64, to: &File, to_at: u64, len: u64) -> io::Result<()> {
    let mut done = 0;
    while done < len {
        let chunk = read_at(from, at + done, (len - done).min(IN_MEMORY))?;
        to.write_all_at(&chunk, to_at + done)?;
        done += chunk.len() as u64;
    }
    Ok(())
}

impl Cut {
    fn save(file: &File, from: u64, len: u64) -> io::Result<Cut> {
        if len <= IN_MEMORY {
            return Ok(Cut::Bytes(read_at(file, from, len)?));
        }
        let spill = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_TMPFILE)
            .open(std::env::temp_dir())?;
        copy_range(file, from, &spill, 0, len)?;
        Ok(Cut::File { file: spill, len })
    }

    fn restore(&self, file: &File, at: u64) -> io::Result<()> {
        match self {
            Cut::Bytes(bytes) => file.write_all_at(bytes, at),
            Cut::File { file: spill, len } => copy_range(spill, 0, file, at, *len),
        }
    }
}

/// What a power loss did to one file.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Reverted {
    /// Changes undone.
    pub changes: usize,
    /// Bytes of undone writes.
    pub bytes: u64,
}

#[derive(Default)]
pub struct UndoLog {
    entries: Vec<Entry>,
}

fn read_at(file: &File, offset: u64, len: u64) -> io::Result<Vec<u8>> {
    let mut buf = vec![0; len as usize];
    file.read_exact_at(&mut buf, offset)?;
    Ok(buf)
}

impl UndoLog {
    /// Keeps what writing `len` bytes at `offset` of `file` (None: at its
    /// end, an append) will overwrite; call it just before the write. The
    /// offset to write at comes back.
    pub fn before_write(&mut self, file: &File, offset: Option<u64>, len: u64) -> io::Result<u64> {
        let old_len = file.metadata()?.len();
        let offset = offset.unwrap_or(old_len);
        // An append right after an append: the same entry, longer.
        if let Some(Entry::Write { offset: at, len: run, old_len: before, pre, writes }) = self.entries.last_mut() {
            if offset == old_len && pre.is_empty() && *before == *at && *at + *run == offset {
                *run += len;
                *writes += 1;
                return Ok(offset);
            }
        }
        let end = offset.saturating_add(len).min(old_len);
        let pre = if end > offset { read_at(file, offset, end - offset)? } else { Vec::new() };
        self.entries.push(Entry::Write { offset, len, old_len, pre, writes: 1 });
        Ok(offset)
    }

    /// Keeps what resizing `file` to `new_len` will drop; call it just before.
    pub fn before_resize(&mut self, file: &File, new_len: u64) -> io::Result<()> {
        let old_len = file.metadata()?.len();
        let cut = Cut::save(file, new_len, old_len.saturating_sub(new_len))?;
        self.entries.push(Entry::Resize { new_len, old_len, cut });
        Ok(())
    }

    /// Everything logged is durable now.
    pub fn commit(&mut self) {
        self.entries.clear();
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Undoes the log on `file`, newest first, back to the last durable
    /// point. `torn`: a disk that kept part of what it was sent, `(k, p)`:
    /// the first `k` entries survive, and of entry `k` a prefix shorter
    /// than the whole (`p` modulo its length).
    pub fn revert(&mut self, file: &File, torn: Option<(usize, u64)>) -> io::Result<Reverted> {
        let (keep, prefix) = torn.unwrap_or((0, 0));
        let mut reverted = Reverted::default();
        let entries = std::mem::take(&mut self.entries);
        for (i, entry) in entries.iter().enumerate().skip(keep).rev() {
            match entry {
                Entry::Write { offset, len, old_len, pre, writes } => {
                    let kept = if i == keep && *len > 0 { prefix % len } else { 0 };
                    // The first `kept` bytes written stay where they are (never
                    // read back: a torn append may be gigabytes); the rest goes
                    // back to what it overwrote, the file to its length then,
                    // or to the end of what survived when that lies past it.
                    if let Some(rest) = pre.get(kept as usize..) {
                        file.write_all_at(rest, offset + kept)?;
                    }
                    file.set_len(if kept > 0 { (*old_len).max(offset + kept) } else { *old_len })?;
                    reverted.bytes += len - kept;
                    reverted.changes += writes;
                }
                Entry::Resize { new_len, old_len, cut } => {
                    file.set_len(*old_len)?;
                    if new_len < old_len {
                        cut.restore(file, *new_len)?;
                    }
                    reverted.changes += 1;
                }
            }
        }
        Ok(reverted)
    }

    /// How many entries the log holds, for choosing a torn cut.
    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(content: &[u8]) -> (tempfile::NamedTempFile, File) {
        let f = tempfile::NamedTempFile::new().unwrap();
        f.as_file().write_all_at(content, 0).unwrap();
        let file = File::options().read(true).write(true).open(f.path()).unwrap();
        (f, file)
    }

    fn write(log: &mut UndoLog, file: &File, offset: u64, data: &[u8]) {
        log.before_write(file, Some(offset), data.len() as u64).unwrap();
        file.write_all_at(data, offset).unwrap();
    }

    fn content(file: &File) -> Vec<u8> {
        read_at(file, 0, file.metadata().unwrap().len()).unwrap()
    }

    #[test]
    fn a_power_loss_puts_back_what_was_durable() {
        let (_keep, file) = file(b"durable");
        let mut log = UndoLog::default();
        write(&mut log, &file, 7, b"+synced");
        log.commit();
        write(&mut log, &file, 14, b"+lost");
        write(&mut log, &file, 0, b"DUR");
        log.before_resize(&file, 3).unwrap();
        file.set_len(3).unwrap();
        log.before_resize(&file, 10).unwrap();
        file.set_len(10).unwrap();
        let reverted = log.revert(&file, None).unwrap();
        assert_eq!(content(&file), b"durable+synced");
        assert_eq!(reverted, Reverted { changes: 4, bytes: 8 });
        assert!(log.is_empty());
    }

    /// A truncation of more than is kept in memory is put back whole.
    #[test]
    fn a_large_truncation_is_kept_outside_memory_and_put_back() {
        let big: Vec<u8> = (0..3 * IN_MEMORY + 17).map(|i| (i % 251) as u8).collect();
        let (_keep, file) = file(&big);
        let mut log = UndoLog::default();
        log.before_resize(&file, 5).unwrap();
        assert!(matches!(log.entries[0], Entry::Resize { cut: Cut::File { .. }, .. }));
        file.set_len(5).unwrap();
        log.revert(&file, None).unwrap();
        assert_eq!(content(&file), big);
    }

    #[test]
    fn a_torn_write_keeps_a_prefix_and_nothing_after_it() {
        let (_keep, file) = file(b"");
        let mut log = UndoLog::default();
        for chunk in [&b"aaaa"[..], b"bbbb", b"cccc"] {
            let at = file.metadata().unwrap().len();
            write(&mut log, &file, at, chunk);
        }
        assert_eq!(log.len(), 1, "appends run together");
        let reverted = log.revert(&file, Some((0, 6))).unwrap();
        assert_eq!(content(&file), b"aaaabb");
        assert_eq!(reverted, Reverted { changes: 3, bytes: 6 });
    }

    /// Torn inside what it overwrote: the prefix is new, the rest is the
    /// old bytes; torn past the old end of a write beyond it: the file
    /// ends where the prefix does, the gap before it a hole.
    #[test]
    fn a_torn_overwrite_keeps_the_old_bytes_after_its_prefix() {
        let (_keep, file) = file(b"0123456789");
        let mut log = UndoLog::default();
        write(&mut log, &file, 2, b"ABCDEF");
        log.revert(&file, Some((0, 3))).unwrap();
        assert_eq!(content(&file), b"01ABC56789");

        let (_keep, short) = self::file(b"0123");
        let mut log = UndoLog::default();
        write(&mut log, &short, 6, b"XY");
        log.revert(&short, Some((0, 1))).unwrap();
        assert_eq!(content(&short), b"0123\0\0X");
        write(&mut log, &short, 6, b"XY");
        log.revert(&short, None).unwrap();
        assert_eq!(content(&short), b"0123\0\0X", "untorn: back to the length before");
    }
}
