//! What a coordinator and its agents say to each other: one TCP connection
//! per agent, the agent dialing in, carrying length-prefixed frames (a u32
//! length, then a postcard-encoded [`Frame`]). Both ends are the same
//! build (the handshake refuses anything else), so the frames need no
//! versioning of their own beyond [`PROTOCOL`].

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::metrics::CellMetrics;
use faultline_model::stats::ClientCpu;

/// Raised when a frame's meaning changes.
pub const PROTOCOL: u32 = 1;

/// A frame larger than this is refused rather than allocated: a cell's
/// metrics with every success kept for window gates stay well under it.
const MAX_FRAME: usize = 1 << 30;

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
    Armed,
    /// The measured window's counts so far, for the progress line.
    Progress {
        ok: u64,
        failed: u64,
        warmup: u64,
    },
    /// A piece of lane `lane`'s history file, in order.
    History {
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
    anyhow::ensure!(bytes.len() <= MAX_FRAME, "a frame of {} bytes is over the {MAX_FRAME}-byte limit", bytes.len());
    w.write_all(&(bytes.len() as u32).to_le_bytes()).await?;
    w.write_all(&bytes).await?;
    w.flush().await?;
    Ok(())
}

/// The next frame, or None when the other end closed the connection
/// between frames.
pub async fn read<R: AsyncReadExt + Unpin>(r: &mut R) -> anyhow::Result<Option<Frame>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let len = u32::from_le_bytes(len) as usize;
    anyhow::ensure!(len <= MAX_FRAME, "a frame of {len} bytes is over the {MAX_FRAME}-byte limit");
    let mut bytes = vec![0u8; len];
    r.read_exact(&mut bytes).await?;
    Ok(Some(postcard::from_bytes(&bytes)?))
}
