//! Safety checking, apart from any runtime: the on-disk history format the
//! engine records every op in ([`history`]), the checkers that judge a
//! cell's history against what was stored after the load ([`checker`], one
//! type per checker behind [`checker::Checker`]), the crash-recovery matrix
//! built from their answers ([`durability`]), and the import and export of
//! Jepsen-style histories (`faultline check`, `faultline history`).
//!
//! It reads and writes files and nothing else: no tokio, no server. What a
//! checker needs from the spec or the target (its names, a budget, the
//! stored values and items) is passed in as plain values, so the engine
//! that records and the CLI that imports both call it, and its tests run in
//! seconds. It depends on faultline-model, and on faultline-spec only for
//! what validation asks of a checker (`CheckerInfo`, which each declares).

pub mod bench;
pub mod checker;
pub mod durability;
pub mod history;
