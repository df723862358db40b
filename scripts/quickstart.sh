#!/usr/bin/env bash
# The quickstart: build faultline, run specs/quickstart.yaml against a local
# redis-server, and say where the report is. The build holds what the
# quickstart needs (Redis, processes, containers) and leaves out what is
# heavy to compile (WebAssembly plugins, the MongoDB driver, the AWS SDK):
# `cargo build --release` builds those in (docs/performance.md#builds).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
scripts/install-deps.sh
cargo build --release --quiet -p faultline --no-default-features
"$FAULTLINE" run specs/quickstart.yaml "$@"
