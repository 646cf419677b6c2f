#!/usr/bin/env bash
# Run 300: B = gpu-pending/draw-on-main (the draw-candidates commit on main, with main's CudaLora
# bound of eae4f16), A = main (build/var/beamserve-a). Run 299 passed the draw's sampler tests
# (10) and LoraCudaTest (2) but failed CudaLora.{MatchesCpu,BeamWidths,GraphReplaysWithNewSlots}
# against the 1-ulp-from-the-CPU check (its logs did not come back: at most 8 files return, so
# this run packs everything into results.tar.xz). 1. CudaLora.* with the fp64 bound, failures
# printed; 2. BM_lora_add (0.1 s a case); 3. B A B A of `bench kernels --device cuda
# --prefill-tokens 0 --batches 1,32,128`.
set -u
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
start=$SECONDS
res=$OUT/r; mkdir -p $res
trap 'tar -C $OUT -cJf $OUT/results.tar.xz r && rm -rf $res' EXIT
tar -C build -xJf build/all.tar.xz
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
bin=build/gpu-bundle/bin var=build/var
timeout 90 $bin/kernels_cuda_tests --gtest_filter='CudaLora*' --gtest_output=json:$res/lora.json > $res/lora.log 2>&1
echo "lora tests rc=$? $((SECONDS - start)) s"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|token .* column|bit-equal|Failure|Expected|Which is|actual" $res/lora.log | head -60
timeout 120 $bin/cuda_kernels_bench --benchmark_filter=lora --benchmark_min_time=0.1 \
  --benchmark_out=$res/lora_bench.json --benchmark_out_format=json > $res/lora_bench.log 2>&1
echo "lora bench rc=$? $((SECONDS - start)) s"; grep -E "BM_lora" $res/lora_bench.log | head -20
for round in 1 2; do
  for side in b a; do
    (( SECONDS - start > 420 )) && break 2
    exe=$bin/beamserve; [[ $side == a ]] && exe=$var/beamserve-a
    t0=$SECONDS
    timeout 100 $exe bench kernels --device cuda --prefill-tokens 0 --batches 1,32,128 \
      --json $res/kernels-$side$round.json > $res/kernels-$side$round.log 2>&1
    echo "bench $side$round rc=$? $((SECONDS - t0)) s"
  done
done
echo "total $((SECONDS - start)) s"
