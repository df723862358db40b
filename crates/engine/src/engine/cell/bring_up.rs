//! The first phase: arm a cell before its clock starts. Takes the cell
//! (`CellRun`); gives `Armed`: the target's driver with the scenario's
//! options, the before-probes' outputs, every client connected, and the
//! cell's own shape plugin. Separate because nothing here is measured:
//! connection set-up and plugin start-up happen before the window, and a
//! cell that cannot be armed fails (or is interrupted) without load.

use std::sync::{Arc, Mutex};

use super::{CellRun, Kept, Stopped};
use crate::engine::place::Place;
use crate::plugin::shape::{Setup, Shape};
use crate::plugin::Limits;
use faultline_kind::{Connection, TargetDriver};
use faultline_model::probes::ProbeWhen;

/// A cell ready to run: everything its lanes need before the clock starts.
pub struct Armed {
    pub driver: Arc<dyn TargetDriver>,
    /// One per lane that runs here (its cell-wide index), connected.
    pub clients: Vec<(usize, Connection)>,
    /// In an agent: when the cell's clock starts, as the coordinator said.
    pub start_at: Option<tokio::time::Instant>,
    /// The cell's instance of its workload's shape plugin, if it has one.
    pub shape: Option<Arc<Mutex<Shape>>>,
    /// The before-probes' outputs.
    pub kept: Kept,
}

pub async fn bring_up(run: &CellRun<'_>) -> Result<Armed, Stopped> {
    let target_spec = run.target_spec();
    let options =
        faultline_spec::options::overlay(target_spec.options.as_ref(), run.engine.scenario(run.cell).options.as_ref());
    let driver = match run.engine.kinds.driver(&target_spec.kind, options.as_ref()) {
        Ok(d) => d,
        Err((field, e)) => return Err(Stopped::failed(Kept::default(), format!("options.{field}: {e}"))),
    };
    // The probes are the coordinator's: an agent only runs load.
    let probes = match run.engine.place.is_agent() {
        true => Vec::new(),
        false => run.probes(ProbeWhen::Before).await,
    };
    let kept = Kept { probes, faults: Vec::new() };
    let (connections, _) = run.lanes();
    let lanes = run.engine.place.lanes(connections);

    // Connect every client before the clock starts: connection set-up is
    // not part of what a cell measures.
    let connecting = futures::future::try_join_all(
        lanes.iter().map(|_| driver.connect(&run.running.uri, Arc::clone(&run.workload))),
    );
    let n = lanes.len();
    let clients: Vec<Connection> = tokio::select! {
        r = tokio::time::timeout(target_spec.ready_timeout.0, connecting) => match r {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => return Err(Stopped::failed(kept, format!("cannot open {n} connections: {e:#}"))),
            Err(_) => return Err(Stopped::failed(kept, format!("opening {n} connections took longer than {}", target_spec.ready_timeout))),
        },
        _ = run.engine.cancel.cancelled() => return Err(Stopped::interrupted(kept)),
    };
    let clients = lanes.into_iter().zip(clients).collect();
    // On agents, each arms its own share.
    if let Place::Coordinator(agents) = &run.engine.place {
        let armed = tokio::select! {
            armed = agents.arm(run) => armed,
            _ = run.engine.cancel.cancelled() => return Err(Stopped::interrupted(kept)),
        };
        if let Err(why) = armed {
            return Err(Stopped::failed(kept, why));
        }
    }

    let shape = match start_shape(run, connections) {
        Ok(s) => s,
        Err(e) => return Err(Stopped::failed(kept, e)),
    };
    Ok(Armed { driver, clients, start_at: None, shape, kept })
}

/// A cell's own instance of its workload's shape plugin, if it has one,
/// seeded from the run's seed and the cell.
fn start_shape(run: &CellRun<'_>, connections: u32) -> Result<Option<Arc<Mutex<Shape>>>, String> {
    let (engine, cell, workload) = (run.engine, run.cell, &run.workload);
    let (Some(spec), Some(plugin), Some(host)) =
        (&workload.shape, engine.plugins.shapes.get(&cell.workload), &engine.plugins.host)
    else {
        return Ok(None);
    };
    let setup = Setup::of(workload, connections, !run.checkers().is_empty());
    let limits = Limits::of(spec, crate::plugin::shape::DEFAULT_DEADLINE);
    let seed = engine.spec.seed ^ cell.stream_salt().wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let shape = Shape::start(host, plugin, limits, &spec.config, seed, setup).map_err(|e| e.to_string())?;
    Ok(Some(Arc::new(Mutex::new(shape))))
}
