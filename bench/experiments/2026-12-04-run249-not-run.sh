#!/usr/bin/env bash
# Not run: the session's device time ran out (the next session can run it as is).
# Run 249: cuda_kernels_bench's new prefill-chunk cases of BM_moe_experts (kAuto's two-band tiles
# against the 256-row tiles at T = 2048 and 4096).
set -u
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
tar -C build -xJf build/all.tar.xz
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 150 build/gpu-bundle/bin/cuda_kernels_bench --benchmark_filter='BM_moe_experts/T:(1536|2048|4096|257)/' \
  --benchmark_out=$OUT/bench.json --benchmark_out_format=json 2>&1 | tail -12
