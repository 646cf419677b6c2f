#!/usr/bin/env bash
# Run 227: the landing candidate D (run 226's C + DecodeRowsAreBitIdenticalAcrossBlockSizes):
# tools/gpu/run_tests.sh, `bench step` defaults, then the batch-1 step A (34b7dd4) / D alternating
# three rounds and both binaries' cluster count line at 8,200 keys (the clustered sliding rows at
# batch 1 were 6% slower in runs 225-226 with or without TMA).
# all.tar.xz: D's bundle (gpu-bundle/), A's beamserve (var/beamserve-main).
set -u -o pipefail
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
tar -C build -xJf build/all.tar.xz
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
t0=$SECONDS
timeout 330 tools/gpu/run_tests.sh > "$OUT/run_tests.txt" 2>&1
echo "run_tests rc=$? s=$((SECONDS - t0))"; grep -E "^== |passed" "$OUT/run_tests.txt"
grep -E "BlockSizes|FAILED" "$OUT/run_tests.txt" | head -5
timeout 90 build/gpu-bundle/bin/beamserve bench step --device cuda > "$OUT/bench-step.txt" 2>&1
echo "bench step rc=$? s=$((SECONDS - t0))"; tail -22 "$OUT/bench-step.txt"
a=build/var/beamserve-main d=build/gpu-bundle/bin/beamserve
for r in 1 2 3; do
  for v in a d; do
    bin=${!v}
    $bin bench step --device cuda --batches 1 --steps 200 --prefill-tokens 0 --json /tmp/s.json \
      > /tmp/s.log 2>&1 || { echo "$v step failed"; tail -3 /tmp/s.log; continue; }
    python3 -c "import json; r=json.load(open('/tmp/s.json'))['decode'][0]; print('$v$r batch 1 layer %.4f ms %.3fx' % (r['decode_layer_ms'], r['decode_layer_ratio']))"
  done
done | tee "$OUT/step-ad.txt"
for v in a d; do
  bin=${!v}
  $bin bench kernels --device cuda --context 8200 --batches 1 --prefill-tokens 0 2>&1 |
    grep -iE "clusters|attention decode sliding" | head -4 | sed "s/^/$v: /"
done | tee "$OUT/clusters-ad.txt"
echo "done s=$((SECONDS - t0))"
