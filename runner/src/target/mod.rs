//! The target kinds this build holds: how to reach, probe and drive one
//! kind of database. A new kind is one folder implementing
//! `faultline_kind::TargetDriver` (and, for members in containers,
//! `faultline_kind::topology::TopologyKind`) that declares its `KIND`, plus
//! its line in [`kinds::KINDS`] (and a cargo feature when it brings a heavy
//! driver). The interface itself is the faultline-kind crate.

#[cfg(feature = "dynamodb")]
pub mod dynamodb;
pub mod kinds;
#[cfg(feature = "mongodb")]
pub mod mongodb;
mod redis;

pub use kinds::{driver, CATALOG};
