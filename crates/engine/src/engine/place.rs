//! Where a cell's lanes run: every lane in this process; on the agents this
//! process coordinates (it runs none, and keeps the faults, the role watch,
//! the probes and the verdict); or, in an agent, the agent's share. Lane
//! `i` of a cell runs on agent `i % agents`: a closed loop's clients are
//! dealt out that way, and an open loop's schedule with them (its op `k`
//! goes to lane `k % connections`), so the agents' ops together are
//! exactly the ops one process would send, each at its own due time.

use std::sync::Arc;

use tokio::sync::mpsc::UnboundedSender;

use super::agent::{wire::Frame, Agents};
use super::rounds::RemoteRounds;

pub enum Place<'a> {
    Alone,
    Coordinator(&'a Agents),
    Agent(AgentSeat),
}

/// An agent's place in its run, and where it sends what it measures.
pub struct AgentSeat {
    pub index: u32,
    pub agents: u32,
    pub out: UnboundedSender<Frame>,
    /// Contention rounds: the other agents' clients' progress.
    pub rounds: Arc<RemoteRounds>,
}

impl Place<'_> {
    /// The lanes (cell-wide indices) of `connections` that run here.
    pub(crate) fn lanes(&self, connections: u32) -> Vec<usize> {
        match self {
            Place::Alone => (0..connections as usize).collect(),
            Place::Coordinator(_) => Vec::new(),
            Place::Agent(seat) => (seat.index as usize..connections as usize).step_by(seat.agents as usize).collect(),
        }
    }

    pub(crate) fn is_agent(&self) -> bool {
        matches!(self, Place::Agent(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agents_deal_out_the_lanes_and_together_run_each_once() {
        let (out, _rx) = tokio::sync::mpsc::unbounded_channel();
        let mut all = Vec::new();
        for index in 0..3 {
            let place = Place::Agent(AgentSeat { index, agents: 3, out: out.clone(), rounds: Arc::default() });
            let lanes = place.lanes(8);
            assert!(lanes.iter().all(|l| l % 3 == index as usize), "{lanes:?}");
            all.extend(lanes);
        }
        all.sort();
        assert_eq!(all, Place::Alone.lanes(8));
        assert!(Place::Agent(AgentSeat { index: 2, agents: 3, out, rounds: Arc::default() }).lanes(2).is_empty());
    }
}
