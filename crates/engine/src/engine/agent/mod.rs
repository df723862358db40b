//! Load beyond one machine: a run's lanes on agents. The coordinator
//! (`faultline run --agents …`) keeps everything but the load (targets,
//! faults, the role watch, probes, checkers, gates, the report); agents
//! (`faultline agent`) each run a share of every cell's lanes and send back
//! what they measured, which the coordinator merges exactly (histograms by
//! bucket, counts by sum) into one cell, as if one process had run it.
//! Which lanes are whose: engine/place.rs. The clock: clock.rs. What goes
//! over the wire: wire.rs.

pub(crate) mod clock;
mod coordinator;
pub mod launch;
pub mod link;
pub mod serve;
pub(crate) mod served;
pub(crate) mod wire;

use std::sync::Arc;

use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinHandle;

use crate::metrics::LiveCounters;
pub use coordinator::Agents;
pub use wire::RunShare;

/// One agent's share of a cell, as it arrived.
pub(crate) struct AgentEnd {
    pub agent: String,
    pub done: wire::CellDone,
    /// How much its history's times were widened (its clock's uncertainty).
    pub widened_ns: u64,
}

/// What a run on agents cannot do yet, said before anything starts.
pub fn unsupported(spec: &crate::spec::Spec, plan: &crate::plan::Plan) -> Result<(), String> {
    for cell in &plan.cells {
        let cell_spec = cell.spec(spec);
        let workload = &cell_spec.workloads[&cell.workload];
        let at = format!("workload `{}`", cell.workload);
        if workload.shape.is_some() {
            return Err(format!(
                "{at} takes its ops from a shape plugin, which runs in one process: run it without --agents"
            ));
        }
        if workload.fanout.is_some() {
            return Err(format!(
                "{at} has a publish/subscribe fan-out, which runs in one process: run it without --agents"
            ));
        }
    }
    Ok(())
}

/// In an agent: sends its lanes' counts to the coordinator every 50 ms until
/// aborted; the coordinator's progress line adds up every agent's.
pub(crate) fn relay(live: Vec<Arc<LiveCounters>>, out: UnboundedSender<wire::Frame>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(std::time::Duration::from_millis(50));
        loop {
            ticker.tick().await;
            let (ok, failed, warmup) = live.iter().fold((0, 0, 0), |(o, f, w), c| {
                let (a, b, d) = c.snapshot();
                (o + a, f + b, w + d)
            });
            if out.send(wire::Frame::Progress { ok, failed, warmup }).is_err() {
                return;
            }
        }
    })
}
