#!/usr/bin/env bash
# Run 299: branch gpu-pending/draw-on-main (B = fe8f2b7: the draw-candidates commit 74a026d
# cherry-picked onto main 25b28d3) against main (A = 25b28d3, build/var/beamserve-a).
# 1. the sampler's CUDA tests on B (the draw's exact host model);
# 2. main's per-request LoRA on the GPU for the first time: CudaLora.* (kernel against the CPU
#    reference), LoraCudaTest.* (the model with adapters), BM_lora_add;
# 3. B A B A of `bench kernels --device cuda --prefill-tokens 0 --batches 1,32,128`;
# 4. every GPU suite (tools/gpu/run_tests.sh, the server smoke included) with the time left.
set -u
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
start=$SECONDS
tar -C build -xJf build/all.tar.xz && cp -a -n build/held/. .
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
bin=build/gpu-bundle/bin var=build/var
timeout 80 $bin/runtime_sampling_cuda_tests --gtest_output=json:$OUT/sampling.json > $OUT/sampling.log 2>&1
echo "sampling tests rc=$? $((SECONDS - start)) s"; grep -E "^\[  (PASSED|FAILED) |FAILED  \]" $OUT/sampling.log | head -20
timeout 60 $bin/kernels_cuda_tests --gtest_filter='CudaLora*' --gtest_output=json:$OUT/lora.json > $OUT/lora.log 2>&1
echo "lora tests rc=$? $((SECONDS - start)) s"; grep -E "^\[  (PASSED|FAILED) |FAILED  \]" $OUT/lora.log | head -20
timeout 60 $bin/model_beam_cuda_tests --gtest_filter='LoraCuda*' --gtest_output=json:$OUT/lora_model.json > $OUT/lora_model.log 2>&1
echo "lora model tests rc=$? $((SECONDS - start)) s"; grep -E "^\[  (PASSED|FAILED) |FAILED  \]" $OUT/lora_model.log | head -10
timeout 60 $bin/cuda_kernels_bench --benchmark_filter=lora --benchmark_format=json > $OUT/lora_bench.json 2> $OUT/lora_bench.log
echo "lora bench rc=$? $((SECONDS - start)) s"
for round in 1 2; do
  for side in b a; do
    (( SECONDS - start > 300 )) && break 2
    exe=$bin/beamserve; [[ $side == a ]] && exe=$var/beamserve-a
    t0=$SECONDS
    timeout 90 $exe bench kernels --device cuda --prefill-tokens 0 --batches 1,32,128 --json \
      > $OUT/kernels-$side$round.json 2> $OUT/kernels-$side$round.log
    echo "bench $side$round rc=$? $((SECONDS - t0)) s"
  done
done
left=$((570 - (SECONDS - start)))
echo "run_tests with ${left} s"
OUT=$OUT/tests timeout $left tools/gpu/run_tests.sh > $OUT/tests.log 2>&1; echo "run_tests rc=$?"
grep -E "passed|failed|FAILED" $OUT/tests.log | tail -15
echo "total $((SECONDS - start)) s"
