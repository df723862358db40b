# Shared settings for the scripts: a build directory outside the checkout so
# fresh clones (CI) reuse earlier builds. It is keyed by the checkout's path:
# two checkouts sharing one target directory overwrite each other's binaries,
# and a test could then run a binary built from the other tree.
checkout_key="$(pwd -P | sha256sum | cut -c1-12)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/cache/faultline/target-$checkout_key}"
mkdir -p "$CARGO_TARGET_DIR" 2>/dev/null || export CARGO_TARGET_DIR="$HOME/.cache/faultline/target-$checkout_key"
FAULTLINE="$CARGO_TARGET_DIR/release/faultline"
export FAULTLINE
