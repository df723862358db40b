//! The engine: runs a campaign. Its one job is to take a loaded spec and
//! its plan and run every cell against real targets, whatever happens, and
//! say what was measured.
//!
//! The pipeline reads top to bottom: spec → plan (both faultline-spec) →
//! the engine's phases ([`Engine::run`]: targets up, then per cell
//! bring-up, load window with its fault schedule and probes, merge,
//! summarize, judge by the checkers, finish; engine/cell/) → the cells'
//! results, which faultline-judge turns into comparisons, gates and a
//! verdict, and the CLI into results.json (results.rs) that faultline-report
//! renders. The load runs here, or on agents
//! (engine/agent/: the coordinator, `faultline agent`'s side, the wire);
//! targets come from providers (provider/: process, external, docker via
//! faultline-docker) and reach their kind only through faultline-kind. The
//! kinds themselves are the CLI's choice (cargo features): it hands the
//! engine the build's list as a [`faultline_kind::registry::Kinds`].
//!
//! The engine prints nothing: what it has to say (a cell measuring, a
//! fault healed, a warning, each cell's live counts) goes out as
//! [`events`] to a watcher the caller gives it; the CLI's draws the
//! console.

mod engine;
pub mod events;
pub mod fault;
mod metrics;
mod probe;
pub mod provenance;
mod provider;
pub mod results;
#[cfg(test)]
mod test_kind;

pub use engine::agent;
pub use engine::{load_threads::LoadThreads, place::Place, Engine, EngineOutcome};

use faultline_model::{command_line, input_file, redact};
use faultline_plugin as plugin;
use faultline_spec as spec;
use faultline_spec::plan;
