//! Write faultline workload shapes and gate rules in Rust: see README.md.
// The README's examples are compiled as doc tests (they need both worlds).
#![cfg_attr(all(feature = "shape", feature = "gate"), doc = include_str!("../README.md"))]

// The generated bindings and the export macros name this crate by its path.
extern crate self as faultline_plugin;

mod config;
mod mix;
mod rng;
mod zipf;

pub use config::Config;
pub use mix::Mix;
pub use rng::{Rng, SplitMix64, Streams};
pub use zipf::Zipf;

/// The WIT package version this SDK speaks.
pub const INTERFACE_VERSION: &str = "0.2.0";

#[cfg(feature = "shape")]
pub mod shape;

#[cfg(feature = "gate")]
pub mod gate;

/// The raw bindings wit-bindgen generates for the `workload` world.
#[cfg(feature = "shape")]
#[doc(hidden)]
pub mod workload_bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "faultline:plugin/workload",
        pub_export_macro: true,
        export_macro_name: "__export_workload",
        default_bindings_module: "::faultline_plugin::workload_bindings",
        runtime_path: "::faultline_plugin::__rt::wit_bindgen::rt",
        additional_derives: [PartialEq],
    });
}

/// The raw bindings wit-bindgen generates for the `gate` world.
#[cfg(feature = "gate")]
#[doc(hidden)]
pub mod gate_bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "faultline:plugin/gate",
        pub_export_macro: true,
        export_macro_name: "__export_gate",
        default_bindings_module: "::faultline_plugin::gate_bindings",
        runtime_path: "::faultline_plugin::__rt::wit_bindgen::rt",
        additional_derives: [PartialEq],
    });
}

/// What the export macros need; not part of the API.
#[doc(hidden)]
pub mod __rt {
    pub use wit_bindgen;

    /// Holds a plugin's state between calls. A component instance runs on one
    /// thread and the host never re-enters it, so a `RefCell` in a static is
    /// enough; the `Sync` claim is sound only because wasm32 plugins have no
    /// threads.
    pub struct State<T>(core::cell::RefCell<Option<T>>);

    unsafe impl<T> Sync for State<T> {}

    impl<T> State<T> {
        pub const fn new() -> State<T> {
            State(core::cell::RefCell::new(None))
        }

        pub fn set(&self, value: T) {
            *self.0.borrow_mut() = Some(value);
        }

        pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> Option<R> {
            self.0.borrow_mut().as_mut().map(f)
        }
    }

    impl<T> Default for State<T> {
        fn default() -> Self {
            State::new()
        }
    }
}
