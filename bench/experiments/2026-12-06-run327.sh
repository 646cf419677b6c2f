#!/usr/bin/env bash
# Run 327 (tensor parallelism; one GPU, as no multi-GPU machine was lent): the new ops' GPU tests
# (round_to_bf16, localize_expert_ids, moe_experts' f32 out on every path) and every
# model_beam_cuda test (decode graphs now take the model's shard; the two-GPU tests skip, saying
# why, after loading NCCL).
set -u
source tools/gpu/run_prelude.sh
nvidia-smi -L | tee $res/gpus.txt
nccl=$(python3 -c "import nvidia.nccl; print(list(nvidia.nccl.__path__)[0] + '/lib')")
export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$nccl"
echo "NCCL from $nccl; NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-unset}"
timeout 200 $bin/kernels_cuda_tests --gtest_filter='CudaShardOps*:CudaMoeExperts.F32Out*' \
  > $res/kernels.log 2>&1; echo "kernels rc=$? $((SECONDS - start)) s"
grep -E "^\[  (PASSED|FAILED)|OK \]|FAILED \]" $res/kernels.log | tail -6
timeout 330 $bin/model_beam_cuda_tests > $res/model_beam_cuda.log 2>&1
echo "model_beam_cuda rc=$? $((SECONDS - start)) s"
grep -E "^\[  (PASSED|FAILED)|FAILED \]|SKIPPED \]|needs as many|NCCL" $res/model_beam_cuda.log | tail -12
