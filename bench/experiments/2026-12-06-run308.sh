#!/usr/bin/env bash
# Run 308: run 307 step 4 alone (its ncu filter had missed): ncu per-kernel times of B.
set -u
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
start=$SECONDS
res=$OUT/r; mkdir -p $res
trap 'tar -C $OUT -cJf $OUT/results.tar.xz r && rm -rf $res' EXIT
tar -C build -xJf build/all.tar.xz && cp -a --update=none build/held/. .
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
bin=build/gpu-bundle/bin
for c in _lora/T:32/r:16 _lora/T:2048/r:16 _lora/T:1/r:16 /T:2048/path:0; do
  n=${c//[:\/]/_}
  timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum --csv --launch-skip 60 --kernel-name regex:'moe|expert|combine|gather|shrink|expand|scatter|count|offsets|gemm|tma' \
    --launch-count 40 $bin/cuda_kernels_bench --benchmark_filter="BM_moe_experts$c/" \
    > $res/ncu-$n.csv 2> $res/ncu-$n.err
  echo "ncu $c rc=$? $((SECONDS - start)) s"
  python3 tools/gpu/ncu_summary.py $res/ncu-$n.csv
done
echo "total $((SECONDS - start)) s"
