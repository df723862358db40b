#!/usr/bin/env bash
# Installs what faultline's campaigns and tests need on a Debian machine:
# redis-server and redis-tools (redis-cli, redis-benchmark). Idempotent; says
# what it installs.
set -euo pipefail

need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v redis-cli >/dev/null || need+=(redis-tools)
command -v redis-benchmark >/dev/null || need+=(redis-tools)
command -v pgrep >/dev/null || need+=(procps)

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
