#!/usr/bin/env bash
# Run 247: the SwiGLU epilogue staging a two-band tile's whole band at once (no spill; B) against
# f8876f5 (A: half a band at a time, 32 bytes spilled); B's CudaMoe* tests.
set -u
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
tar -C build -xJf build/all.tar.xz
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
A=build/var/beamserve-f88 B=build/gpu-bundle/bin/beamserve
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
build/gpu-bundle/bin/kernels_cuda_tests --gtest_filter='CudaMoe*' 2>&1 | grep -E "FAIL|PASSED|tests ran"
AB_BATCHES=512,1536,2048,3072 AB_PREFILL_TOKENS=8192 AB_STEP_BATCHES=none tools/gpu/ab_moe.sh $A $B 3 2>&1 | grep -v "router"
