//! Applying faults: the run-time half of a registered fault action.
//!
//! Each backend (the process provider, the docker provider, a kind's own
//! API) gives its typed actions ([`faultline_spec::Action`]) an [`Apply`]
//! for what it reaches a target through (`On`: a process slot, a docker
//! topology, the kind's servers) and lists them in one registry of
//! [`Fault<On>`]s: `&Registered::<Kill>::NEW` is one registration line. The
//! scheduler finds an action by name in the target's backend and applies
//! it; what comes back ([`Applied`]) carries its own [`Undo`], which the
//! scheduler's ledger heals through whichever backend made it.

use faultline_model::faults::Restart;
use faultline_spec::fault::Fields;
use faultline_spec::{Action, FaultType, Registered};

/// A fault that was applied and confirmed.
pub struct Applied {
    /// What it hit: containers by member name, a process group, a server.
    pub hit: Vec<String>,
    /// How the effect was confirmed.
    pub evidence: String,
    /// Output of a command the fault ran (`exec`).
    pub output: String,
    /// What undoes it; None when nothing is left to undo (`restart`, `exec`).
    pub undo: Option<Box<dyn Undo>>,
}

impl Applied {
    /// A fault with nothing to undo.
    pub fn done(hit: Vec<String>, evidence: String) -> Applied {
        Applied { hit, evidence, output: String::new(), undo: None }
    }

    /// A fault that `undo` heals.
    pub fn undone_by(hit: Vec<String>, evidence: String, undo: impl Undo + 'static) -> Applied {
        Applied { undo: Some(Box::new(undo)), ..Applied::done(hit, evidence) }
    }
}

/// A fault healed.
pub struct Healed {
    /// How the heal was confirmed.
    pub evidence: String,
    /// The server was started again on its own data after going down this
    /// way (a healed `kill`): a row of the crash-recovery matrix.
    pub restart: Option<Restart>,
}

impl From<String> for Healed {
    fn from(evidence: String) -> Healed {
        Healed { evidence, restart: None }
    }
}

/// What undoes an applied fault. It holds what it needs to reach the
/// target, so the ledger heals it without knowing the backend.
#[async_trait::async_trait]
pub trait Undo: Send + Sync {
    /// Undoes the fault and confirms it; doing so when there is nothing
    /// left to undo is not an error.
    async fn heal(&self) -> anyhow::Result<Healed>;
}

/// A typed action applied through what its backend reaches a target by.
#[async_trait::async_trait]
pub trait Apply<On: Sync + ?Sized>: Action {
    async fn apply(&self, on: &On) -> anyhow::Result<Applied>;
}

/// A registered action of a backend that reaches targets by `On`: what the
/// scheduler finds by name and applies to the fault's fields as written.
#[async_trait::async_trait]
pub trait Fault<On: Sync + ?Sized>: FaultType {
    async fn apply(&self, fields: &Fields, on: &On) -> anyhow::Result<Applied>;
}

#[async_trait::async_trait]
impl<On: Sync + ?Sized, A: Apply<On>> Fault<On> for Registered<A> {
    async fn apply(&self, fields: &Fields, on: &On) -> anyhow::Result<Applied> {
        // Validation parsed the same fields already; this cannot fail but
        // for a spec that skipped it, which the error then names.
        let action = self.parse(fields).map_err(|(field, e)| anyhow::anyhow!("`{}` field `{field}`: {e}", A::NAME))?;
        action.apply(on).await
    }
}

/// Applies the action named `action` of `registry` to `on`.
pub async fn apply<On: Sync + ?Sized>(
    registry: &[&'static dyn Fault<On>],
    backend: &str,
    action: &str,
    fields: &Fields,
    on: &On,
) -> anyhow::Result<Applied> {
    let Some(fault) = registry.iter().find(|f| f.name() == action) else {
        let takes = faultline_spec::fault::listed(registry.iter().map(|f| f.name()));
        anyhow::bail!("`{action}` is not a fault of {backend} targets (they take {takes})")
    };
    fault.apply(fields, on).await
}

/// A registry as validation sees it.
pub fn declared<On: Sync + ?Sized + 'static>(registry: &[&'static dyn Fault<On>]) -> Vec<&'static dyn FaultType> {
    registry.iter().map(|f| *f as &'static dyn FaultType).collect()
}

/// One server a kind's own fault is sent to: a member the fault names, or
/// a process or external target's one server.
#[derive(Debug, Clone)]
pub struct Server {
    pub name: String,
    /// The URI of that one server (not the target's, which may be a set).
    pub uri: String,
}

/// A capability: faults the kind applies through its own API (MongoDB's
/// step-down), on any provider. The kind registers them with
/// [`crate::registry::Kind::faults`]; the driver applies them with its
/// own options (credentials, TLS).
#[async_trait::async_trait]
pub trait KindFaults: Send + Sync {
    /// Applies `action` with its `fields` to each of `servers` and confirms it.
    async fn apply(&self, action: &str, fields: &Fields, servers: &[Server]) -> anyhow::Result<Applied>;
}
