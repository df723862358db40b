#!/usr/bin/env bash
# Installs what plugins/build.sh needs to build the plugins from source, on
# Debian 12 (bookworm) with only the package registries reachable (no rustup
# targets, no wasi-sdk download). Idempotent: what is there at the right
# version is left alone. Run as root (apt-get).
#
#   Rust guests  rustc-web/cargo-web (Rust 1.96) + rust-web-src, building std
#                for wasm32-unknown-unknown with -Zbuild-std; lld for wasm-ld
#   C guests     clang 14, wasi-libc, compiler-rt wasm32 builtins
#   tools        wasm-tools and wit-bindgen-cli from crates.io (cargo install,
#                built with the machine's cargo)
#   Python       componentize-py from PyPI
#
# The versions are pinned to the era of the host's wasmtime 48
# (wasmparser 0.254): see versions.sh.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=versions.sh
. "$here/versions.sh"

say() { printf '==> %s\n' "$*"; }

# --- Debian packages -------------------------------------------------------
apt_packages=(rustc-web cargo-web rust-web-src lld wasi-libc clang libclang-rt-14-dev-wasm32)
missing=()
for p in "${apt_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    say "apt-get install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -q "${missing[@]}"
else
    say "Debian packages present: ${apt_packages[*]}"
fi

# --- cargo-installed tools -------------------------------------------------
# The machine's own cargo (rustup's, if any) builds these host tools; the
# Debian cargo would do too.
host_cargo="$(command -v cargo || true)"
[ -n "$host_cargo" ] || host_cargo=/usr/bin/cargo
cargo_bin="${CARGO_HOME:-$HOME/.cargo}/bin"

installed_version() { # tool -> "1.2.3" or ""
    local bin="$cargo_bin/$1"
    [ -x "$bin" ] || bin="$(command -v "$1" || true)"
    [ -n "$bin" ] && [ -x "$bin" ] || return 0
    "$bin" --version 2>/dev/null | awk '{print $2}'
}

if [ "$(installed_version wasm-tools)" != "$WASM_TOOLS_VERSION" ]; then
    say "cargo install wasm-tools@$WASM_TOOLS_VERSION (a few minutes)"
    nice -n 10 "$host_cargo" install --locked "wasm-tools@$WASM_TOOLS_VERSION"
else
    say "wasm-tools $WASM_TOOLS_VERSION present"
fi

if [ "$(installed_version wit-bindgen)" != "$WIT_BINDGEN_VERSION" ]; then
    say "cargo install wit-bindgen-cli@$WIT_BINDGEN_VERSION (C and Rust generators only)"
    nice -n 10 "$host_cargo" install --locked "wit-bindgen-cli@$WIT_BINDGEN_VERSION" --no-default-features --features c,rust
else
    say "wit-bindgen $WIT_BINDGEN_VERSION present"
fi

# --- componentize-py -------------------------------------------------------
py="${PYTHON:-python3}"
if [ "$("$py" -m pip show componentize-py 2>/dev/null | awk '/^Version:/{print $2}')" != "$COMPONENTIZE_PY_VERSION" ]; then
    say "pip install componentize-py==$COMPONENTIZE_PY_VERSION"
    "$py" -m pip install -q "componentize-py==$COMPONENTIZE_PY_VERSION"
else
    say "componentize-py $COMPONENTIZE_PY_VERSION present"
fi

case ":$PATH:" in
    *":$cargo_bin:"*) ;;
    *) say "note: add $cargo_bin to PATH for wasm-tools and wit-bindgen" ;;
esac
say "done; build the plugins with plugins/build.sh"
