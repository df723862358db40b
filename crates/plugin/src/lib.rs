//! The WebAssembly plugin host: workload shapes and gate rules as components
//! of the `faultline:plugin` WIT package (plugins/wit/faultline.wit), each
//! instance sandboxed (memory cap, a deadline in CPU time per call, a WASI
//! with every capability withheld).
//!
//! wasmtime and cranelift are the largest part of a cold build, so they are
//! this crate's cargo feature `wasm`. Without it the crate presents the same
//! API ([`absent`](self)): a spec that names a plugin is refused at the
//! plugin's field with the command that builds them in, and the types the
//! engine names (host, plugin, shape, feed) are uninhabited, so every plugin
//! path is provably unreachable. The plain types both share are in
//! `interface`.

mod interface;

#[cfg(feature = "wasm")]
mod wasm;
#[cfg(feature = "wasm")]
pub use wasm::*;

#[cfg(not(feature = "wasm"))]
mod absent;
#[cfg(not(feature = "wasm"))]
pub use absent::*;

/// Whether this build runs plugins (the `wasm` feature).
pub const BUILT_IN: bool = cfg!(feature = "wasm");

/// What a build without plugins says to a spec or command that needs them.
pub const BUILD_WITH_PLUGINS: &str =
    "this faultline was built without WebAssembly plugins: `cargo build --release --features plugins` builds them in";
