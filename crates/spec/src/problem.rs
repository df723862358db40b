//! What validation says of a spec: the failing field's dotted path (e.g.
//! `scenarios[2].capacity.rate.to`) and the message; spec.rs turns the
//! path into the file's line and column.

/// The failing field's dotted path and the message.
pub type Problem = (String, String);
