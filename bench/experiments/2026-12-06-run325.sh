#!/usr/bin/env bash
# Run 325: the fp16-P prefill attention with the wait for a tile's converted V after its softmax
# and outside the ping-pong turn (run 323: before the softmax; run 324: inside the turn, which
# stalls the other warpgroup too), with 64 (warps 2-3) and 96 (warps 1-3) converter threads. Each
# prefill launch isolated under Nsight Compute (fp32 and bf16 P in the same binaries as the
# baseline), then `bench kernels --prefill-tokens 8192` sustained, alternating.
set -u
source tools/gpu/run_prelude.sh
for side in c64s c96s; do
  timeout 90 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum \
    --csv --print-units base --kernel-name regex:prefill_kernel \
    $var/beamserve-$side bench kernels --device cuda --batches 1 --prefill-tokens 8192 --reps 3 \
    > $res/ncu-$side.csv 2> $res/ncu-$side.err
  echo "ncu $side rc=$? $((SECONDS - start)) s"
  python3 - $res/ncu-$side.csv <<'PY' 2>&1 | tail -8
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; ki = hdr.index("Kernel Name"); vi = hdr.index("Metric Value")
seq = [(r[ki].split("(")[0], float(r[vi].replace(",", "")) / 1e3) for r in rows[1:]]
for i in range(0, len(seq), 8):
    us = sorted(t for _, t in seq[i:i + 8])
    print(seq[i][0], "n", len(us), "min", us[0], "median", us[len(us) // 2])
PY
done
for side in c64s c96s c64s c96s; do
  timeout 60 $var/beamserve-$side bench kernels --device cuda --batches 1 --prefill-tokens 8192 \
    --reps 30 --json $res/kernels-$side-$SECONDS.json > $res/kernels-$side.log 2>&1
  echo "kernels $side rc=$? $((SECONDS - start)) s"; grep "attention prefill" $res/kernels-$side.log | cut -c1-100
done
