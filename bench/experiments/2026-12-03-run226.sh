#!/usr/bin/env bash
# Run 226: C = B (run 225) with the TMA tiles only in unclustered launches (clustered sliding rows
# at batches 1-2: every key by cp.async again, no mbarriers) and no mbarrier work at all without
# maps; run 225 had B 1% slower on the batch-1 layer and 7% on the 8,200-key sliding batch-1 row.
# all.tar.xz: C's bundle (gpu-bundle/), A = 34b7dd4's and B's beamserve (var/).
set -u -o pipefail
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
tar -C build -xJf build/all.tar.xz
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
t0=$SECONDS
a=build/var/beamserve-main b=build/var/beamserve-b c=build/gpu-bundle/bin/beamserve
for r in 1 2 3; do
  for v in a b c; do
    bin=${!v}
    $bin bench step --device cuda --batches 1 --steps 200 --prefill-tokens 0 --json /tmp/s.json \
      > /tmp/s.log 2>&1 || { echo "$v step failed"; tail -3 /tmp/s.log; continue; }
    python3 -c "import json,sys; r=json.load(open('/tmp/s.json'))['decode'][0]; print('$v$r batch 1 layer %.4f ms %.3fx' % (r['decode_layer_ms'], r['decode_layer_ratio']))"
  done
done | tee "$OUT/step-abc.txt"
echo "steps s=$((SECONDS - t0))"
AB_BATCHES=1,2,4,32,128 AB_CONTEXTS="512 8200 32768" timeout 200 tools/gpu/ab_decode.sh $a $c 1 \
  > "$OUT/ab-a-c.txt" 2>&1
echo "ab a-c rc=$? s=$((SECONDS - t0))"
grep -v "batch 1:" "$OUT/ab-a-c.txt"
timeout 150 build/gpu-bundle/bin/kernels_cuda_tests --gtest_filter='AttentionCuda.*' \
  > "$OUT/attention-tests-c.txt" 2>&1
echo "c attention tests rc=$? s=$((SECONDS - t0))"
grep -E "^\[  (PASSED|FAILED) |FAILED|Failure|rror" "$OUT/attention-tests-c.txt" | head -20
