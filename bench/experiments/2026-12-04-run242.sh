#!/usr/bin/env bash
# Run 242: two-band 128-row tiles for the grouped GEMM at ~64 rows an expert (B) against main (A);
# B's CudaMoe* tests; B with BEAM_EXPERIMENT_WIDE_MAX_AVG=128 (C) at T = 3072 / 4096.
set -u
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
tar -C build -xJf build/all.tar.xz
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
A=build/var/beamserve-a B=build/gpu-bundle/bin/beamserve
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
build/gpu-bundle/bin/kernels_cuda_tests --gtest_filter='CudaMoe*' 2>&1 | grep -E "FAIL|PASSED|tests ran|OK \] .*(TileSizes|TmaShapes|MatchCpuTiny)"
AB_BATCHES=512,1024,1536,2048 AB_STEP_BATCHES=none tools/gpu/ab_moe.sh $A $B 3 2>&1 | grep -v "router"
export BEAM_EXPERIMENT_WIDE_MAX_AVG=128
AB_BATCHES=2560,3072,4096 AB_STEP_BATCHES=none tools/gpu/ab_moe.sh $A $B 2 2>&1 | grep -v "router"
