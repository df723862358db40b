//! Keeps credentials out of everything a run writes or shows: the rules live
//! in `faultline_model::redact`, the spec loader finds a spec's credentials
//! (`faultline_spec::credentials`).

pub use faultline_model::redact::{sweep, text};
