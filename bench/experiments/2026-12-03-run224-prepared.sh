#!/usr/bin/env bash
# Run 224 (prepared 2026-12-03, not run): where the batch-1 8,200-key full decode launch's warps
# wait after b2d44bb cut load_tile's instructions by a fifth (runs 220-223 gained only 1-4%).
# Needs build/gpu-bundle.tar.xz from tools/gpu/build.sh on main (carry it and this script).
# Run 209's command on the same case, so its summary compares with run 209's (99aac56):
#   `run` `bash bench/experiments/2026-12-03-run224-prepared.sh`, carry ["build/gpu-bundle.tar.xz"]
# Then locally: xz -dc sass.csv.xz > sass.csv; tools/gpu/sass_profile.py sass.csv.
set -u -o pipefail
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
tar -C build -xJf build/gpu-bundle.tar.xz
SKIP=10 OUT="$OUT/full-8200-b1" tools/gpu/ncu_source.sh decode_kernel 1 bench kernels \
  --device cuda --context 8200 --batches 1 --prefill-tokens 0 --reps 1
# The 32,768-key full row at batch 1, which lost ~1.4 µs to the 32-bit rows (runs 220, 222).
SKIP=10 OUT="$OUT/full-32768-b1" tools/gpu/ncu_source.sh decode_kernel 1 bench kernels \
  --device cuda --context 32768 --batches 1 --prefill-tokens 0 --reps 1
