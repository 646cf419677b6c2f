#!/usr/bin/env bash
# Run 225: B = 34b7dd4 + the tensor-core decode's K/V tiles by TMA (a box per block piece, lane 0
# queues, a stage mbarrier per warp ring; the lanes' cp.asyncs only for edge keys and odd block
# sizes) and 32-bit block-table entries (run 224: the int64 entry's sign extension waited on the
# table load, 5% of the 32K launch's samples). A = 34b7dd4 (its kernels = b2d44bb).
# Carry build/all.tar.xz: B's tools/gpu/build.sh bundle (gpu-bundle/) and A's beamserve
# (var/beamserve-main).
set -u -o pipefail
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
tar -C build -xJf build/all.tar.xz
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
t0=$SECONDS
a=build/var/beamserve-main b=build/gpu-bundle/bin/beamserve
timeout 200 build/gpu-bundle/bin/kernels_cuda_tests --gtest_filter='AttentionCuda.*' \
  > "$OUT/attention-tests-b.txt" 2>&1
echo "b attention tests rc=$? s=$((SECONDS - t0))"
grep -E "^\[  (PASSED|FAILED) |FAILED|Failure|rror" "$OUT/attention-tests-b.txt" | head -20
python3 tools/gpu/sass_counts.py $a $b --kernel DecodeLayoutE2ELb0E --top 25 \
  > "$OUT/sass-a-b.txt" 2>&1
AB_BATCHES=1,4,32,128 AB_CONTEXTS="512 8200 32768" timeout 260 tools/gpu/ab_decode.sh $a $b 2 \
  > "$OUT/ab-a-b.txt" 2>&1
echo "ab a-b rc=$? s=$((SECONDS - t0))"
cat "$OUT/ab-a-b.txt"
head -30 "$OUT/sass-a-b.txt"
