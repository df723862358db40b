//! What a target kind declares to be registered: one `pub const KIND:
//! Kind` in the kind's own module, named on one line of the build's list of
//! kinds (the CLI's `kinds::KINDS`, which its cargo features choose), the
//! lookup in that list ([`Kinds`], which the CLI hands the engine), and the
//! helpers its driver constructor parses its `options:` with.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde::de::DeserializeOwned;

use crate::ledger::Resource;
use crate::topology::TopologyKind;
use crate::TargetDriver;
use faultline_model::ops::TargetKind;
use faultline_spec::options::OptionsError;
use faultline_spec::{FaultType, ProviderKind};

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
    /// How the kind's members run in containers and tell their roles;
    /// None: the kind runs in no container (`provider: docker` is a spec
    /// error for it).
    pub members: Option<fn() -> Arc<dyn TopologyKind>>,
    /// The schema of the kind's typed options, for `faultline schema`
    /// (None: the kind takes no options).
    pub options: Option<fn(&mut schemars::SchemaGenerator) -> schemars::Schema>,
    /// The faults the kind applies through its own API (its driver's
    /// [`crate::fault::KindFaults`]), as validation sees them: `Vec::new`
    /// for none.
    pub faults: fn() -> Vec<&'static dyn FaultType>,
    /// How teardown removes what the kind lists in a run ledger
    /// ([`Resource::created_by`] names the kind); None: it lists nothing.
    pub remove_listed: Option<RemoveListed>,
}

/// A line of the build's list of kinds: a kind it holds, or one it was
/// built without (its cargo feature, of the same name, was off), so a spec
/// naming that one gets the fix rather than "unknown kind".
pub enum Listed {
    Held(Kind),
    LeftOut(&'static str),
}

/// The build's list of kinds. The CLI builds the one value (its features
/// choose the list); the spec loader, the engine and teardown look kinds up
/// in it. As the spec loader's catalog it also answers for the build's
/// checkers.
pub struct Kinds {
    pub kinds: &'static [Listed],
    /// The build's checkers (faultline-check's registry, which this crate
    /// does not depend on).
    pub checkers: fn() -> &'static [&'static dyn faultline_spec::CheckerInfo],
    /// The faults each provider applies (the engine's process faults,
    /// faultline-docker's container faults), as validation sees them.
    pub provider_faults: fn(ProviderKind) -> Vec<&'static dyn FaultType>,
}

impl Kinds {
    /// The kinds this build holds.
    pub fn held(&self) -> impl Iterator<Item = &'static Kind> {
        self.kinds.iter().filter_map(|k| match k {
            Listed::Held(kind) => Some(kind),
            Listed::LeftOut(_) => None,
        })
    }

    /// The registered kind named `kind`, or what to do when this build has none.
    pub fn find(&self, kind: &TargetKind) -> Result<&'static Kind, String> {
        if let Some(k) = self.held().find(|k| k.name == kind.as_str()) {
            return Ok(k);
        }
        Err(self.not_held(kind.as_str()))
    }

    /// Why this build cannot take `kind`, and the fix.
    fn not_held(&self, kind: &str) -> String {
        let held = self.held().map(|k| k.name).collect::<Vec<_>>().join(", ");
        let left_out = self.kinds.iter().any(|k| matches!(k, Listed::LeftOut(name) if *name == kind));
        match left_out {
            true => format!(
                "`{kind}` targets need a faultline built with them: `cargo build --release --features {kind}` \
                 (this build holds {held})"
            ),
            false => format!("`{kind}` is not a target kind faultline knows: use one of {held}"),
        }
    }

    /// The driver for `kind` with `options` (the target's, overlaid by a
    /// scenario's when it has some).
    pub fn driver(
        &self,
        kind: &TargetKind,
        options: Option<&serde_json::Value>,
    ) -> Result<Arc<dyn TargetDriver>, OptionsError> {
        let kind = self.find(kind).map_err(|e| (String::new(), e))?;
        (kind.driver)(options)
    }

    /// How members of `kind` run in containers, or why they cannot.
    pub fn members(&self, kind: &TargetKind) -> Result<Arc<dyn TopologyKind>, String> {
        let found = self.find(kind)?;
        let members = found
            .members
            .ok_or_else(|| format!("`{kind}` targets run in no container: use provider process or external"))?;
        Ok(members())
    }
}

impl faultline_spec::Catalog for Kinds {
    fn checkers(&self) -> &[&'static dyn faultline_spec::CheckerInfo] {
        (self.checkers)()
    }

    fn names(&self) -> Vec<&'static str> {
        self.held().map(|k| k.name).collect()
    }

    fn options_schema(&self, kind: &str, generator: &mut schemars::SchemaGenerator) -> Option<schemars::Schema> {
        let options = self.held().find(|k| k.name == kind)?.options?;
        Some(options(generator))
    }

    fn runs_in_containers(&self, kind: &TargetKind) -> bool {
        self.find(kind).is_ok_and(|k| k.members.is_some())
    }

    fn known(&self, kind: &TargetKind) -> Result<(), String> {
        self.find(kind).map(|_| ())
    }

    fn shared_host_members(&self, kind: &TargetKind) -> Option<u32> {
        let members = self.find(kind).ok()?.members?;
        members().shared_host().map(|s| s.default_members)
    }

    fn kind(
        &self,
        kind: &TargetKind,
        options: Option<&serde_json::Value>,
    ) -> Result<Arc<dyn faultline_spec::KindInfo>, OptionsError> {
        self.driver(kind, options).map(|d| d as Arc<dyn faultline_spec::KindInfo>)
    }

    fn kind_faults(&self, kind: &TargetKind) -> Vec<&'static dyn FaultType> {
        self.find(kind).map(|k| (k.faults)()).unwrap_or_default()
    }

    fn provider_faults(&self, provider: ProviderKind) -> Vec<&'static dyn FaultType> {
        (self.provider_faults)(provider)
    }
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
