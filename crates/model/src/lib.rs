//! The results model: results.json and every record in it, the shared
//! enums (op kind, target kind, checker name, error class, role), durations
//! and sizes, value encoding, and number formatting; and the two rules for
//! what leaves or enters faultline that every layer applies: credentials
//! are redacted ([`redact`], also in what is printed: [`stdout`]) and input
//! files are read within a bound ([`input_file`]).
//!
//! It is the bottom of the crate graph: everything else depends on it and it
//! depends on nothing of faultline's, which is what keeps the graph free of
//! cycles. A type belongs here when two layers that must not know each other
//! (the engine that records, the checkers that judge, the report that
//! renders) both read it. Behaviour that needs a runtime, a server or a
//! template stays with its layer; see docs/architecture.md.

pub mod capacity;
pub mod checks;
pub mod command_line;
pub mod compare;
pub mod faults;
pub mod format;
pub mod input_file;
pub mod items;
pub mod labels;
pub mod ops;
pub mod probes;
pub mod provenance;
pub mod recovery;
pub mod redact;
pub mod results;
pub mod roles;
pub mod stats;
pub mod stdout;
pub mod units;
pub mod value;
