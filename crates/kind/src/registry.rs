//! What a target kind declares to be registered: one `pub const KIND:
//! Kind` in the kind's own module, named on one line of the build's list of
//! kinds (the runner's `target::kinds::KINDS`), and the helpers its driver
//! constructor parses its `options:` with.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde::de::DeserializeOwned;

use crate::ledger::Resource;
use crate::topology::TopologyKind;
use crate::TargetDriver;
use faultline_spec::options::OptionsError;

/// Makes a kind's driver from the options a target gave it.
pub type MakeDriver = fn(Option<&serde_json::Value>) -> Result<Arc<dyn TargetDriver>, OptionsError>;

/// Removes what a run ledger lists that the kind created (a table, a
/// collection), for `faultline teardown`; says what it did.
pub type RemoveListed = for<'a> fn(&'a Resource) -> BoxFuture<'a, anyhow::Result<String>>;

/// One target kind as a build registers it: each kind's module holds its
/// own `pub const KIND: Kind`, and the build's list of kinds names it on one line.
pub struct Kind {
    /// The name a spec's `kind:` writes.
    pub name: &'static str,
    /// The kind's driver with the options a target (overlaid by a
    /// scenario's) gave it; the error names the field under `options`.
    pub driver: MakeDriver,
    /// How the kind's members run in containers and tell their roles.
    pub members: fn() -> Arc<dyn TopologyKind>,
    /// The schema of the kind's typed options, for `faultline schema`
    /// (None: the kind takes no options).
    pub options: Option<fn(&mut schemars::SchemaGenerator) -> schemars::Schema>,
    /// How teardown removes what the kind lists in a run ledger
    /// ([`Resource::created_by`] names the kind); None: it lists nothing.
    pub remove_listed: Option<RemoveListed>,
}

/// A kind's typed options from the spec's `options:` (none: its defaults).
pub fn parse_options<T: DeserializeOwned>(options: Option<&serde_json::Value>) -> Result<T, OptionsError> {
    let empty = serde_json::Value::Object(Default::default());
    let value = options.unwrap_or(&empty);
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { String::new() } else { path };
        (field, e.into_inner().to_string())
    })
}
