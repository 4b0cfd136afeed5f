#!/usr/bin/env bash
# Installs the Debian 12 packages latte builds against, but only when something is missing,
# so `make` on a prepared machine stays quiet and offline.
set -euo pipefail
packages=(cmake g++ make pkg-config qemu-user libomp-dev libopenblas-dev libxsimd-dev xtl-dev nlohmann-json3-dev
          libcli11-dev libfmt-dev libpcre2-dev libedit-dev libgtest-dev libgmock-dev libbenchmark-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing missing packages: ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
