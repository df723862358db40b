//! One cell's way through the engine, as phases that each take what the one
//! before gave and name what they give: `bring_up` arms the cell (driver,
//! connected clients, shape plugin), `run_window` runs the load beside the
//! fault schedule, the role watch and the window probes, `merge` joins the
//! lanes' books and decides the window, `summarize` turns them into the
//! cell's stats, `judge` runs the checkers, and `finish` runs the after-probes
//! and writes the cell's result. `Engine::run_cell` lists them in order.
//!
//! Here: what every phase reads (`CellRun`), what a cell keeps however it
//! ends (`Kept`), and how a cell that stops early ends (`Stopped`).

mod bring_up;
mod finish;
mod judge;
mod merge;
mod summarize;
#[cfg(test)]
mod tests;
mod window;

pub use bring_up::bring_up;
pub use finish::finish;
pub use judge::judge;
pub use merge::merge;
pub use summarize::summarize;
pub use window::{run_window, Ran};

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::Engine;
use crate::plan::Cell;
use crate::probe::ProbeTarget;
use crate::provider::RunningTarget;
use crate::spec::arrivals::Arrivals;
use crate::spec::{Load, OpenSpec, Spec, StageSpan, TargetSpec};
use faultline_check::checker::{self, Checker};
use faultline_kind::workload::Workload;
use faultline_model::faults::FaultRecord;
use faultline_model::probes::{ProbeOutput, ProbeWhen};
use faultline_model::results::{CellResult, CellStatus};

/// What every phase of a cell reads and none changes: the engine, the cell,
/// where it stands in the run, its running target and its workload.
pub struct CellRun<'a> {
    pub engine: &'a Engine<'a>,
    pub cell: &'a Cell,
    /// 1-based, and the run's number of cells: for the console, the probes'
    /// file names and the history's directory.
    pub position: (usize, usize),
    pub running: &'a RunningTarget,
    pub workload: Arc<Workload>,
    /// How long the cells after this one take: for the progress line's
    /// estimate of the run's end.
    pub remaining_after: Duration,
}

impl CellRun<'_> {
    /// The spec as the cell's matrix point filled it in.
    pub(crate) fn spec(&self) -> &Spec {
        self.cell.spec(self.engine.spec)
    }

    pub(crate) fn target_spec(&self) -> &TargetSpec {
        &self.spec().targets[&self.cell.target]
    }

    pub(crate) fn load(&self) -> Load<'_> {
        self.spec().profiles[&self.cell.profile].load()
    }

    /// How many connections the load opens, and how many ops each keeps in flight.
    pub(crate) fn lanes(&self) -> (u32, u32) {
        match self.load() {
            Load::Closed(s) => (s.clients, s.in_flight),
            Load::Open(o) => (o.connections, o.in_flight),
        }
    }

    /// An open loop's schedule from the cell's start (the warm-up's); None
    /// in a closed loop.
    pub(crate) fn schedule(&self) -> Option<(&OpenSpec, Arrivals)> {
        let Load::Open(open) = self.load() else { return None };
        let t = &self.cell.timing;
        Some((open, open.arrivals(t.warmup, t.stage_scale)))
    }

    /// Where the profile's stages lie in the measured window (none without).
    pub(crate) fn stages(&self) -> Vec<StageSpan> {
        self.spec().profiles[&self.cell.profile].stage_spans(self.cell.timing.stage_scale)
    }

    /// The checkers of the cell's scenario: its own, or the campaign's;
    /// none in a capacity search (recording a history costs throughput).
    pub(crate) fn checkers(&self) -> Vec<&'static dyn Checker> {
        let scenario = self.engine.scenario(self.cell);
        let names = match scenario.capacity {
            Some(_) => &[],
            None => scenario.checkers.as_deref().unwrap_or(&self.engine.spec.checkers),
        };
        names.iter().map(|n| checker::named(n.as_str()).expect("a validated spec names registered checkers")).collect()
    }

    /// Where the cell's lanes write their histories and the checkers read them.
    pub(crate) fn history_dir(&self) -> PathBuf {
        self.engine.history_dir.join(format!("{:03}", self.position.0))
    }

    fn probe_at(&self) -> ProbeTarget<'_> {
        ProbeTarget { instance: &self.cell.instance, target: self.running, run_dir: self.engine.run_dir }
    }

    /// The probes that name this cell's target (`when: before` or `after`),
    /// run one after another.
    pub(crate) async fn probes(&self, when: ProbeWhen) -> Vec<ProbeOutput> {
        let at = self.probe_at();
        let mut outputs = Vec::new();
        for p in self.engine.probes_for(self.cell, &self.cell.target, when) {
            outputs.push(at.run(p, Some(self.position.0 - 1)).await);
        }
        outputs
    }
}

/// What a cell records on its way that its result keeps however it ends:
/// the probes that ran, and the faults (which ran and were healed before a
/// cell failed is part of what happened).
#[derive(Default)]
pub struct Kept {
    pub probes: Vec<ProbeOutput>,
    pub faults: Vec<FaultRecord>,
}

/// A cell that ended before its last phase: failed (with why) or
/// interrupted, with what it had kept by then.
pub struct Stopped {
    status: CellStatus,
    error: Option<String>,
    kept: Kept,
}

impl Stopped {
    fn failed(kept: Kept, error: String) -> Stopped {
        Stopped { status: CellStatus::Failed, error: Some(error), kept }
    }

    /// Why the cell stopped, in a line.
    pub fn why(&self) -> String {
        match (&self.status, &self.error) {
            (_, Some(e)) => e.clone(),
            (CellStatus::Interrupted, None) => "interrupted".into(),
            (status, None) => format!("{status:?}"),
        }
    }

    fn interrupted(kept: Kept) -> Stopped {
        Stopped { status: CellStatus::Interrupted, error: None, kept }
    }

    /// The cell's result: `skipped` (the cell's labels, nothing measured)
    /// with how it stopped and what it kept.
    pub fn into_result(self, skipped: CellResult) -> CellResult {
        CellResult {
            status: self.status,
            error: self.error,
            probes: self.kept.probes,
            faults: self.kept.faults,
            ..skipped
        }
    }
}
