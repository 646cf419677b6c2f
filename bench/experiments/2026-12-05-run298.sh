#!/usr/bin/env bash
# Run 298 (one call of ~4 minutes of device time left): branch gpu-pending/draw-candidates
# (bundle B = 74a026d) against main (A = a8c7dac, build/var/beamserve-a): the sampler's CUDA tests
# on B, then the per-request LoRA kernel of main 236f264 (build/var/kernels_cuda_tests-lora,
# CudaLora.*; 80ffebb's model_beam_cuda_tests-lora, LoraCuda.*; build/var/cuda_kernels_bench-lora, BM_lora_add), then B A (B A) of
# `bench kernels --device cuda --prefill-tokens 0 --batches 1,32,128` while time is left.
set -u
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
start=$SECONDS
tar -C build -xJf build/all.tar.xz
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
bin=build/gpu-bundle/bin var=build/var
timeout 80 $bin/runtime_sampling_cuda_tests --gtest_output=json:$OUT/sampling.json > $OUT/sampling.log 2>&1
echo "sampling tests rc=$? $((SECONDS - start)) s"; grep -E "^\[  (PASSED|FAILED) |FAILED  \]" $OUT/sampling.log | head -20
timeout 60 $var/kernels_cuda_tests-lora --gtest_filter='CudaLora*' --gtest_output=json:$OUT/lora.json > $OUT/lora.log 2>&1
echo "lora tests rc=$? $((SECONDS - start)) s"; grep -E "^\[  (PASSED|FAILED) |FAILED  \]|bit-equal|exact" $OUT/lora.log | head -20
timeout 60 $var/model_beam_cuda_tests-lora --gtest_filter='LoraCuda*' --gtest_output=json:$OUT/lora_model.json > $OUT/lora_model.log 2>&1
echo "lora model tests rc=$? $((SECONDS - start)) s"; grep -E "^\[  (PASSED|FAILED) |FAILED  \]|rel error" $OUT/lora_model.log | head -10
timeout 60 $var/cuda_kernels_bench-lora --benchmark_filter=lora --benchmark_format=json > $OUT/lora_bench.json 2> $OUT/lora_bench.log
echo "lora bench rc=$? $((SECONDS - start)) s"
for round in 1 2; do
  for side in b a; do
    (( SECONDS - start > 120 )) && break 2
    exe=$bin/beamserve; [[ $side == a ]] && exe=$var/beamserve-a
    t0=$SECONDS
    timeout 60 $exe bench kernels --device cuda --prefill-tokens 0 --batches 1,32,128 --json \
      > $OUT/kernels-$side$round.json 2> $OUT/kernels-$side$round.log
    echo "bench $side$round rc=$? $((SECONDS - t0)) s"
  done
done
echo "total $((SECONDS - start)) s"
