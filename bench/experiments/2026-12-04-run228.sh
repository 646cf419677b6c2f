#!/usr/bin/env bash
# Run 228: run 224's stall profile (batch-1 full rows, 32,768 keys) on 02d6bed's build, whose
# tensor-core decode tiles come by TMA. all.tar.xz: its tools/gpu/build.sh bundle (gpu-bundle/).
set -u -o pipefail
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
tar -C build -xJf build/all.tar.xz
SKIP=10 OUT="$OUT/full-32768-b1" tools/gpu/ncu_source.sh decode_kernel 1 bench kernels \
  --device cuda --context 32768 --batches 1 --prefill-tokens 0 --reps 1
grep -E "Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Eligible Warps" \
  "$OUT/full-32768-b1/details.txt"
