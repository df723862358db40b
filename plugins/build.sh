#!/usr/bin/env bash
# Builds every plugin from source and copies the components to
# fixtures/plugins/ (examples) and fixtures/plugins/bad/ (test plugins), so
# the normal test run needs no guest toolchain.
#
#   plugins/build.sh            build all
#   plugins/build.sh rust       only the Rust plugins (also: c, python, bad)
#   plugins/build.sh --check    build into a scratch folder and compare with
#                               the committed fixtures (reproducibility)
#
# Install the toolchains with plugins/install-toolchain.sh. Versions are in
# plugins/versions.sh.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
# shellcheck source=versions.sh
. "$here/versions.sh"

out="$root/fixtures/plugins"
check=0
parts=()
for a in "$@"; do
    case "$a" in
        --check) check=1 ;;
        rust | c | python | bad) parts+=("$a") ;;
        *) echo "usage: $0 [--check] [rust|c|python|bad]..." >&2; exit 2 ;;
    esac
done
((${#parts[@]})) || parts=(rust c python bad)
if ((check)); then
    out="$(mktemp -d)"
    trap 'rm -rf "$out"' EXIT
fi
want() { [[ " ${parts[*]} " == *" $1 "* ]]; }

say() { printf '==> %s\n' "$*"; }
die() { printf 'build.sh: %s\n' "$*" >&2; exit 1; }

export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
install_hint="run plugins/install-toolchain.sh (or see plugins/README.md)"

# --- tools -----------------------------------------------------------------
need() { # tool "how to install"
    command -v "$1" >/dev/null || die "$1 not found: $2; $install_hint"
}
need_version() { # tool version "how to install"
    need "$1" "$3"
    local v
    v="$("$1" --version 2>/dev/null | awk '{print $2}')"
    [ "$v" = "$2" ] || die "$1 is $v, need $2 (the host's wasmtime 48 reads what $2 writes): $3"
}

need_version wasm-tools "$WASM_TOOLS_VERSION" "cargo install --locked wasm-tools@$WASM_TOOLS_VERSION"

# The Rust guests: Debian's rustc-web builds std for wasm32-unknown-unknown
# from rust-web-src (-Zbuild-std; RUSTC_BOOTSTRAP lets a stable rustc take -Z
# flags). RUST_RUSTC/RUST_CARGO override, e.g. for a nightly toolchain.
rust_rustc="${RUST_RUSTC:-/usr/bin/rustc}"
rust_cargo="${RUST_CARGO:-/usr/bin/cargo}"
if want rust || want bad; then
    [ -x "$rust_rustc" ] || die "$rust_rustc not found: apt-get install rustc-web cargo-web rust-web-src; $install_hint"
    [ -x "$rust_cargo" ] || die "$rust_cargo not found: apt-get install cargo-web; $install_hint"
    [ -d "$("$rust_rustc" --print sysroot)/lib/rustlib/src/rust/library" ] ||
        die "no Rust library source for -Zbuild-std: apt-get install rust-web-src; $install_hint"
    need wasm-ld "apt-get install lld"
fi
if want c; then
    need_version wit-bindgen "$WIT_BINDGEN_VERSION" \
        "cargo install --locked wit-bindgen-cli@$WIT_BINDGEN_VERSION --no-default-features --features c,rust"
    need clang "apt-get install clang"
    [ -f /usr/include/wasm32-wasi/stdlib.h ] && [ -f /usr/lib/wasm32-wasi/libc.a ] ||
        die "no wasi-libc sysroot in /usr: apt-get install wasi-libc; $install_hint"
    ls /usr/lib/llvm-*/lib/clang/*/lib/wasi/libclang_rt.builtins-wasm32.a >/dev/null 2>&1 ||
        die "no compiler-rt builtins for wasm32: apt-get install libclang-rt-14-dev-wasm32; $install_hint"
fi
if want python; then
    need_version componentize-py "$COMPONENTIZE_PY_VERSION" "pip install componentize-py==$COMPONENTIZE_PY_VERSION"
fi

mkdir -p "$out" "$out/bad"
work="$here/build"
mkdir -p "$work"

# Checks a component: valid, of the expected world, importing only what is
# allowed; then puts it in place.
finish() { # component dest-name allowed-imports(regex, "" for none)
    local comp="$1" dest="$out/$2" allowed="$3"
    wasm-tools validate "$comp"
    local imports
    imports="$(wasm-tools component wit "$comp" | sed -n '/^world root {/,/^}/p' | awk '$1 == "import" {print $2}')"
    if [ -n "$imports" ]; then
        local bad
        bad="$(grep -vE "${allowed:-^$}" <<<"$imports" || true)"
        [ -z "$bad" ] || die "$2 imports what it must not: $bad"
    fi
    cp "$comp" "$dest"
    say "$(printf '%-34s %8d bytes' "${dest#"$root"/}" "$(stat -c %s "$dest")")"
}

# Core module must import nothing (no WASI, no env).
no_core_imports() { # core.wasm
    local text imports
    text="$(wasm-tools print "$1")"
    imports="$(grep -E '^ *\(import ' <<<"$text" || true)"
    [ -z "$imports" ] || die "$1 imports (it must import nothing): $(head -5 <<<"$imports")"
}

# --- Rust --------------------------------------------------------------------
rust_build() { # package
    # Same bytes from any checkout: no absolute paths of this machine in the
    # output (panic locations name source files).
    local registry="${CARGO_HOME:-$HOME/.cargo}/registry"
    RUSTC="$rust_rustc" RUSTC_BOOTSTRAP=1 \
        CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_LINKER=wasm-ld \
        RUSTFLAGS="--remap-path-prefix=$here=/plugins --remap-path-prefix=$registry=/cargo-registry" \
        CARGO_TARGET_DIR="$here/target" \
        nice -n 10 "$rust_cargo" build --manifest-path "$here/Cargo.toml" --locked --release \
        -Zbuild-std=std,panic_abort --target wasm32-unknown-unknown -p "$1"
}

rust_component() { # package dest allowed-imports
    local core="$here/target/wasm32-unknown-unknown/release/${1//-/_}.wasm"
    rust_build "$1"
    no_core_imports "$core"
    wasm-tools component new "$core" -o "$work/$1.wasm"
    finish "$work/$1.wasm" "$2" "$3"
}

if want rust; then
    say "Rust examples ($("$rust_rustc" --version))"
    rust_component zipf-mix zipf-mix.wasm ""
    rust_component hot-toggle hot-toggle.wasm ""
    rust_component p3-criteria p3-criteria.wasm ""
fi

# --- C -------------------------------------------------------------------------
if want c; then
    say "C example ($(clang --version | head -1))"
    c_dir="$work/slo-gate"
    rm -rf "$c_dir" && mkdir -p "$c_dir"
    # Bindings for the gate world, with the component type as an object file.
    wit-bindgen c --world gate --out-dir "$c_dir" "$here/wit" >/dev/null 2>&1
    # No startfiles and no entry: a library module. wasi-libc's malloc, string
    # and snprintf functions import nothing; the check below proves it.
    clang --target=wasm32-wasi --sysroot=/usr -O2 -g0 -DNDEBUG -std=c11 -Wall -Wextra -Werror \
        -Wno-unused-parameter -Wno-missing-field-initializers \
        -mexec-model=reactor -nostartfiles -Wl,--no-entry -Wl,--strip-all \
        -ffile-prefix-map="$here"=/plugins -ffile-prefix-map="$work"=/build \
        -I "$c_dir" -o "$c_dir/core.wasm" \
        "$here/examples/slo-gate/slo_gate.c" "$c_dir/gate.c" "$c_dir/gate_component_type.o"
    no_core_imports "$c_dir/core.wasm"
    wasm-tools component new "$c_dir/core.wasm" -o "$c_dir/slo-gate.wasm"
    finish "$c_dir/slo-gate.wasm" slo-gate.wasm ""
fi

# --- Python --------------------------------------------------------------------
if want python; then
    say "Python example (componentize-py $COMPONENTIZE_PY_VERSION)"
    # The interpreter is snapshotted after importing the app. The snapshot
    # is not byte-for-byte reproducible (its heap differs from build to
    # build); --check compares its WIT instead.
    (cd "$here/examples/error-budget" &&
        PYTHONDONTWRITEBYTECODE=1 nice -n 10 componentize-py -d "$here/wit" -w gate \
            componentize app -o "$work/error-budget.wasm" >/dev/null)
    rm -rf "$here/examples/error-budget/__pycache__"
    # WASI is allowed here: the host gives it a WASI with nothing in it.
    finish "$work/error-budget.wasm" error-budget.wasm '^wasi:'
fi

# --- test plugins (fixtures/plugins/bad/) -----------------------------------------
if want bad; then
    say "test plugins"
    rust_component misbehave-shape bad/misbehave-shape.wasm ""
    rust_component misbehave-gate bad/misbehave-gate.wasm ""
    # Built against a copy of the WIT whose package is faultline:plugin@1.0.0.
    vm_wit="$here/tests/version-mismatch/wit/faultline.wit"
    sed -E "s/^package faultline:plugin@[0-9.]+;$/package faultline:plugin@1.0.0;/" "$here/wit/faultline.wit" >"$vm_wit.tmp"
    grep -q '^package faultline:plugin@1.0.0;$' "$vm_wit.tmp" || die "cannot make the 1.0.0 WIT copy"
    if cmp -s "$vm_wit.tmp" "$vm_wit"; then rm "$vm_wit.tmp"; else mv "$vm_wit.tmp" "$vm_wit"; fi
    rust_component version-mismatch bad/version-mismatch.wasm ""
    # A core module, not a component.
    wasm-tools parse "$here/tests/not-a-component.wat" -o "$out/bad/not-a-component.wasm"
    wasm-tools validate "$out/bad/not-a-component.wasm"
    say "$(printf '%-34s %8d bytes' "fixtures/plugins/bad/not-a-component.wasm" "$(stat -c %s "$out/bad/not-a-component.wasm")")"
    # Not WebAssembly at all.
    cp "$here/tests/not-wasm.txt" "$out/bad/not-wasm.wasm"
    say "$(printf '%-34s %8d bytes' "fixtures/plugins/bad/not-wasm.wasm" "$(stat -c %s "$out/bad/not-wasm.wasm")")"
fi

if ((check)); then
    say "comparing with the committed fixtures"
    status=0
    while IFS= read -r f; do
        rel="${f#"$out"/}"
        if cmp -s "$f" "$root/fixtures/plugins/$rel"; then
            echo "  same       $rel"
        elif [ "$rel" = error-budget.wasm ] &&
            [ "$(wasm-tools component wit "$f")" = "$(wasm-tools component wit "$root/fixtures/plugins/$rel")" ]; then
            # componentize-py snapshots an initialised interpreter whose heap
            # differs from build to build (hash secrets, random state).
            echo "  same WIT   $rel (bytes differ: componentize-py output is not reproducible)"
        else
            echo "  DIFFERENT  $rel"
            status=1
        fi
    done < <(find "$out" -name '*.wasm' | sort)
    exit "$status"
fi
say "done"
