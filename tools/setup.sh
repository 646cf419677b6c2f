#!/usr/bin/env bash
# Installs everything beamserve needs on Debian 12 (apt packages, npm test clients) and builds the
# cpu-release preset; the binary ends up at build/beamserve. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake ninja-build ccache pkg-config git
  nlohmann-json3-dev libopenblas-dev libpcre2-dev libutf8proc-dev libboost-dev libsleef-dev
  libgtest-dev libgmock-dev libbenchmark-dev python3-numpy python3-torch clang)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
# Node.js runs the reference tokenizer/template packages and the real-client tests; a node that is
# already installed (e.g. NodeSource's, which bundles npm) is used as it is.
command -v node >/dev/null && command -v npm >/dev/null || missing+=(nodejs npm)
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}"
fi

cmake --preset cpu-release >/dev/null
cmake --build --preset cpu-release -j "$(nproc)"
ln -sfn cpu-release/src/cli/beamserve build/beamserve
echo "built build/beamserve"
