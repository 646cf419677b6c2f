#!/usr/bin/env bash
# Runs every CPU test: sets up (tools/setup.sh), then ctest on the cpu-release build (unit,
# golden, invariance, tokenizer/template/server tests against the npm reference clients).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
if [ -f tests/node/package.json ]; then
  (cd tests/node && npm install --no-audit --no-fund --loglevel=error)
fi
ctest --preset cpu-release -j "$(nproc)" --timeout 900
