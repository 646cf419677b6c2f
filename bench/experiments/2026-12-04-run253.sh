#!/usr/bin/env bash
# Run 253: B = 3af8bf6 + qk_norm_position taking 32 / head_lanes heads a warp (two at head_dim
# 128) against A = 3af8bf6: B's CudaRope tests and model_beam_cuda_tests, the kernel's times under
# ncu in 2,048- and 8,192-token prefill steps, and the decode layers at batches 1 and 32.
set -u
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
tar -C build -xJf build/all.tar.xz
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
B=build/gpu-bundle/bin
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 120 $B/kernels_cuda_tests --gtest_filter='CudaRope.*' 2>&1 | grep -E "OK|FAIL|PASSED" | tail -12
timeout 120 $B/model_beam_cuda_tests 2>&1 | grep -E "FAIL|PASSED|SKIPPED" | tail -5
for T in 2048 8192; do
  for side in a b; do
    bin=$B/beamserve; [[ $side == a ]] && bin=build/var/beamserve-a
    timeout 150 ncu --clock-control none --cache-control none -k regex:qk_norm_position \
      --metrics gpu__time_duration.sum,launch__grid_size --csv --print-units base \
      $bin bench step --device cuda --batches 1 --context 16 --warmup 0 --steps 1 \
      --prefill-tokens $T --prefill-reps 2 > $OUT/qk-$side-$T.csv 2>/dev/null
    echo "$side T=$T rc=$? lines $(wc -l < $OUT/qk-$side-$T.csv)"
  done
done
timeout 200 tools/gpu/ab_step.sh 1,32 3 a=build/var/beamserve-a b=$B/beamserve 2>&1 | tail -8
