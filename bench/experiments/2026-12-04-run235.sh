#!/usr/bin/env bash
# Run 235: E = main + each narrow small-batch experts kernel instantiated per grouping path
# (kWarpGroups: one warp up to 32 routed rows, else the bitonic sort; today both paths sit in
# one narrow kernel, and run 154 found the wide kernels 1.5-5% slower with the warp path
# compiled in). E's small-batch MoE tests, then `bench step --batches 1,4,8,32 --steps 200
# --prefill-tokens 0` A / E alternating four rounds.
# all.tar.xz: E's bundle (gpu-bundle/: beamserve, kernels_cuda_tests), A's beamserve
# (var/beamserve-a).
set -u -o pipefail
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
tar -C build -xJf build/all.tar.xz
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
t0=$SECONDS
timeout 200 build/gpu-bundle/bin/kernels_cuda_tests --gtest_filter='CudaMoeExperts.*:CudaMoeRouter*' \
  > "$OUT/kernels-moe-e.txt" 2>&1
echo "e moe tests rc=$? s=$((SECONDS - t0))"; grep -E "^\[  (PASSED|FAILED) |FAILED" "$OUT/kernels-moe-e.txt" | head -8
a=build/var/beamserve-a e=build/gpu-bundle/bin/beamserve
for r in 1 2 3 4; do
  for v in a e; do
    bin=${!v}
    $bin bench step --device cuda --batches 1,4,8,32 --steps 200 --prefill-tokens 0 \
      --json /tmp/step.json > /tmp/s.log 2>&1 || { echo "$v step failed"; tail -3 /tmp/s.log; continue; }
    python3 -c "
import json
for d in json.load(open('/tmp/step.json'))['decode']:
    print('$v$r batch %d layer %.4f ms %.4fx moe %.4f ms' % (d['batch'], d['decode_layer_ms'], d['decode_layer_ratio'], d['moe_layer_ms']))"
  done
done | tee "$OUT/step-ae.txt"
echo "done s=$((SECONDS - t0))"
