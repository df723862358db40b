#!/usr/bin/env bash
# Builds the Docker images the docker provider's tests run (faultline/redis,
# faultline/moto, faultline/etcd) from Debian packages with fixtures/images/build.sh. Cached
# by the recipe's content: when nothing changed this takes well under a
# second. Needs a running Docker engine, and root or sudo (debootstrap,
# chroot).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! docker info >/dev/null 2>&1; then
  echo "docker-images: the Docker engine is not reachable (is dockerd running?); the docker provider's tests need it" >&2
  exit 1
fi
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
"${sudo_cmd[@]}" fixtures/images/build.sh redis moto etcd
