//! What the spec language needs to know of the target kinds a build
//! holds, asked through a [`Catalog`] the caller passes to [`crate::load`]:
//! whether a kind's options parse, its default program, whether a URI is
//! one it can reach, the op kinds it supports and what its answers let
//! the checkers judge; the checkers it holds ([`CheckerInfo`]); and the
//! fault actions its backends register ([`FaultType`]): each kind's own
//! and each provider's. The kinds (drivers, clients) and the checkers live
//! above this crate; the CLI's catalog answers from them.

use std::sync::Arc;

use faultline_model::ops::TargetKind;

use crate::checkers::CheckerInfo;
use crate::fault::FaultType;
use crate::kind_info::KindInfo;
use crate::options::OptionsError;
use crate::target::ProviderKind;

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
    /// Whether `kind`'s members can run in containers (`provider: docker`).
    fn runs_in_containers(&self, kind: &TargetKind) -> bool {
        let _ = kind;
        true
    }
    /// How many members a process target of `kind` starts unless its spec
    /// says (`members`); None: the kind's process targets are one server.
    fn shared_host_members(&self, kind: &TargetKind) -> Option<u32> {
        let _ = kind;
        None
    }
    /// The JSON Schema of `kind`'s `options:`, from its typed options (what
    /// `faultline schema` says of them); None: the kind takes none.
    fn options_schema(&self, kind: &str, generator: &mut schemars::SchemaGenerator) -> Option<schemars::Schema>;
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
    use crate::memory::KindCost;
    use faultline_model::ops::OpKind;

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
        fn options_schema(&self, _: &str, _: &mut schemars::SchemaGenerator) -> Option<schemars::Schema> {
            None
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
