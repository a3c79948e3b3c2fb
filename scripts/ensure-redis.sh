#!/usr/bin/env bash
# Makes sure redis-server and redis-cli are installed (the Redis store's tests
# start their own servers on loopback ports). Installs them from Debian when
# missing; needs root for that and says so otherwise.
set -euo pipefail
if command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "redis-server is not installed and installing it needs root:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y redis-server" >&2
  exit 1
fi
echo "installing redis-server from Debian..." >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq redis-server >/dev/null
# The package may start a system instance on 6379; the tests never use it.
redis-server --version
