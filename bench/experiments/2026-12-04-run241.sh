#!/usr/bin/env bash
# Run 241: Nsight Compute of the grouped GEMM (gate_up and down) at T = 2048 on main.
set -u
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
tar -C build -xJf build/all.tar.xz
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
OUT=$OUT/t2048 tools/gpu/ncu_source.sh grouped_gemm_kernel 2 bench kernels --device cuda --batches 2048 --prefill-tokens 0 --reps 1 2>&1 | tail -60
grep -E "Duration|DRAM Throughput|L2 Cache Throughput|Memory Throughput|Compute \(SM\) Throughput|SM Frequency|Registers Per|Achieved Occupancy|Issue Slots Busy|One or More Eligible|Warp Cycles Per Issued" $OUT/t2048/details.txt | head -60
