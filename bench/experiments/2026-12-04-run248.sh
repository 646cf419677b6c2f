#!/usr/bin/env bash
# Run 248: the GPU check of main 3972016 (the two-band tiles' SwiGLU epilogue without spills,
# on f8876f5): tools/gpu/run_tests.sh and `bench step` defaults (JSON kept).
# all.tar.xz: 3972016's bundle (gpu-bundle/).
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
