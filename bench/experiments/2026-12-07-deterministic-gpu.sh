#!/usr/bin/env bash
# --enable-deterministic-inference on the GPU: the batch-invariance tests (kernels: every op's
# rows against the same rows in other batches; model: tiny-beam's rows across chunkings and
# batches, the engine's requests alone and together; data parallelism's one-GPU refusal or, with
# two GPUs, its bit-for-bit replicas), the suites of the kernels whose dispatch
# changed, then the mode's cost
# (with --breakdown's per-op table for the default and deterministic runs) on beam-slice (4 layers): bench step decode at batch 1 / 32 / 128 and the 8K prefill, default
# against deterministic with the shared cuBLASLt algorithms picked at 1,024 rows (this tree) and at
# 64 (var/beamserve-r64: a worktree of the same commit with `kInvariantPlanRows = 64` in
# src/kernels/cuda/gemm.h, `cmake --build build/gpu --target beamserve` with tools/gpu/build.sh's
# configure flags, stripped; packed with pack_ab.sh's beamserve-r64=PATH).
set -uo pipefail
source tools/gpu/run_prelude.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee $res/gpu.txt
timeout 70 $bin/kernels_cuda_tests --gtest_brief=1 \
  --gtest_filter='BatchInvariantCuda.*:AttentionPrefillCuda.Invariant*:CudaMoeRouter.*:CudaShardOps.*' \
  > $res/invariant_kernels.txt 2>&1
echo "invariant kernels rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $res/invariant_kernels.txt | tr '\n' ' ')"
grep -E "FAILED|Failure|check failed|M [0-9]|tokens [0-9]|chunk [0-9]" $res/invariant_kernels.txt | head -30
timeout 60 $bin/model_beam_cuda_tests --gtest_brief=1 \
  --gtest_filter='DeterministicCuda.*:DataParallelCuda.*' \
  > $res/model_beam_cuda.txt 2>&1
echo "DeterministicCuda + DataParallelCuda rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $res/model_beam_cuda.txt | tr '\n' ' ')"
grep -E "FAILED|Failure|request|chunks of|batch of" $res/model_beam_cuda.txt | head -20
echo "$((SECONDS - start)) s: tests"
step() {  # NAME BIN [FLAGS]
  timeout 60 $2 bench step --device cuda --layers 4 --batches 1,32,128 \
    --json $res/$1.json "${@:3}" > $res/$1.txt 2>&1
  echo "$1 rc=$?"; grep -E "^decode batch|check failed" $res/$1.txt | head -4
  grep -E "^breakdown|^  [a-z_]+ +[0-9.]+ +[0-9.]+ +[0-9]+$" $res/$1.txt | awk '$3 > 0.004 || /^breakdown/' | head -45
  grep -o '"prefill_ms": [0-9.]*' $res/$1.json
}
step default $bin/beamserve --breakdown
step deterministic $bin/beamserve --enable-deterministic-inference --breakdown
step deterministic_r64 $var/beamserve-r64 --enable-deterministic-inference
echo "$((SECONDS - start)) s: done"
