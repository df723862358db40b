#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it: install what the tests need,
# build the Docker images the docker tests run (cached), then every unit and
# end-to-end test (release build: the e2e tests measure).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
scripts/install-deps.sh
scripts/docker-images.sh
# The tests run the committed plugins in fixtures/plugins/. Where the guest
# toolchains are installed (plugins/install-toolchain.sh), first check that
# those are what plugins/build.sh makes from the sources.
if [ -x /usr/bin/rustc ] && command -v wasm-tools >/dev/null && command -v componentize-py >/dev/null; then
  plugins/build.sh --check
else
  echo "test: no wasm guest toolchain here; testing the committed fixtures/plugins (plugins/install-toolchain.sh installs one)"
fi
# The build directory is shared with earlier checkouts. Cargo decides what
# to rebuild from file times, and once ran a test binary another checkout
# had built: touching this checkout's own sources makes its crate rebuild
# (a minute) while the dependencies stay cached.
find runner tests -name '*.rs' -exec touch {} +
touch Cargo.toml runner/Cargo.toml reports/templates/*.j2
cargo test --release "$@"
