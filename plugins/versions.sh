# Tool versions for building the plugins, sourced by build.sh and
# install-toolchain.sh. The host embeds wasmtime 48.0.8, which reads
# components with wasmparser 0.254; these tools are of the same era
# (wasm-tools 1.254.x is wasmparser 0.254.x; wit-bindgen 0.60.0 is built on
# wit-component/wasm-encoder 0.254.x), so what they write the host can read.
WASM_TOOLS_VERSION=1.254.2
WIT_BINDGEN_VERSION=0.60.0     # the CLI (C bindings); the Rust crate is pinned in Cargo.toml
COMPONENTIZE_PY_VERSION=0.25.1
# Debian bookworm packages (apt), recorded for reference:
#   rustc-web / cargo-web / rust-web-src 1.96.0+dfsg1-1~deb12u2
#   clang 1:14.0-55.7~deb12u1 (clang-14 14.0.6), lld 14, wasi-libc 0.0~git20220510.9886d3d-2,
#   libclang-rt-14-dev-wasm32 1:14.0.6-12
