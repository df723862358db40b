//! Operation histories: what every client invoked and what it saw.

pub mod jepsen_edn;
