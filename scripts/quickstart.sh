#!/usr/bin/env bash
# The quickstart: build faultline, run specs/quickstart.yaml against a local
# redis-server, and say where the report is.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
scripts/install-deps.sh
cargo build --release --quiet
"$FAULTLINE" run specs/quickstart.yaml "$@"
