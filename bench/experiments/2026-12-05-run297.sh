#!/usr/bin/env bash
# Run 297: branch gpu-pending/draw-candidates (B = 74a026d, rebased on a8c7dac) against main
# (A = a8c7dac): the sampler's CUDA tests first (the draw's exact host model), then A B A B of
# `bench kernels --device cuda --prefill-tokens 0 --batches 1,32,128`, then every GPU suite
# (run_tests.sh, the server smoke included) with what time is left.
set -u
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
start=$SECONDS
tar -C build -xJf build/all.tar.xz && cp -a -n build/held/. .
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
bin=build/gpu-bundle/bin
timeout 120 $bin/runtime_sampling_cuda_tests --gtest_output=json:$OUT/sampling.json > $OUT/sampling.log 2>&1
echo "sampling tests rc=$?"; grep -E "^\[  (PASSED|FAILED) |FAILED  \]" $OUT/sampling.log | head -20
for round in 1 2; do
  for side in a b; do
    exe=$bin/beamserve; [[ $side == a ]] && exe=build/var/beamserve-a
    t0=$SECONDS
    timeout 150 $exe bench kernels --device cuda --prefill-tokens 0 --batches 1,32,128 --json \
      > $OUT/kernels-$side$round.json 2> $OUT/kernels-$side$round.log
    echo "bench $side$round rc=$? $((SECONDS - t0)) s"
  done
done
left=$((560 - (SECONDS - start)))
echo "run_tests with ${left} s"
OUT=$OUT/tests timeout $left tools/gpu/run_tests.sh > $OUT/tests.log 2>&1; echo "run_tests rc=$?"
grep -E "passed|failed|FAILED" $OUT/tests.log | tail -15
