# Shared settings for the scripts: one build directory outside the checkout,
# so fresh clones (CI) reuse the dependencies built before.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/cache/faultline/target}"
mkdir -p "$CARGO_TARGET_DIR" 2>/dev/null || export CARGO_TARGET_DIR="$HOME/.cache/faultline/target"
FAULTLINE="$CARGO_TARGET_DIR/release/faultline"
export FAULTLINE
