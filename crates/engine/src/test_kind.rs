//! What the engine's tests' fake kinds share: the validation half of the
//! kind interface (`KindInfo`), which none of them exercises. Each fake
//! keeps its own `TargetDriver`, which is what its test is about.

/// `KindInfo` for a fake kind of the engine's tests: served by `command`,
/// any URI taken, the op kinds `supports` accepts, a nominal memory cost.
macro_rules! kind_info_for_tests {
    ($kind:ty, command: $command:expr, supports: $supports:expr) => {
        impl $crate::spec::KindInfo for $kind {
            fn default_command(&self) -> &'static str {
                $command
            }
            fn check_uri(&self, _: &str) -> Result<(), String> {
                Ok(())
            }
            fn supports(&self, op: faultline_model::ops::OpKind) -> bool {
                let supports: fn(faultline_model::ops::OpKind) -> bool = $supports;
                supports(op)
            }
            fn cost(&self) -> $crate::spec::KindCost {
                $crate::spec::KindCost { connection: 1 << 10, slot: 64 }
            }
        }
    };
}

pub(crate) use kind_info_for_tests;
