#!/usr/bin/env bash
# Run 324: the fp16-P prefill attention after run 323 (which waited for each converted V tile
# before the tile's softmax: fp16 only 9-10% faster than fp32 P, bf16 P 22-26%): the consumers now
# wait for it just before the tile's P·V. A = 64 converter threads (warps 2-3), B = 96 (warps 1-3,
# one loader warp). Prefill attention tests of each, then per side each prefill launch isolated
# under Nsight Compute and `bench kernels --prefill-tokens 8192` sustained, alternating, then
# `bench step --prefill-tokens 8192 --layers 4` with fp32 and fp16 P (A).
set -u
source tools/gpu/run_prelude.sh
for side in a b; do
  t=$bin/kernels_cuda_tests; [[ $side == b ]] && t=$var/kct-c96
  timeout 45 $t --gtest_filter='AttentionPrefillCuda.*' > $res/tests-$side.log 2>&1
  echo "tests $side rc=$? $((SECONDS - start)) s"; grep -E "^\[  (PASSED|FAILED)|FAILED \]|fp16 P" $res/tests-$side.log | head -12
done
for side in a b a b; do
  bs=$bin/beamserve; [[ $side == b ]] && bs=$var/beamserve-c96
  timeout 60 $bs bench kernels --device cuda --batches 1 --prefill-tokens 8192 --reps 30 \
    --json $res/kernels-$side-$SECONDS.json > $res/kernels-$side.log 2>&1
  echo "kernels $side rc=$? $((SECONDS - start)) s"; grep "attention prefill" $res/kernels-$side.log | cut -c1-100
done
for side in a b; do
  bs=$bin/beamserve; [[ $side == b ]] && bs=$var/beamserve-c96
  timeout 90 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum \
    --csv --print-units base --kernel-name regex:prefill_kernel \
    $bs bench kernels --device cuda --batches 1 --prefill-tokens 8192 --reps 3 \
    > $res/ncu-$side.csv 2> $res/ncu-$side.err
  echo "ncu $side rc=$? $((SECONDS - start)) s"
  python3 - $res/ncu-$side.csv <<'PY' 2>&1 | tail -8
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; ki = hdr.index("Kernel Name"); vi = hdr.index("Metric Value")
seq = [(r[ki].split("(")[0], float(r[vi].replace(",", "")) / 1e3) for r in rows[1:]]
groups = collections.OrderedDict()
for i in range(0, len(seq), 8):
    us = sorted(t for _, t in seq[i:i + 8])
    print(seq[i][0], "n", len(us), "min", us[0], "median", us[len(us) // 2])
PY
done
for pm in fp32 fp16; do
  timeout 60 $bin/beamserve bench step --device cuda --layers 4 --batches 1 --steps 5 \
    --prefill-tokens 8192 --attention-probs $pm --json $res/step-$pm.json > $res/step-$pm.log 2>&1
  echo "step $pm rc=$? $((SECONDS - start)) s"; grep -i "prefill" $res/step-$pm.log | head -4
done
