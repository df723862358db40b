#!/usr/bin/env bash
# Runs a command while another process keeps one core busy, as a noisy
# neighbour or CPU steal would: the way to show a test fails only when
# faultline is wrong, never because the machine was slow (docs/testing.md).
#
#   scripts/busy-core.sh scripts/test.sh
#   scripts/busy-core.sh cargo test --release --test e2e check_cli
#
# The spinner runs at the command's own priority (nice 0), so the scheduler
# shares the cores between it and the tests; it stops when the command ends,
# however it ends, and the command's exit code is this script's.
set -euo pipefail
if [ "$#" -eq 0 ]; then
    echo "usage: $0 COMMAND [ARG...]" >&2
    exit 3
fi
# One core's worth of work that never blocks: hashing an endless stream.
nice -n 0 sha256sum /dev/zero &
spinner=$!
trap 'kill "$spinner" 2>/dev/null || true; wait "$spinner" 2>/dev/null || true' EXIT
"$@"
