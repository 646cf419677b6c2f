#!/usr/bin/env bash
# Run 351 (one GPU): where the DFlash2 selector's time goes after runs 349-350 (S = 1: 52.7 us,
# S = 16: 91 us in BM_dflash2_select on an H100): ncu's device time of each of its kernels
# (split top-k, merge, staged walk) at S = 1, 16 and 64, kernels serialized.
# Call: pack_ab.sh build/gpu-bundle.tar.xz --keep cuda_kernels_bench --held models/beam-nano
#   (hold first); carry ["build/all.tar.xz"], timeout 240.
set -u
source tools/gpu/run_prelude.sh
for S in 1 16 64; do
  ncu --clock-control none --cache-control none -k 'regex:top_k|walk' -c 9 \
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
