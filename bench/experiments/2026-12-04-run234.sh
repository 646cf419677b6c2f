#!/usr/bin/env bash
# Run 234: D = run 233's C with block 0's ids / weights written and the flag released by warp 0
# after the grouping (C: by the whole block before it, behind two block barriers, which held
# block 0's first weights back). D's MoE tests, then `bench step --batches 1,2,4 --steps 200
# --prefill-tokens 0` A / D alternating four rounds (C left out: the carry limit).
# all.tar.xz: D's bundle (gpu-bundle/: beamserve, kernels_cuda_tests), A's beamserve
# (var/beamserve-a).
set -u -o pipefail
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
tar -C build -xJf build/all.tar.xz
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
t0=$SECONDS
timeout 200 build/gpu-bundle/bin/kernels_cuda_tests \
  --gtest_filter='CudaMoeRoutedExperts*:CudaMoeRouter*:CudaMoeExperts.Graph*:CudaMoeExperts.SmallBatch*:CudaMoeExperts.NoExpert*' \
  > "$OUT/kernels-moe-d.txt" 2>&1
echo "d moe tests rc=$? s=$((SECONDS - t0))"; grep -E "^\[  (PASSED|FAILED) |FAILED" "$OUT/kernels-moe-d.txt" | head -8
a=build/var/beamserve-a d=build/gpu-bundle/bin/beamserve
for r in 1 2 3 4; do
  for v in a d; do
    bin=${!v}
    $bin bench step --device cuda --batches 1,2,4 --steps 200 --prefill-tokens 0 \
      --json /tmp/step.json > /tmp/s.log 2>&1 || { echo "$v step failed"; tail -3 /tmp/s.log; continue; }
    python3 -c "
import json
for d in json.load(open('/tmp/step.json'))['decode']:
    print('$v$r batch %d layer %.4f ms %.4fx moe %.4f ms' % (d['batch'], d['decode_layer_ms'], d['decode_layer_ratio'], d['moe_layer_ms']))"
  done
done | tee "$OUT/step-acd.txt"
echo "done s=$((SECONDS - t0))"
