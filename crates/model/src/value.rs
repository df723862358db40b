//! The values faultline writes and how a read is told apart: each value
//! names its run, cell, writer and sequence number in a header, and its
//! filler is derived from them, so a read says which write it saw and a
//! torn or mixed value is caught. Shared by the workload (writing), the
//! kinds (reading stored items) and the checkers (judging).

/// Whether an op took effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// Definitely did not take effect (an error reply, or never sent).
    Fail,
    /// May or may not have taken effect, at any time after it started (a
    /// deadline, hang or lost connection after the request was sent).
    Unknown,
}

/// What a read returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Observed {
    /// Not a read, or the reply carried no value to judge.
    Nothing,
    /// The key had no value.
    Nil,
    /// The value one write of this cell wrote.
    Write(ValueId),
    /// A value no write of this cell wrote: an earlier cell's, or garbage.
    Foreign,
}

/// Names one write of a cell: which connection issued it and its number
/// there. Written into the value itself, so a read tells which write it saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId {
    pub cell: u16,
    pub writer: u16,
    pub seq: u32,
}

impl ValueId {
    pub fn pack(self) -> u64 {
        (self.cell as u64) << 48 | (self.writer as u64) << 32 | self.seq as u64
    }

    pub fn unpack(v: u64) -> ValueId {
        ValueId { cell: (v >> 48) as u16, writer: (v >> 32) as u16, seq: v as u32 }
    }
}

/// Which run and cell values belong to. The run tag is random per run, so
/// data left over from an earlier run never passes for this run's writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scope {
    pub run: u32,
    pub cell: u16,
}

/// Longest value header: `fl` + 8 + `.` + 4 + `.` + 4 + `.` + 8 + `.` hex digits.
pub const VALUE_HEADER_MAX: usize = 30;

/// Writes the value for write `id`: a header naming it, then filler derived
/// from it, `len` bytes in all, so a torn or mixed value is recognizable.
pub fn write_value(run: u32, id: ValueId, len: usize, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(format!("fl{run:x}.{:x}.{:x}.{:x}.", id.cell, id.writer, id.seq).as_bytes());
    let header = out.len() - start;
    let seed = id.pack() ^ (run as u64).rotate_left(17);
    out.extend((header..len).map(|i| filler(seed, i)));
    out.truncate(start + len.max(header));
}

/// Filler byte `i` of a value: a hash of the write and the position, so no
/// two writes share a run of filler and a value mixed from two is caught.
pub fn filler(seed: u64, i: usize) -> u8 {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    // splitmix64 of (write, position)
    let mut z = seed.wrapping_add((i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    ALPHABET[((z ^ (z >> 31)) % ALPHABET.len() as u64) as usize]
}

/// The run tag and write a value's header names, whatever run or cell.
pub fn parse_header(bytes: &[u8]) -> Option<(u32, ValueId)> {
    let rest = bytes.strip_prefix(b"fl")?;
    let mut fields = [0u64; 4];
    let mut pos = 0;
    for (n, field) in fields.iter_mut().enumerate() {
        let max = [8, 4, 4, 8][n];
        let digits = rest[pos..].iter().take_while(|b| b.is_ascii_hexdigit()).count();
        if digits == 0 || digits > max || rest.get(pos + digits) != Some(&b'.') {
            return None;
        }
        *field = u64::from_str_radix(std::str::from_utf8(&rest[pos..pos + digits]).ok()?, 16).ok()?;
        pos += digits + 1;
    }
    Some((fields[0] as u32, ValueId { cell: fields[1] as u16, writer: fields[2] as u16, seq: fields[3] as u32 }))
}

/// Which write of this scope a value names.
pub fn parse_value(bytes: &[u8], scope: Scope) -> Observed {
    match parse_header(bytes) {
        Some((run, id)) if run == scope.run && id.cell == scope.cell => Observed::Write(id),
        _ => Observed::Foreign,
    }
}

/// Whether `bytes` is exactly the whole value write `id` wrote with `len` bytes.
pub fn is_whole_value(bytes: &[u8], run: u32, id: ValueId, len: usize) -> bool {
    let mut expected = Vec::with_capacity(len);
    write_value(run, id, len, &mut expected);
    bytes == expected.as_slice()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_name_their_write_and_reveal_tearing() {
        let id = ValueId { cell: 3, writer: 17, seq: 123_456 };
        let scope = Scope { run: 0xdead_beef, cell: 3 };
        let mut v = Vec::new();
        write_value(scope.run, id, 64, &mut v);
        assert_eq!(v.len(), 64);
        assert_eq!(parse_value(&v, scope), Observed::Write(id));
        assert_eq!(parse_value(&v, Scope { cell: 4, ..scope }), Observed::Foreign, "another cell's value");
        assert_eq!(parse_value(&v, Scope { run: 1, ..scope }), Observed::Foreign, "another run's value");
        assert_eq!(parse_value(b"random bytes", scope), Observed::Foreign);
        assert!(is_whole_value(&v, scope.run, id, 64));
        let mut torn = v.clone();
        torn[40] ^= 1;
        assert!(!is_whole_value(&torn, scope.run, id, 64));
        assert!(!is_whole_value(&v[..60], scope.run, id, 64));
        // Two writes' fillers differ, so a value spliced from both is caught.
        let other = ValueId { seq: 123_457, ..id };
        let mut w = Vec::new();
        write_value(scope.run, other, 64, &mut w);
        let mut spliced = v[..40].to_vec();
        spliced.extend_from_slice(&w[40..]);
        assert!(!is_whole_value(&spliced, scope.run, id, 64));
    }
}
