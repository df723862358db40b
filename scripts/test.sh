#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it: install what the tests need,
# build the Docker images the docker tests run (cached), then every unit and
# end-to-end test (release build: the e2e tests measure).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
scripts/install-deps.sh
scripts/docker-images.sh
cargo test --release "$@"
