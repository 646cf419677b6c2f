#!/usr/bin/env bash
# Run 323: the fp16-P prefill attention (AttentionProbs::kFp16: P and V as fp16, V converted in
# shared memory by the producer's converter warps). The attention tests (new: the fp16 bounds,
# values past fp16's range), then `bench kernels --prefill-tokens 8192` twice (sustained: medians
# of back-to-back launches, each P mode in turn), each prefill attention launch isolated under
# Nsight Compute, and `bench step --prefill-tokens 8192` with fp32 and fp16 P.
set -u
source tools/gpu/run_prelude.sh
timeout 100 $bin/kernels_cuda_tests --gtest_filter='AttentionPrefillCuda.*:AttentionCuda*' \
  > $res/tests.log 2>&1
echo "tests rc=$? $((SECONDS - start)) s"; grep -E "^\[  (PASSED|FAILED)|FAILED|P W|P,|large v" $res/tests.log | head -40
for i in 1 2; do
  timeout 90 $bin/beamserve bench kernels --device cuda --batches 1 --prefill-tokens 8192 \
    --reps 30 --json $res/kernels-$i.json > $res/kernels-$i.log 2>&1
  echo "kernels $i rc=$? $((SECONDS - start)) s"; grep "attention prefill" $res/kernels-$i.log
done
timeout 120 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum \
  --csv --print-units base --kernel-name regex:prefill_kernel \
  $bin/beamserve bench kernels --device cuda --batches 1 --prefill-tokens 8192 --reps 3 \
  > $res/ncu.csv 2> $res/ncu.err
echo "ncu rc=$? $((SECONDS - start)) s"
python3 - $res/ncu.csv <<'PY' 2>&1 | tail -8
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; ki = hdr.index("Kernel Name"); vi = hdr.index("Metric Value")
seq = [(r[ki], float(r[vi].replace(",", "")) / 1e3) for r in rows[1:]]
print(len(seq), "launches")
# bench order: fp32 sliding, fp32 full, bf16 sliding, bf16 full, fp16 sliding, fp16 full; 5 each
for i in range(0, len(seq), 5):
    us = sorted(t for _, t in seq[i:i + 5])
    print(seq[i][0][:80], "min", us[0], "median", us[len(us) // 2])
PY
for pm in fp32 fp16; do
  timeout 60 $bin/beamserve bench step --device cuda --batches 1 --steps 5 --prefill-tokens 8192 \
    --attention-probs $pm --json $res/step-$pm.json > $res/step-$pm.log 2>&1
  echo "step $pm rc=$? $((SECONDS - start)) s"; grep -i "prefill" $res/step-$pm.log | head -4
done
