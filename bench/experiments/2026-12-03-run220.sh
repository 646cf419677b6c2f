#!/usr/bin/env bash
# Run 220 (prepared 2026-12-03, not run). Four builds of the tensor-core decode attention, each
# the one before plus one bench/experiments/2026-12-03-decode-*-unmeasured.patch (none changes
# arithmetic: every row's bits must equal A's):
#   A = main (build/var/beamserve-main, kernels_cuda_tests-main: b1f32bb's build);
#   B = + load-tile-32bit (load_tile in 32-bit rows, its 16 row shuffles before its copies,
#       offsets from a lane constant): build/var/beamserve-b, kernels_cuda_tests-b;
#   C = + copies-under-mmas (the next tile's copies queued after the step's S mmas issue):
#       build/var/beamserve-c, kernels_cuda_tests-c;
#   D = + ldmatrix-lane-parts (ldmatrix addresses from four lane parts and immediates): the bundle.
# 1. ab_decode.sh A/B, B/C, C/D at 512, 8,200 and 32,768 keys x batches 1, 4, 32, 128, two rounds
# each (with the batch-1 bench step rounds); 2. D's, C's and B's AttentionCuda tests. Then, in a
# second call, tools/gpu/run_tests.sh on the one to land (for B or C: its var binaries in place),
# or on A if none lands: b1f32bb's grouped-GEMM launch (max_active_clusters) has not run on a GPU.
# B, C and D are built on b1f32bb too.
set -u -o pipefail
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
tar -C build -xJf build/all.tar.xz
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
t0=$SECONDS
declare -A bin=([a]=build/var/beamserve-main [b]=build/var/beamserve-b [c]=build/var/beamserve-c
  [d]=build/gpu-bundle/bin/beamserve)
# Static SASS of the four-warp decode kernel (tools/gpu/sass_counts.py; cuobjdump is there).
k=decode_kernelILi128ELNS1_12DecodeLayoutE2ELb0E
for pair in a-b b-c c-d; do
  python3 tools/gpu/sass_counts.py "${bin[${pair%-*}]}" "${bin[${pair#*-}]}" --kernel $k --top 14 |
    sed "s/^/sass $pair: /"
done
for pair in a-b b-c c-d; do
  AB_BATCHES=1,4,32,128 AB_CONTEXTS="512 8200 32768" timeout 180 tools/gpu/ab_decode.sh \
    "${bin[${pair%-*}]}" "${bin[${pair#*-}]}" 2 > "$OUT/ab-$pair.txt" 2>&1
  echo "ab $pair (A = ${pair%-*}, B = ${pair#*-}) rc=$? s=$((SECONDS - t0))"; cat "$OUT/ab-$pair.txt"
done
for v in d c b; do
  tests=build/var/kernels_cuda_tests-$v; [[ $v == d ]] && tests=build/gpu-bundle/bin/kernels_cuda_tests
  timeout 150 $tests --gtest_filter='AttentionCuda.*' > "$OUT/attention-tests-$v.txt" 2>&1
  echo "$v attention tests rc=$? s=$((SECONDS - t0))"
  grep -E "^\[  (PASSED|FAILED) |FAILED|Failure" "$OUT/attention-tests-$v.txt" | head -10
done
