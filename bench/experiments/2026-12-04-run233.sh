#!/usr/bin/env bash
# Run 233: run 232 had B (routing in the small-batch kernels at T <= 2) slower than A (main) at
# batch 1, 2 and at batch 4 (no routing there). C = B with the routing gate_up kernel a template
# instantiation of its own (the other kernels carry none of its code; non-routing narrow gate_up
# 116 registers as A's). C's MoE tests and model_beam_cuda_tests, then `bench step --batches 1,2,4
# --steps 200 --prefill-tokens 0` A / C alternating three rounds (B left out: the carry limit).
# all.tar.xz: C's bundle (gpu-bundle/: beamserve and the two test binaries), A's beamserve
# (var/beamserve-a).
set -u -o pipefail
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
tar -C build -xJf build/all.tar.xz
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
t0=$SECONDS
timeout 200 build/gpu-bundle/bin/kernels_cuda_tests \
  --gtest_filter='CudaMoeRoutedExperts*:CudaMoeRouter*:CudaMoeExperts.Graph*:CudaMoeExperts.SmallBatch*:CudaMoeExperts.NoExpert*' \
  > "$OUT/kernels-moe-c.txt" 2>&1
echo "c moe tests rc=$? s=$((SECONDS - t0))"; grep -E "^\[  (PASSED|FAILED) |FAILED" "$OUT/kernels-moe-c.txt" | head -8
timeout 150 build/gpu-bundle/bin/model_beam_cuda_tests > "$OUT/model-c.txt" 2>&1
echo "c model tests rc=$? s=$((SECONDS - t0))"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED" "$OUT/model-c.txt" | head -8
a=build/var/beamserve-a c=build/gpu-bundle/bin/beamserve
for r in 1 2 3; do
  for v in a c; do
    bin=${!v}
    $bin bench step --device cuda --batches 1,2,4 --steps 200 --prefill-tokens 0 \
      --json /tmp/step.json > /tmp/s.log 2>&1 || { echo "$v step failed"; tail -3 /tmp/s.log; continue; }
    python3 -c "
import json
for d in json.load(open('/tmp/step.json'))['decode']:
    print('$v$r batch %d layer %.4f ms %.4fx moe %.4f ms' % (d['batch'], d['decode_layer_ms'], d['decode_layer_ratio'], d['moe_layer_ms']))"
  done
done | tee "$OUT/step-abc.txt"
echo "done s=$((SECONDS - t0))"
