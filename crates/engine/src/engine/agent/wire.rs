//! What a coordinator and its agents say to each other: one TLS connection
//! per agent (link.rs: both ends hold the run's key), the agent dialing in,
//! carrying length-prefixed frames (a u32 length, then a postcard-encoded
//! [`Frame`]). Both ends are the same build (the greeting refuses anything
//! else), so the frames need no versioning of their own beyond
//! [`PROTOCOL`]. What an agent sends of a cell echoes the cell's nonce
//! ([`ArmOrder::arm`]): a late frame of an earlier cell is never taken for
//! this one's.

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::metrics::CellMetrics;
use faultline_model::stats::ClientCpu;

/// Raised when a frame's meaning changes.
pub const PROTOCOL: u32 = 2;

/// A frame larger than this is refused rather than allocated: a cell's
/// metrics with every success kept for window gates stay well under it.
const MAX_FRAME: usize = 1 << 30;

/// Which end sent a frame: each reads only the frames the other end sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sender {
    Agent,
    Coordinator,
}

/// The largest frame of each kind, by its tag (postcard writes an enum's
/// variant index first, one byte below 128 variants), and who may send it;
/// None: that end never sends it. Checked before a byte of the frame is
/// kept, so a length prefix alone cannot make the reader allocate: the
/// bytes are kept only as they arrive, up to the limit.
fn limit(tag: u8, from: Sender) -> Option<usize> {
    use Sender::{Agent, Coordinator};
    const SMALL: usize = 64;
    match (tag, from) {
        // Hello: names and digests.
        (0, Agent) => Some(4 << 10),
        // Pong, Ready, Armed, Progress.
        (1..=4, Agent) => Some(SMALL),
        // History: one chunk of whole records.
        (5, Agent) => Some(HISTORY_CHUNK + SMALL),
        // Done: a cell's metrics, every success kept for window gates included.
        (6, Agent) => Some(MAX_FRAME),
        // Failed, Refused: a sentence.
        (7, Agent) | (10, Coordinator) => Some(64 << 10),
        // RoundsDone: both ways (relayed).
        (8, _) => Some(SMALL),
        // Welcome: the spec's text and its `--set`s.
        (9, Coordinator) => Some(2 * faultline_spec::limits::MAX_SPEC_BYTES + (64 << 10)),
        // Ping, then Arm (a cell's order), then Start, Cancel, Disarm, Bye.
        (11, Coordinator) | (13..=16, Coordinator) => Some(SMALL),
        (12, Coordinator) => Some(1 << 20),
        _ => None,
    }
}

/// How much of a history file one frame carries: whole records.
pub const HISTORY_CHUNK: usize = faultline_check::history::RECORD_BYTES * 21_845;

/// Who an agent is, as it says on connecting.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Hello {
    pub protocol: u32,
    pub version: String,
    pub commit: String,
    /// SHA-256 of the agent's own binary: the coordinator takes only its
    /// own build, so both ends run the same engine.
    pub binary_sha256: String,
    pub name: String,
    pub host: String,
    pub pid: u32,
    pub cores: usize,
    /// Its host's kernel boot: the same as the coordinator's means the same
    /// monotonic clock (clock.rs).
    pub boot_id: String,
}

/// The run an agent joins: the spec as the coordinator loaded it, so the
/// agent plans the same cells from the same text.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunShare {
    pub spec_path: String,
    pub spec_text: String,
    pub set: Vec<(String, String)>,
    pub quick: bool,
    pub only: Vec<String>,
    pub run_tag: u32,
    pub load_threads: Option<usize>,
}

/// The run, and this agent's place in it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunOrder {
    /// The agent's index (0-based) and how many agents the run has: which
    /// lanes are its (lane `i` runs on agent `i % agents`).
    pub index: u32,
    pub agents: u32,
    pub run: RunShare,
}

/// One cell to arm: connect the agent's lanes to the target.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ArmOrder {
    /// The cell's index in the plan, and its label (to prove both ends
    /// planned the same cell).
    pub cell: usize,
    pub label: String,
    /// 1-based, and the run's cells: names the history's directory.
    pub position: (usize, usize),
    pub target_name: String,
    pub uri: String,
    /// A capacity search's step: the open-loop rate it runs at.
    pub rate: Option<f64>,
    /// This cell's nonce, fresh for each: the agent's Armed, History and
    /// Done of the cell carry it back.
    pub arm: u64,
}

/// How one lane of an agent ended.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LaneOutcome {
    pub lane: u32,
    /// When the workload's shape ran out of ops for the lane, if it did:
    /// nanoseconds from the measured window's start (negative: in the warm-up).
    pub ran_out_ns: Option<i64>,
}

/// What an agent's share of a cell measured.
#[derive(Serialize, Deserialize)]
pub struct CellDone {
    /// The cell's nonce, from its [`ArmOrder`].
    pub arm: u64,
    pub metrics: CellMetrics,
    pub lanes: Vec<LaneOutcome>,
    pub client_cpu: Option<ClientCpu>,
    /// Why a lane crashed, if one did: the cell cannot be measured.
    pub crashed: Option<String>,
    /// Why a lane's history could not be written in full, if so.
    pub history_incomplete: Option<String>,
}

#[derive(Serialize, Deserialize)]
pub enum Frame {
    // Agent to coordinator.
    Hello(Hello),
    Pong {
        n: u32,
        agent_ns: u64,
    },
    Ready,
    Armed {
        arm: u64,
    },
    /// The measured window's counts so far, for the progress line.
    Progress {
        ok: u64,
        failed: u64,
        warmup: u64,
    },
    /// A piece of lane `lane`'s history file, in order.
    History {
        arm: u64,
        lane: u32,
        bytes: Vec<u8>,
    },
    Done(Box<CellDone>),
    /// What the agent could not do (plan the spec, arm a cell).
    Failed(String),
    /// Contention rounds: lane `lane` has had `rounds` rounds answered
    /// (`u64::MAX`: it left). From an agent, relayed by the coordinator to
    /// the other agents.
    RoundsDone {
        lane: u32,
        rounds: u64,
    },
    // Coordinator to agent.
    Welcome(Box<RunOrder>),
    Refused(String),
    Ping {
        n: u32,
    },
    Arm(ArmOrder),
    /// Start the armed cell's clock at this instant of the agent's clock
    /// (nanoseconds since the agent's epoch).
    Start {
        t0_ns: u64,
    },
    /// Stop the cell's load now (the run was interrupted).
    Cancel,
    /// Disarm without starting (another agent could not arm).
    Disarm,
    Bye,
}

pub async fn write<W: AsyncWriteExt + Unpin>(w: &mut W, frame: &Frame) -> anyhow::Result<()> {
    let bytes = postcard::to_allocvec(frame)?;
    // Each kind is sent by one end (RoundsDone by both, with one limit).
    let most = limit(bytes[0], Sender::Agent).or(limit(bytes[0], Sender::Coordinator)).unwrap_or(0);
    anyhow::ensure!(
        bytes.len() <= most,
        "a frame (tag {}) of {} bytes is over its {most}-byte limit",
        bytes[0],
        bytes.len()
    );
    w.write_all(&(bytes.len() as u32).to_le_bytes()).await?;
    w.write_all(&bytes).await?;
    w.flush().await?;
    Ok(())
}

/// The next frame `from` the other end sent, or None when it closed the
/// connection between frames. A frame that end never sends, or one over its
/// kind's limit, is an error before its bytes are kept.
pub async fn read<R: AsyncReadExt + Unpin>(r: &mut R, from: Sender) -> anyhow::Result<Option<Frame>> {
    let mut head = [0u8; 5];
    match r.read_exact(&mut head[..4]).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
    anyhow::ensure!(len > 0, "an empty frame");
    r.read_exact(&mut head[4..]).await?;
    let tag = head[4];
    let Some(most) = limit(tag, from) else {
        anyhow::bail!("a frame of a kind ({tag}) that {from:?} never sends: not a faultline peer of this build")
    };
    anyhow::ensure!(len <= most, "a frame (tag {tag}) of {len} bytes is over its {most}-byte limit");
    // Kept as the bytes arrive: a peer that announces more than it sends
    // costs what it sent.
    let mut bytes = Vec::with_capacity(len.min(64 << 10));
    bytes.push(tag);
    r.take(len as u64 - 1).read_to_end(&mut bytes).await?;
    anyhow::ensure!(bytes.len() == len, "the connection closed inside a frame ({} of {len} bytes)", bytes.len());
    Ok(Some(postcard::from_bytes(&bytes)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello() -> Hello {
        Hello {
            protocol: PROTOCOL,
            version: "v".into(),
            commit: "c".into(),
            binary_sha256: "d".into(),
            name: "a".into(),
            host: "h".into(),
            pid: 1,
            cores: 2,
            boot_id: "b".into(),
        }
    }

    /// Every kind of frame has a limit on the side that sends it and none on
    /// the other: a reordered `Frame` fails here, not on the wire.
    #[test]
    fn each_frame_is_limited_on_the_side_that_sends_it() {
        let arm = ArmOrder {
            cell: 0,
            label: "l".into(),
            position: (1, 1),
            target_name: "t".into(),
            uri: "redis://x".into(),
            rate: None,
            arm: u64::MAX,
        };
        let from_agent = [
            Frame::Hello(hello()),
            Frame::Pong { n: u32::MAX, agent_ns: u64::MAX },
            Frame::Ready,
            Frame::Armed { arm: u64::MAX },
            Frame::Progress { ok: u64::MAX, failed: u64::MAX, warmup: u64::MAX },
            Frame::History { arm: u64::MAX, lane: 0, bytes: vec![0; 8] },
            Frame::Failed("x".into()),
            Frame::RoundsDone { lane: u32::MAX, rounds: u64::MAX },
        ];
        let from_coordinator = [
            Frame::Refused("x".into()),
            Frame::Ping { n: u32::MAX },
            Frame::Arm(arm),
            Frame::Start { t0_ns: u64::MAX },
            Frame::Cancel,
            Frame::Disarm,
            Frame::Bye,
        ];
        for (frames, from) in [(&from_agent[..], Sender::Agent), (&from_coordinator[..], Sender::Coordinator)] {
            for frame in frames {
                let bytes = postcard::to_allocvec(frame).unwrap();
                let most = limit(bytes[0], from).unwrap_or_else(|| panic!("tag {} from {from:?}", bytes[0]));
                assert!(bytes.len() <= most, "tag {}: {} bytes over {most}", bytes[0], bytes.len());
                let other = if from == Sender::Agent { Sender::Coordinator } else { Sender::Agent };
                if !matches!(frame, Frame::RoundsDone { .. }) {
                    assert_eq!(limit(bytes[0], other), None, "tag {} from {other:?}", bytes[0]);
                }
            }
        }
    }

    #[tokio::test]
    async fn a_length_prefix_alone_allocates_nothing_and_strangers_are_refused() {
        // 1 GiB announced for a Hello: refused on the prefix and the tag.
        let mut huge: &[u8] = &[0, 0, 0, 0x40, 0];
        let e = read(&mut huge, Sender::Agent).await.err().unwrap().to_string();
        assert!(e.contains("over its 4096-byte limit"), "{e}");
        // An HTTP probe: a frame of a kind no agent sends.
        let mut http: &[u8] = b"GET / HTTP/1.1\r\n\r\n";
        let e = read(&mut http, Sender::Agent).await.err().unwrap().to_string();
        assert!(e.contains("never sends"), "{e}");
        // A frame the coordinator sends, read as if from an agent.
        let mut bye = Vec::new();
        write(&mut bye, &Frame::Bye).await.unwrap();
        assert!(read(&mut &bye[..], Sender::Agent).await.is_err());
        assert!(matches!(read(&mut &bye[..], Sender::Coordinator).await, Ok(Some(Frame::Bye))));
        // Announced, then cut short: an error, not a frame.
        let mut cut = Vec::new();
        write(&mut cut, &Frame::Hello(hello())).await.unwrap();
        cut.truncate(cut.len() - 1);
        let e = read(&mut &cut[..], Sender::Agent).await.err().unwrap().to_string();
        assert!(e.contains("closed inside a frame"), "{e}");
    }
}
