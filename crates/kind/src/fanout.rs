//! Publish/subscribe fan-out, the kind-independent half: what a published
//! message carries (its publisher lane, its sequence number on its channel
//! and its send time, padded to the message size), how channels are named,
//! and what a kind that can subscribe offers the engine ([`PubSub`]). The
//! engine keeps the books (who received what); a kind only dials, subscribes
//! and cuts pushed messages out of its stream.

use std::sync::OnceLock;
use std::time::Instant;

use crate::Stream;

/// Which message an op publishes: its publisher (the lane) and its number
/// among that lane's messages on the op's channel, from 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MessageId {
    pub lane: u16,
    pub seq: u32,
}

/// `F` + lane (4 hex digits) + seq (8) + send time in ns since [`epoch`] (16).
pub const HEADER_LEN: usize = 29;

/// The clock every stamp counts from: the process's first call.
pub fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Nanoseconds from [`epoch`] to `at` (0 before it).
pub fn stamp_of(at: Instant) -> u64 {
    at.saturating_duration_since(epoch()).as_nanos() as u64
}

/// Now, as a stamp.
pub fn stamp_now() -> u64 {
    stamp_of(Instant::now())
}

/// Appends a message's payload: its header, then `pad` bytes (cycled) up
/// to `size` (never shorter than the header).
pub fn put_payload(id: MessageId, stamp: u64, size: usize, pad: &[u8], out: &mut Vec<u8>) {
    out.push(b'F');
    put_hex(u64::from(id.lane), 4, out);
    put_hex(u64::from(id.seq), 8, out);
    put_hex(stamp, 16, out);
    let mut left = size.saturating_sub(HEADER_LEN);
    while left > 0 && !pad.is_empty() {
        let n = left.min(pad.len());
        out.extend_from_slice(&pad[..n]);
        left -= n;
    }
}

fn put_hex(v: u64, digits: u32, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for i in (0..digits).rev() {
        out.push(HEX[((v >> (4 * i)) & 0xf) as usize]);
    }
}

/// A payload's publisher, sequence number and send stamp; None when it is
/// not one of faultline's messages.
pub fn parse_payload(payload: &[u8]) -> Option<(MessageId, u64)> {
    if payload.len() < HEADER_LEN || payload[0] != b'F' {
        return None;
    }
    let hex = |range: std::ops::Range<usize>| -> Option<u64> {
        payload[range].iter().try_fold(0u64, |n, &b| {
            let d = match b {
                b'0'..=b'9' => b - b'0',
                b'a'..=b'f' => b - b'a' + 10,
                _ => return None,
            };
            Some(n << 4 | u64::from(d))
        })
    };
    let id = MessageId { lane: hex(1..5)? as u16, seq: hex(5..13)? as u32 };
    Some((id, hex(13..29)?))
}

/// The name of fan-out channel `n`: under the workload's key prefix, and
/// the run's tag, so runs sharing a server never hear each other.
pub fn channel_name(prefix: &str, run_tag: u32, n: u32) -> Vec<u8> {
    format!("{prefix}fanout:{run_tag:08x}:{n}").into_bytes()
}

/// A message pushed to a subscriber, as ranges of the decoded input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    /// Bytes of the stream it took.
    pub len: usize,
    /// A published message: its channel and payload; None for anything else
    /// pushed (a subscription's confirmation, a pong).
    pub message: Option<(std::ops::Range<usize>, std::ops::Range<usize>)>,
}

/// A kind's publish/subscribe: the engine's subscribers dial through it.
#[async_trait::async_trait]
pub trait PubSub: Send + Sync {
    /// A new connection to the server at `uri`, subscribed to `channels`,
    /// every subscription confirmed (messages published from now on
    /// arrive), and what the server sent after the confirmations.
    async fn subscribe(&self, uri: &str, channels: &[Vec<u8>]) -> anyhow::Result<(Stream, Vec<u8>)>;
    /// Cuts the first pushed item off `input`: `Ok(None)` while incomplete;
    /// `Err` when the stream cannot be understood any more.
    fn decode_push(&self, input: &[u8]) -> Result<Option<Pushed>, String>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_carry_their_message_and_are_padded_to_size() {
        let mut out = Vec::new();
        let id = MessageId { lane: 7, seq: 0xdead_beef };
        put_payload(id, 123_456_789, 64, b"xyz", &mut out);
        assert_eq!(out.len(), 64);
        assert!(out.starts_with(b"F0007deadbeef00000000075bcd15xyzx"), "{}", String::from_utf8_lossy(&out));
        assert_eq!(parse_payload(&out), Some((id, 123_456_789)));
        out.clear();
        put_payload(id, 1, 10, b"xyz", &mut out);
        assert_eq!(out.len(), HEADER_LEN, "never shorter than the header");
        assert_eq!(parse_payload(b"hello"), None);
        assert_eq!(parse_payload(b"F000g0000000000000000000000000"), None);
        assert_eq!(channel_name("k:", 0xabc, 3), b"k:fanout:00000abc:3");
    }
}
