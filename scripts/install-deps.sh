#!/usr/bin/env bash
# Installs what faultline's campaigns and tests need on a Debian machine
# (`scripts/install-deps.sh` for Redis, `scripts/install-deps.sh all` for
# everything the tests drive):
# redis-server and redis-tools (redis-cli, redis-benchmark); fuse3; etcd-server
# and protobuf-compiler (etcd targets and their client's build); secantusd-rs,
# a MongoDB-wire-protocol server (crates.io `secantus-mdb`; no real mongod can
# be installed here), built once per version into a cache outside the
# checkout; and moto's DynamoDB-API server (PyPI `moto[server]`) in a venv
# in that cache. Idempotent; says what it installs.
set -euo pipefail

need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v redis-cli >/dev/null || need+=(redis-tools)
command -v redis-benchmark >/dev/null || need+=(redis-tools)
command -v pgrep >/dev/null || need+=(procps)
command -v cmake >/dev/null || need+=(cmake)
# The TLS tests make their CA and server certificate with it.
command -v openssl >/dev/null || need+=(openssl)
# The disk faults' FUSE filesystem mounts through /dev/fuse itself;
# fusermount3 is there to unmount one by hand.
command -v fusermount3 >/dev/null || need+=(fuse3)
# etcd targets: the server for process targets (docker ones run the
# faultline/etcd image), and protoc, which the etcd client's build needs.
command -v etcd >/dev/null || need+=(etcd-server)
command -v protoc >/dev/null || need+=(protobuf-compiler)

if [ ${#need[@]} -gt 0 ]; then
  # shellcheck disable=SC2207
  need=($(printf '%s\n' "${need[@]}" | sort -u))
  echo "installing with apt-get: ${need[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
echo "redis: $(redis-server --version | cut -d' ' -f3)"
echo "etcd: $(etcd --version | head -n1 | cut -d' ' -f3)"

# secantusd-rs: about 12 minutes to build on 2 cores, so it is built once per
# version under the cache and linked onto PATH; only with `all` (the test
# suite's and the MongoDB campaigns' need, not the quickstart's).
[ "${1:-}" = all ] || exit 0
SECANTUS_VERSION=0.5.3-beta.196
cache="${FAULTLINE_CACHE:-/var/cache/faultline}"
mkdir -p "$cache" 2>/dev/null || cache="$HOME/.cache/faultline"
root="$cache/tools/secantus-mdb-$SECANTUS_VERSION"
if [ ! -x "$root/bin/secantusd-rs" ]; then
  echo "building secantusd-rs $SECANTUS_VERSION (cargo install secantus-mdb, about 12 minutes; cached in $root)"
  build_dir="$(mktemp -d)"
  CARGO_TARGET_DIR="$build_dir" cargo install secantus-mdb --version "$SECANTUS_VERSION" \
    --ignore-rust-version --locked --root "$root.partial" --quiet
  rm -rf "$build_dir" "$root"
  mv "$root.partial" "$root"
fi
bin_dir=/usr/local/bin
[ -w "$bin_dir" ] || { bin_dir="$HOME/.local/bin"; mkdir -p "$bin_dir"; }
ln -sf "$root/bin/secantusd-rs" "$bin_dir/secantusd-rs"
echo "secantusd-rs: $SECANTUS_VERSION ($bin_dir/secantusd-rs)"

# moto_server: the DynamoDB-API server the dynamodb tests drive (a machine
# whose Python already has it is left alone).
MOTO_VERSION=5.2.1
# A PyPI tool in a venv of its own under the cache, by version, linked onto
# PATH: pip_tool VENV_NAME REQUIREMENT COMMAND.
pip_tool() {
  local venv="$cache/tools/$1"
  if [ ! -x "$venv/bin/$3" ]; then
    echo "installing $2 into $venv (pip)"
    rm -rf "$venv.partial"
    python3 -m venv "$venv.partial"
    "$venv.partial/bin/pip" install --quiet "$2"
    rm -rf "$venv"
    mv "$venv.partial" "$venv"
    # The venv's scripts name their interpreter by the path they were built at.
    sed -i "1s|$venv.partial|$venv|" "$venv"/bin/*
  fi
  ln -sf "$venv/bin/$3" "$bin_dir/$3"
}
if ! command -v moto_server >/dev/null; then
  pip_tool "moto-$MOTO_VERSION" "moto[server]==$MOTO_VERSION" moto_server
fi
echo "moto_server: $(command -v moto_server)"

# kubernetes-validate: the Kubernetes API schema, offline, that the agents'
# rendered manifests (faultline agents render --kubernetes) are checked
# against; no Kubernetes control plane can run on these machines.
KUBERNETES_VALIDATE_VERSION=1.37.0
pip_tool "kubernetes-validate-$KUBERNETES_VALIDATE_VERSION" "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION" kubernetes-validate
echo "kubernetes-validate: $KUBERNETES_VALIDATE_VERSION ($bin_dir/kubernetes-validate)"
