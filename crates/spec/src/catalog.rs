//! What the spec language needs to know of the target kinds a build
//! holds, asked through a [`Catalog`] the caller passes to [`crate::load`]:
//! whether a kind's options parse, its default program, whether a URI is
//! one it can reach, the op kinds it supports and what its answers let
//! the checkers judge; the checkers it holds ([`CheckerInfo`]); and the
//! fault actions its backends register ([`FaultType`]): each kind's own
//! and each provider's. The kinds (drivers, clients) and the checkers live
//! above this crate; the CLI's catalog answers from them.

use std::sync::Arc;

use faultline_model::ops::{OpKind, TargetKind};

use crate::checkers::CheckerInfo;
use crate::fault::FaultType;
pub use crate::memory::KindCost;
use crate::model::ProviderKind;
use crate::options::OptionsError;

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

/// The target kinds and checkers a build holds.
pub trait Catalog: Sync {
    /// The checkers this build holds, in the order of the registry (the
    /// check crate's), which is the order the docs list their metrics.
    fn checkers(&self) -> &[&'static dyn CheckerInfo];
    /// The names of the kinds this build holds.
    fn names(&self) -> Vec<&'static str>;
    /// Whether `kind` names a kind this build holds: the problem and the
    /// fix otherwise.
    fn known(&self, kind: &TargetKind) -> Result<(), String> {
        let names = self.names();
        match names.contains(&kind.as_str()) {
            true => Ok(()),
            false => Err(format!("`{kind}` is not a target kind faultline knows: use one of {}", names.join(", "))),
        }
    }
    /// `kind` with `options` (the target's, overlaid by a scenario's); the
    /// error names the field under `options` and what is wrong.
    fn kind(&self, kind: &TargetKind, options: Option<&serde_json::Value>) -> Result<Arc<dyn KindInfo>, OptionsError>;
    /// The faults `kind` sends its own servers through its own API
    /// (MongoDB's `stepdown`), on any provider.
    fn kind_faults(&self, kind: &TargetKind) -> Vec<&'static dyn FaultType>;
    /// The faults a provider applies itself (none for `external`).
    fn provider_faults(&self, provider: ProviderKind) -> Vec<&'static dyn FaultType>;
    /// Every fault action the build registers: the providers' (docker's,
    /// then process's) and each kind's own, in that order.
    fn every_fault(&self) -> Vec<&'static dyn FaultType> {
        let mut every = self.provider_faults(ProviderKind::Docker);
        every.extend(self.provider_faults(ProviderKind::Process));
        for name in self.names() {
            every.extend(self.kind_faults(&TargetKind::new(name)));
        }
        every
    }
}

/// The catalog this crate's own tests load specs against: every kind takes
/// no options, supports every op and is served by `true`, a program every
/// machine has. What a real kind accepts is tested with the kinds.
#[cfg(test)]
pub(crate) mod plain {
    use super::*;

    pub struct Plain;

    impl KindInfo for Plain {
        fn default_command(&self) -> &'static str {
            "true"
        }
        fn check_uri(&self, _uri: &str) -> Result<(), String> {
            Ok(())
        }
        fn supports(&self, _op: OpKind) -> bool {
            true
        }
        fn cost(&self) -> KindCost {
            KindCost { connection: 32 << 10, slot: 256 }
        }
    }

    impl Catalog for Plain {
        fn checkers(&self) -> &[&'static dyn CheckerInfo] {
            &crate::checkers::testing::CHECKERS
        }
        fn names(&self) -> Vec<&'static str> {
            vec!["redis", "mongodb", "dynamodb"]
        }
        fn kind(
            &self,
            _kind: &TargetKind,
            options: Option<&serde_json::Value>,
        ) -> Result<Arc<dyn KindInfo>, OptionsError> {
            match options {
                Some(serde_json::Value::Object(m)) if !m.is_empty() => Err((String::new(), "takes no options".into())),
                _ => Ok(Arc::new(Plain)),
            }
        }
        /// `mongodb` has a fault of its own (the tests' stepdown).
        fn kind_faults(&self, kind: &TargetKind) -> Vec<&'static dyn FaultType> {
            match kind.as_str() {
                "mongodb" => crate::fault::testing::OWN.to_vec(),
                _ => Vec::new(),
            }
        }
        fn provider_faults(&self, provider: ProviderKind) -> Vec<&'static dyn FaultType> {
            match provider {
                ProviderKind::Process => crate::fault::testing::PROCESS.to_vec(),
                ProviderKind::Docker => crate::fault::testing::DOCKER.to_vec(),
                ProviderKind::External => Vec::new(),
            }
        }
    }
}
