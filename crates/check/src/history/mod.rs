//! Operation histories: what every client invoked and what it saw, streamed
//! to files in the run directory while the load runs, so checkers can judge
//! the run afterwards without the history living in RAM.
//!
//! Format (docs/history.md): each connection of a cell writes
//! `history/<cell>/<connection>.ops`, a sequence of fixed 48-byte
//! little-endian [`OpRecord`]s in the order the connection saw its ops end —
//! so each file is sorted by `end`, and a k-way merge gives the whole cell in
//! time order.

pub mod export;
pub mod partitioned_kv;

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;

use faultline_model::ops::OpKind;

pub use faultline_model::value::{
    is_whole_value, parse_header, parse_value, write_value, Observed, Outcome, Scope, ValueId,
};

/// One op, as one connection saw it end.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OpRecord {
    /// Nanoseconds since the cell's clock started.
    pub start: u64,
    /// When it ended (for `Unknown`: when it was given up).
    pub end: u64,
    pub key: u64,
    pub kind: OpKind,
    pub outcome: Outcome,
    /// The write's own value (writes only).
    pub written: Option<ValueId>,
    pub written_len: u32,
    /// Which of the cell's members answered it, when the client can tell:
    /// 0 unknown, else 1 + its place in the cell's `members` file.
    pub member: u8,
    pub observed: Observed,
}

pub const RECORD_BYTES: usize = 48;

/// The highest member number a record holds (its flags byte's 7 high
/// bits); members past it are recorded unknown.
pub const MAX_MEMBER: u8 = 127;

/// The file in a cell's history folder naming its members, a line each,
/// in the order [`OpRecord::member`] counts them.
pub const MEMBERS_FILE: &str = "members";

/// Widens every record in `records` (whole records, as a file holds them)
/// by `by_ns` on both sides: its start earlier, its end later. A history
/// recorded on another machine (an agent) is widened by the uncertainty of
/// that machine's clock against the coordinator's, so a checker never
/// orders two ops closer than the clocks allow; every end moves by the
/// same amount, so the file stays sorted by `end`.
pub fn widen_times(records: &mut [u8], by_ns: u64) -> anyhow::Result<()> {
    anyhow::ensure!(
        records.len().is_multiple_of(RECORD_BYTES),
        "{} bytes are not whole {RECORD_BYTES}-byte records",
        records.len()
    );
    for r in records.chunks_exact_mut(RECORD_BYTES) {
        let start = u64::from_le_bytes(r[0..8].try_into().expect("8 bytes")).saturating_sub(by_ns);
        let end = u64::from_le_bytes(r[8..16].try_into().expect("8 bytes")).saturating_add(by_ns);
        r[0..8].copy_from_slice(&start.to_le_bytes());
        r[8..16].copy_from_slice(&end.to_le_bytes());
    }
    Ok(())
}

impl OpRecord {
    fn encode(&self, out: &mut [u8; RECORD_BYTES]) {
        out[0..8].copy_from_slice(&self.start.to_le_bytes());
        out[8..16].copy_from_slice(&self.end.to_le_bytes());
        out[16..24].copy_from_slice(&self.key.to_le_bytes());
        out[24..32].copy_from_slice(&self.written.map_or(0, ValueId::pack).to_le_bytes());
        let (observed_tag, observed) = match self.observed {
            Observed::Nothing => (0u8, 0),
            Observed::Nil => (1, 0),
            Observed::Write(id) => (2, id.pack()),
            Observed::Foreign => (3, 0),
        };
        out[32..40].copy_from_slice(&observed.to_le_bytes());
        out[40..44].copy_from_slice(&self.written_len.to_le_bytes());
        out[44] = self.kind.index() as u8;
        out[45] = match self.outcome {
            Outcome::Ok => 0,
            Outcome::Fail => 1,
            Outcome::Unknown => 2,
        };
        out[46] = observed_tag;
        let member = if self.member > MAX_MEMBER { 0 } else { self.member };
        out[47] = self.written.is_some() as u8 | member << 1;
    }

    fn decode(b: &[u8; RECORD_BYTES]) -> anyhow::Result<OpRecord> {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let kind = *OpKind::ALL.get(b[44] as usize).with_context(|| format!("bad op kind {}", b[44]))?;
        let outcome = match b[45] {
            0 => Outcome::Ok,
            1 => Outcome::Fail,
            2 => Outcome::Unknown,
            other => anyhow::bail!("bad outcome {other}"),
        };
        let observed = match b[46] {
            0 => Observed::Nothing,
            1 => Observed::Nil,
            2 => Observed::Write(ValueId::unpack(u64_at(32))),
            3 => Observed::Foreign,
            other => anyhow::bail!("bad observation tag {other}"),
        };
        Ok(OpRecord {
            start: u64_at(0),
            end: u64_at(8),
            key: u64_at(16),
            kind,
            outcome,
            written: (b[47] & 1 == 1).then(|| ValueId::unpack(u64_at(24))),
            written_len: u32::from_le_bytes(b[40..44].try_into().expect("4 bytes")),
            member: b[47] >> 1,
            observed,
        })
    }
}

/// Names the cell's members in its history folder (`dir`), in the order
/// records count them; nothing for a target whose members no client names.
pub fn write_members(dir: &Path, members: &[String]) -> anyhow::Result<()> {
    if members.is_empty() {
        return Ok(());
    }
    let path = dir.join(MEMBERS_FILE);
    std::fs::write(&path, members.join("\n") + "\n").with_context(|| format!("cannot write {}", path.display()))
}

/// The members a cell's history folder names (none when it names none).
pub fn read_members(dir: &Path) -> Vec<String> {
    let text = faultline_model::input_file::read_to_string(&dir.join(MEMBERS_FILE), 1 << 20).unwrap_or_default();
    text.lines().map(str::to_string).collect()
}

/// Appends one connection's records to its file.
pub struct HistoryWriter {
    out: BufWriter<File>,
    path: PathBuf,
    failed: Option<String>,
}

impl HistoryWriter {
    pub fn create(path: &Path) -> anyhow::Result<HistoryWriter> {
        let file = File::create(path).with_context(|| format!("cannot create history file {}", path.display()))?;
        Ok(HistoryWriter { out: BufWriter::with_capacity(256 * 1024, file), path: path.to_path_buf(), failed: None })
    }

    pub fn append(&mut self, record: &OpRecord) {
        let mut bytes = [0u8; RECORD_BYTES];
        record.encode(&mut bytes);
        if self.failed.is_none() {
            if let Err(e) = self.out.write_all(&bytes) {
                self.failed = Some(format!("writing {}: {e}", self.path.display()));
            }
        }
    }

    /// Flushes; a write that failed along the way is reported here, so a
    /// truncated history is never checked as if it were whole.
    pub fn finish(mut self) -> anyhow::Result<()> {
        if let Some(e) = self.failed {
            anyhow::bail!(e);
        }
        self.out.flush().with_context(|| format!("flushing {}", self.path.display()))
    }
}

/// Reads one connection's file.
pub struct HistoryReader {
    input: BufReader<File>,
    path: PathBuf,
}

impl HistoryReader {
    pub fn open(path: &Path) -> anyhow::Result<HistoryReader> {
        let file = faultline_model::input_file::open(path)
            .with_context(|| format!("cannot open history file {}", path.display()))?;
        Ok(HistoryReader { input: BufReader::with_capacity(256 * 1024, file), path: path.to_path_buf() })
    }

    pub fn next_record(&mut self) -> anyhow::Result<Option<OpRecord>> {
        let mut bytes = [0u8; RECORD_BYTES];
        match self.input.read_exact(&mut bytes) {
            Ok(()) => OpRecord::decode(&bytes).map(Some).with_context(|| format!("in {}", self.path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading {}", self.path.display())),
        }
    }
}

/// All records of a cell's history in `end` order, merged from its
/// connection files; memory is one record per connection.
pub struct Merged {
    readers: Vec<HistoryReader>,
    /// The next record of each reader, smallest `end` on top.
    heads: std::collections::BinaryHeap<Head>,
}

struct Head {
    record: OpRecord,
    reader: usize,
}

impl PartialEq for Head {
    fn eq(&self, other: &Self) -> bool {
        (self.record.end, self.reader) == (other.record.end, other.reader)
    }
}
impl Eq for Head {}
impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Head {
    // Reversed: BinaryHeap is a max-heap.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (other.record.end, other.reader).cmp(&(self.record.end, self.reader))
    }
}

impl Merged {
    pub fn open(dir: &Path) -> anyhow::Result<Merged> {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
            .with_context(|| format!("cannot read history directory {}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "ops"))
            .collect();
        paths.sort();
        let mut readers = paths.iter().map(|p| HistoryReader::open(p)).collect::<anyhow::Result<Vec<_>>>()?;
        let mut heads = std::collections::BinaryHeap::with_capacity(readers.len());
        for (reader, r) in readers.iter_mut().enumerate() {
            if let Some(record) = r.next_record()? {
                heads.push(Head { record, reader });
            }
        }
        Ok(Merged { readers, heads })
    }

    pub fn next_record(&mut self) -> anyhow::Result<Option<OpRecord>> {
        let Some(mut top) = self.heads.peek_mut() else { return Ok(None) };
        let record = top.record;
        match self.readers[top.reader].next_record()? {
            Some(next) => top.record = next,
            None => {
                std::collections::binary_heap::PeekMut::pop(top);
            }
        }
        Ok(Some(record))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widening_moves_starts_earlier_and_ends_later() {
        let rec = OpRecord {
            start: 5,
            end: 100,
            key: 1,
            kind: OpKind::Get,
            outcome: Outcome::Ok,
            written: None,
            written_len: 0,
            member: 0,
            observed: Observed::Nil,
        };
        let mut bytes = [0u8; 2 * RECORD_BYTES];
        rec.encode((&mut bytes[..RECORD_BYTES]).try_into().unwrap());
        OpRecord { start: 50, end: 200, ..rec }.encode((&mut bytes[RECORD_BYTES..]).try_into().unwrap());
        widen_times(&mut bytes, 10).unwrap();
        let first = OpRecord::decode(bytes[..RECORD_BYTES].try_into().unwrap()).unwrap();
        let second = OpRecord::decode(bytes[RECORD_BYTES..].try_into().unwrap()).unwrap();
        assert_eq!((first.start, first.end, first.key), (0, 110, 1));
        assert_eq!((second.start, second.end), (40, 210));
        assert!(widen_times(&mut bytes[..47], 1).is_err());
    }

    #[test]
    fn records_round_trip_and_merge_in_end_order() {
        let dir = tempfile::tempdir().unwrap();
        let rec = |end: u64, observed| OpRecord {
            start: end - 5,
            end,
            key: end * 10,
            kind: OpKind::Get,
            outcome: Outcome::Ok,
            written: None,
            written_len: 0,
            member: 0,
            observed,
        };
        let id = ValueId { cell: 1, writer: 2, seq: 3 };
        let mut a = HistoryWriter::create(&dir.path().join("0.ops")).unwrap();
        let mut b = HistoryWriter::create(&dir.path().join("1.ops")).unwrap();
        for end in [10, 30, 50] {
            a.append(&rec(end, Observed::Nil));
        }
        for end in [20, 40] {
            b.append(&OpRecord {
                kind: OpKind::Set,
                outcome: Outcome::Unknown,
                written: Some(id),
                written_len: 64,
                member: 3,
                ..rec(end, Observed::Write(id))
            });
        }
        a.finish().unwrap();
        b.finish().unwrap();
        let mut merged = Merged::open(dir.path()).unwrap();
        let mut ends = Vec::new();
        while let Some(r) = merged.next_record().unwrap() {
            if r.end == 20 {
                assert_eq!(
                    (r.kind, r.outcome, r.written, r.written_len, r.member, r.observed),
                    (OpKind::Set, Outcome::Unknown, Some(id), 64, 3, Observed::Write(id))
                );
            }
            if r.end == 30 {
                assert_eq!((r.written, r.member), (None, 0), "no write, no member");
            }
            ends.push(r.end);
        }
        assert_eq!(ends, [10, 20, 30, 40, 50]);
    }
}
