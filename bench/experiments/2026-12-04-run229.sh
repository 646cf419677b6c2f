#!/usr/bin/env bash
# Run 229: E = 02d6bed (D) + clustered decode launches compiled without the TMA path and without
# the ring's 1 KB alignment slack (decode_tma()), and the decode maps cached per context (eager
# calls encoded two maps per four-warp launch). E's kernels_cuda_tests; D / E on the clustered
# sliding rows (batches 1-2, where D was 2-6% slower than 34b7dd4) and the batch-1 layer; both
# binaries' eager decode calls at 8,200 keys.
# all.tar.xz: E's bundle (gpu-bundle/), D's beamserve (var/beamserve-d).
set -u -o pipefail
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
tar -C build -xJf build/all.tar.xz
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
t0=$SECONDS
timeout 200 build/gpu-bundle/bin/kernels_cuda_tests > "$OUT/kernels-tests-e.txt" 2>&1
echo "e kernels_cuda_tests rc=$? s=$((SECONDS - t0))"
grep -E "^\[  (PASSED|FAILED) |FAILED|Failure" "$OUT/kernels-tests-e.txt" | head -10
d=build/var/beamserve-d e=build/gpu-bundle/bin/beamserve
for v in d e; do
  bin=${!v}
  $bin bench kernels --device cuda --context 8200 --batches 1,4 --prefill-tokens 0 2>&1 |
    grep -E "^attention decode" | sed "s/^/$v: /"
done | tee "$OUT/eager-de.txt"
AB_BATCHES=1,2 AB_CONTEXTS="512 8200 32768" timeout 150 tools/gpu/ab_decode.sh $d $e 2 \
  > "$OUT/ab-d-e.txt" 2>&1
echo "ab d-e rc=$? s=$((SECONDS - t0))"
cat "$OUT/ab-d-e.txt"
