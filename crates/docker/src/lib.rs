//! faultline's Docker layer. Its one job: run a target as containers and
//! fault them, so that bollard (the engine's client) is this crate's alone.
//! - [`client`]: networks and containers with limits, readiness waits, logs;
//! - ops.rs: the container operations faults are made of, each confirmed
//!   ([`Docker::pause`], [`Docker::isolate`], …);
//! - teardown.rs: finding and removing what faultline created by its labels
//!   ([`Docker::remove_labeled`], [`TeardownGuard`], [`Docker::list_owned`]);
//! - [`members`]: who is who among a running target's containers, roles
//!   asked of the servers now;
//! - [`provider`]: the docker provider, which brings a target up and down;
//! - [`fault`]: the docker provider's registered faults and what undoes them;
//! - [`swarm`]: a run's agents as a Docker Swarm service.
//!
//! It sits beside the kinds, above `faultline-kind` (a kind's
//! [`TopologyKind`](faultline_kind::topology::TopologyKind) and
//! [`TargetDriver`](faultline_kind::TargetDriver) say how its members start
//! and tell their roles), and below the engine, which keeps what is its
//! own and hands this crate plain data instead:
//! - the build's list of kinds: [`provider::start`] is handed the kind's
//!   `TopologyKind` rather than looking it up;
//! - `RunningTarget`, the one type every provider returns: the provider
//!   returns a [`provider::Up`], which the engine holds as its `Started`;
//! - the fault ledger: [`fault::apply`] returns faultline-kind's `Applied`
//!   with an undo of this crate's own, which the ledger heals through
//!   without knowing it is a container's.

pub mod client;
pub mod fault;
pub mod members;
mod ops;
pub mod provider;
pub mod swarm;
mod teardown;

#[cfg(test)]
mod tests;

pub use client::{
    missing_image_message, Container, ContainerSpec, Docker, Labels, Network, ReadyCheck, State, CONFIRM_TIMEOUT,
    MEMBER_LABEL, OWNER, OWNER_LABEL, PID_LABEL, RUN_LABEL, TARGET_LABEL,
};
pub use ops::{Confirmed, ExecOutput};
pub use teardown::{remove_labeled_blocking, Owned, Removed, ResourceKind, TeardownGuard};
