#!/usr/bin/env bash
# Run 329 (one GPU): NcclGroup of one GPU through PyTorch's NCCL (sum, gather, abort, reset).
set -u
source tools/gpu/run_prelude.sh
nccl=$(python3 -c "import nvidia.nccl; print(list(nvidia.nccl.__path__)[0] + '/lib')")
export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$nccl"
timeout 120 $bin/model_beam_cuda_tests --gtest_filter='NcclGroupTest*:TensorParallelCuda*' \
  > $res/nccl.log 2>&1; echo "nccl rc=$? $((SECONDS - start)) s"
grep -E "OK \]|FAILED|SKIPPED \]|Failure|needs as many" $res/nccl.log | tail -10
