#!/usr/bin/env bash
# Run 355 (one GPU; run 354 never ran): the DFlash2 selector's slices held in registers (each CTA reads its slice of
# at most 8,192 logits once; run 353: S = 64's slices 183 us, latency-bound with a second read),
# the pair kernel's predecessor rows staged by cp.async with the successor rows (run 353: pairs
# 11-15 us at S = 1).
# 1. kernels_cuda_tests CudaDFlash2.*; model_beam_cuda_tests DFlash2Cuda* and DecodeGraph* (21bdcba's
#    final hidden states per chunk in graphs).
# 4. The rest of model_beam_cuda_tests and kernels_cuda_tests in what time is left.
# 2. cuda_kernels_bench BM_dflash2_select, A (main at 21bdcba) / B alternating twice.
# 3. ncu device times of the selector's kernels at S = 1, 16, 64.
# Call: pack_ab.sh build/gpu-bundle.tar.xz --keep kernels_cuda_tests,model_beam_cuda_tests,
#   cuda_kernels_bench bench-a=/tmp/cuda_kernels_bench-a --held models/beam-nano (hold first);
#   carry ["build/all.tar.xz"], timeout 240.
set -u
source tools/gpu/run_prelude.sh
timeout 120 $bin/kernels_cuda_tests --gtest_filter='CudaDFlash2.*' > $res/kernels.log 2>&1
echo "kernels rc=$? $((SECONDS - start)) s"; grep -E "^\[  (PASSED|FAILED) |Failure|Which|select S" $res/kernels.log | head
timeout 60 $bin/model_beam_cuda_tests --gtest_filter='DFlash2Cuda*:DecodeGraph*' > $res/model.log 2>&1
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
timeout 200 $bin/model_beam_cuda_tests --gtest_filter='-DFlash2Cuda*:DecodeGraph*' > $res/model-rest.log 2>&1
echo "model rest rc=$? $((SECONDS - start)) s"; grep -E "^\[  (PASSED|FAILED) |Failure|tests ran" $res/model-rest.log | head
timeout 150 $bin/kernels_cuda_tests --gtest_filter='-CudaDFlash2.*' > $res/kernels-rest.log 2>&1
echo "kernels rest rc=$? $((SECONDS - start)) s"; grep -E "^\[  (PASSED|FAILED) |FAILED  |tests ran" $res/kernels-rest.log | head
echo "total $((SECONDS - start)) s"
