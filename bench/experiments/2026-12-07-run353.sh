#!/usr/bin/env bash
# Run 353 (one GPU): the DFlash2 selector's top-k on 32-bit value bits (64-bit keys only for the
# thread maxima and the gathered keys; run 352: S = 64's slices 183 us, instruction-bound), the
# merge ranking only keys at or above the K-th largest slice maximum (run 352: 13 us at S = 1),
# and the walk as two kernels: every (previous draft, candidate) pair's score of every draft row
# in parallel (a CTA a row, the walk's operations in its order), then a warp a block picking the
# path through them (run 352: the sequential walk 21-23 us at any S).
# 1. kernels_cuda_tests CudaDFlash2.*; model_beam_cuda_tests DFlash2Cuda*.
# 2. cuda_kernels_bench BM_dflash2_select, A (main before run 349) / B alternating twice.
# 3. ncu device times of the selector's kernels at S = 1, 16, 64.
# Call: pack_ab.sh build/gpu-bundle.tar.xz --keep kernels_cuda_tests,model_beam_cuda_tests,
#   cuda_kernels_bench bench-a=/tmp/cuda_kernels_bench-a --held models/beam-nano (hold first);
#   carry ["build/all.tar.xz"], timeout 240.
set -u
source tools/gpu/run_prelude.sh
timeout 120 $bin/kernels_cuda_tests --gtest_filter='CudaDFlash2.*' > $res/kernels.log 2>&1
echo "kernels rc=$? $((SECONDS - start)) s"; grep -E "^\[  (PASSED|FAILED) |Failure|Which|select S" $res/kernels.log | head
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
for S in 1 16 64; do
  ncu --clock-control none --cache-control none -k 'regex:top_k|walk|pair' -c 8 \
    --metrics gpu__time_duration.sum --csv --print-units base \
    $bin/cuda_kernels_bench --benchmark_filter="BM_dflash2_select/S:$S/" > $res/ncu-S$S.csv 2> $res/ncu-S$S.err
  echo "S=$S rc=$? $((SECONDS - start)) s"
  python3 - $res/ncu-S$S.csv <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; ki = hdr.index("Kernel Name"); vi = hdr.index("Metric Value")
for r in rows[1:]:
    print(f"  {float(r[vi].replace(',', '')) / 1e3:8.2f} us  {r[ki].split('(')[0][-70:]}")
PY
done
echo "total $((SECONDS - start)) s"
