//! Safety checkers over recorded operation histories.

pub mod linearizability;
