#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it: install what the tests need,
# build the Docker images the docker tests run (cached), then every unit and
# end-to-end test (release build: the e2e tests measure).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
scripts/install-deps.sh all
scripts/docker-images.sh
# The tests run the committed plugins in fixtures/plugins/. First prove they
# are what plugins/build.sh makes from the sources: install the guest
# toolchains (Debian packages, and tools cargo-installed or pip-installed by
# pinned version outside the checkout, so a second run finds them), rebuild
# every plugin and compare.
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo --preserve-env=PATH,HOME,CARGO_HOME)
"${sudo_cmd[@]}" plugins/install-toolchain.sh
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
plugins/build.sh --check
# The build directory is shared with earlier checkouts. Cargo decides what
# to rebuild from file times, and once ran a test binary another checkout
# had built: touching this checkout's own sources makes its crate rebuild
# (a minute) while the dependencies stay cached.
find runner crates tests -name '*.rs' -exec touch {} +
touch Cargo.toml runner/Cargo.toml crates/*/Cargo.toml crates/kinds/*/Cargo.toml reports/templates/*.j2
# The quickstart's lean build (no plugins, MongoDB or DynamoDB: see
# runner/Cargo.toml) is not what the tests run: check that it compiles
# without a warning, so it cannot rot.
cargo rustc -p faultline --bin faultline --no-default-features --profile check -- -D warnings
# --tests: unit and integration tests, without rustdoc's doc-test pass (no
# crate has a doc example; it cost 30 s a run). The e2e tests that need the
# machine alone are #[ignore]d ("alone: ...") and run after the rest, in a
# pass of their own (tests/e2e/support.rs says why).
cargo test --release --tests "$@"
cargo test --release --test e2e "$@" -- --ignored
