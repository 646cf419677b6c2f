#!/usr/bin/env bash
# Run 331 (two GPUs, when lent): NCCL's and the two-GPU engine's tests (model_beam_cuda_tests),
# then beam-nano served on one GPU and split over two (bench/experiments/2026-12-06-tp-check.py).
set -u
source tools/gpu/run_prelude.sh
nvidia-smi -L | tee $res/gpus.txt
nccl=$(python3 -c "import nvidia.nccl; print(list(nvidia.nccl.__path__)[0] + '/lib')")
export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$nccl"
echo "NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-unset}"
timeout 300 $bin/model_beam_cuda_tests --gtest_filter='NcclGroupTest*:TensorParallelCuda*' \
  > $res/tp_tests.log 2>&1; echo "tp tests rc=$? $((SECONDS - start)) s"
grep -E "case|OK \]|FAILED|SKIPPED \]|Failure" $res/tp_tests.log | tail -14
timeout 240 python3 bench/experiments/2026-12-06-tp-check.py $bin/beamserve $res/check.json \
  > $res/check.log 2>&1; echo "check rc=$? $((SECONDS - start)) s"; tail -5 $res/check.log
