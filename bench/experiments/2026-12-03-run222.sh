#!/usr/bin/env bash
# Run 222: BD = A (b1f32bb) + the load-tile-32bit and ldmatrix-lane-parts patches, without
# copies-under-mmas (run 220: C lost at batch 32). A/BD three rounds, D/BD two; BD's AttentionCuda.
set -u -o pipefail
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
tar -C build -xJf build/all.tar.xz
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
t0=$SECONDS
bd=build/gpu-bundle/bin/beamserve
python3 tools/gpu/sass_counts.py build/var/beamserve-main $bd \
  --kernel decode_kernelILi128ELNS1_12DecodeLayoutE2ELb0E --top 20 > "$OUT/sass-a-bd.txt" 2>&1
AB_BATCHES=1,4,32,128 AB_CONTEXTS="512 8200 32768" timeout 200 tools/gpu/ab_decode.sh \
  build/var/beamserve-main $bd 3 > "$OUT/ab-a-bd.txt" 2>&1
echo "ab a-bd rc=$? s=$((SECONDS - t0))"
AB_BATCHES=1,4,32,128 AB_CONTEXTS="512 8200 32768" timeout 150 tools/gpu/ab_decode.sh \
  build/var/beamserve-d $bd 2 > "$OUT/ab-d-bd.txt" 2>&1
echo "ab d-bd rc=$? s=$((SECONDS - t0))"
timeout 150 build/gpu-bundle/bin/kernels_cuda_tests --gtest_filter='AttentionCuda.*' \
  > "$OUT/attention-tests-bd.txt" 2>&1
echo "bd attention tests rc=$? s=$((SECONDS - t0))"
grep -E "^\[  (PASSED|FAILED) |FAILED|Failure" "$OUT/attention-tests-bd.txt" | head -10
cat "$OUT/sass-a-bd.txt"
