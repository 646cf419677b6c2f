#!/usr/bin/env bash
# Run 244: the GPU check of main f8876f5 (the grouped GEMM's two-band tiles at 33-192 rows an
# expert): tools/gpu/run_tests.sh and `bench step` defaults (JSON kept).
# all.tar.xz: f8876f5's bundle (gpu-bundle/).
set -u -o pipefail
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
tar -C build -xJf build/all.tar.xz
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
t0=$SECONDS
timeout 330 tools/gpu/run_tests.sh > "$OUT/run_tests.txt" 2>&1
echo "run_tests rc=$? s=$((SECONDS - t0))"; grep -E "^== |passed" "$OUT/run_tests.txt"
grep -E "FAILED" "$OUT/run_tests.txt" | head -5
timeout 90 build/gpu-bundle/bin/beamserve bench step --device cuda --json "$OUT/bench-step.json" \
  > "$OUT/bench-step.txt" 2>&1
echo "bench step rc=$? s=$((SECONDS - t0))"; tail -22 "$OUT/bench-step.txt"
