#!/usr/bin/env bash
# Run 223: the landed source's own build (BD: main + load-tile-32bit + ldmatrix-lane-parts):
# tools/gpu/run_tests.sh, then `bench step` with its defaults (batches 1, 8, 32, 128; 8K prefill).
set -u -o pipefail
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
tar -C build -xJf build/all.tar.xz
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
t0=$SECONDS
timeout 330 tools/gpu/run_tests.sh > "$OUT/run_tests.txt" 2>&1
echo "run_tests rc=$? s=$((SECONDS - t0))"; grep -E "^== |passed" "$OUT/run_tests.txt"
timeout 90 build/gpu-bundle/bin/beamserve bench step --device cuda > "$OUT/bench-step.txt" 2>&1
echo "bench step rc=$? s=$((SECONDS - t0))"; cat "$OUT/bench-step.txt" | tail -30
