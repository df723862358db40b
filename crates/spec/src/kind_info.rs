//! What validation asks of one target kind, with the options a target (or
//! scenario) gave it: its default program, whether a URI or an option can
//! apply, the op kinds it supports, what its answers let the checkers
//! judge, and what a client of it costs. The build's kinds answer it
//! (their drivers, above this crate); the [`crate::Catalog`] hands them out.

use faultline_model::ops::OpKind;

use crate::memory::KindCost;

/// A kind, with the options one target (or scenario) gave it, as validation
/// sees it.
pub trait KindInfo: Send + Sync {
    /// The binary a `process` provider starts when the spec names none.
    fn default_command(&self) -> &'static str;
    /// Whether an external target's `uri` is one this kind can reach (its
    /// scheme, host and port parse): the problem and the fix otherwise.
    fn check_uri(&self, uri: &str) -> Result<(), String>;
    /// Whether these options can apply to a target reached at `uri` (None:
    /// a server faultline starts): the option at fault and why not, so an
    /// option that would be silently unused is an error instead.
    fn check_options_for(&self, uri: Option<&str>) -> Result<(), (String, String)> {
        let _ = uri;
        Ok(())
    }
    fn supports(&self, op: OpKind) -> bool;
    /// Whether the server acknowledges writes (MongoDB's `w: 0` does not),
    /// which the lost-acknowledged-write checker needs.
    fn acknowledges_writes(&self) -> bool {
        true
    }
    /// Whether a put or delete answers with the item it replaced (DynamoDB's
    /// `ALL_OLD`), which the hot-key checker follows.
    fn returns_old_images(&self) -> bool {
        false
    }
    /// What one client and one op in flight of this kind cost faultline's
    /// memory, for the estimate that refuses a load too big to hold.
    fn cost(&self) -> KindCost;
}
