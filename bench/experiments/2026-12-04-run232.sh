#!/usr/bin/env bash
# Run 232: B = main 0152f56 + the routing in the small-batch experts' kernels at T <= 2
# (moe_routed_experts: the router kernel stops at its partial sums, every gate_up block routes).
# B's tools/gpu/run_tests.sh (with the new CudaMoeRoutedExperts tests), then `bench step
# --batches 1,2,4 --steps 200 --prefill-tokens 0` A / B alternating three rounds (batch 4: the
# unchanged path, a control).
# all.tar.xz: B's bundle (gpu-bundle/), A's beamserve (var/beamserve-a).
set -u -o pipefail
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
tar -C build -xJf build/all.tar.xz
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
t0=$SECONDS
timeout 330 tools/gpu/run_tests.sh > "$OUT/run_tests.txt" 2>&1
echo "run_tests rc=$? s=$((SECONDS - t0))"; grep -E "^== |passed" "$OUT/run_tests.txt"
grep -E "FAILED|RoutedExperts.*(OK|FAIL)" "$OUT/run_tests.txt" | head -12
a=build/var/beamserve-a b=build/gpu-bundle/bin/beamserve
for r in 1 2 3; do
  for v in a b; do
    bin=${!v}
    $bin bench step --device cuda --batches 1,2,4 --steps 200 --prefill-tokens 0 \
      --json "$OUT/step-$v$r.json" > /tmp/s.log 2>&1 || { echo "$v step failed"; tail -3 /tmp/s.log; continue; }
    python3 -c "
import json
for d in json.load(open('$OUT/step-$v$r.json'))['decode']:
    print('$v$r batch %d layer %.4f ms %.4fx moe %.4f ms' % (d['batch'], d['decode_layer_ms'], d['decode_layer_ratio'], d['moe_layer_ms']))"
  done
done | tee "$OUT/step-ab.txt"
echo "done s=$((SECONDS - t0))"
