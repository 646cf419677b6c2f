#!/usr/bin/env bash
# Run 350 (one GPU): the DFlash2 selector's walk staged in shared memory (cp.async, a row
# ahead), after run 349's split top-k (S = 1: 94.5 -> 62.8 us on an H100).
# 1. kernels_cuda_tests CudaDFlash2.* (SelectBitExact: staged walks, one row, > 48 KiB staged);
#    model_beam_cuda_tests DFlash2Cuda*.
# 2. cuda_kernels_bench BM_dflash2_select, A (main before run 349) / B alternating twice (run 338's table:
#    93.8 / 161 / 228 us at S = 1 / 16 / 64 on an H200).
# Call: pack_ab.sh build/gpu-bundle.tar.xz --keep kernels_cuda_tests,model_beam_cuda_tests,
#   cuda_kernels_bench bench-a=/tmp/cuda_kernels_bench-a --held models/beam-nano (hold first);
#   carry ["build/all.tar.xz"], timeout 240.
set -u
source tools/gpu/run_prelude.sh
nvidia-smi -L
timeout 120 $bin/kernels_cuda_tests --gtest_filter='CudaDFlash2.*' > $res/kernels.log 2>&1
echo "kernels rc=$? $((SECONDS - start)) s"; grep -E "^\[  (PASSED|FAILED) |Failure" $res/kernels.log | head
timeout 60 $bin/model_beam_cuda_tests --gtest_filter='DFlash2Cuda*' > $res/model.log 2>&1
echo "model rc=$? $((SECONDS - start)) s"; grep -E "^\[  (PASSED|FAILED) |Failure" $res/model.log | head
for round in 1 2; do
  for side in a b; do
    exe=$bin/cuda_kernels_bench; [[ $side == a ]] && exe=$var/bench-a
    $exe --benchmark_filter='BM_dflash2_select' --benchmark_format=json \
      > $res/select-$side$round.json 2> $res/select-$side$round.err
    echo "$side$round: $(grep -E '"name"|"real_time"' $res/select-$side$round.json | paste - - | \
      sed -E 's/ +/ /g; s/"name": //; s/"real_time": //' | tr '\n' ' ')"
  done
done
echo "total $((SECONDS - start)) s"
