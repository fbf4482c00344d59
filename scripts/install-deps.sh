#!/usr/bin/env bash
# Installs the Debian packages pg_ramp needs to build and test, only those missing.
# Idempotent: a machine that has everything runs no apt-get at all.
# Runs as root, or through sudo when it is available.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libgtest-dev libgmock-dev
  liburing-dev libibverbs-dev librdmacm-dev ibverbs-providers
  libtbb-dev
  postgresql-15 postgresql-server-dev-15 postgresql-client-15 postgresql-contrib
  gnuplot-nox
  clang libclang-rt-14-dev
  python3
  tcpdump
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing missing packages: ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1; then
  sudo=(sudo)
else
  echo "install-deps: need root or sudo to install: ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
