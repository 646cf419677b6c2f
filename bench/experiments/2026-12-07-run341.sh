#!/usr/bin/env bash
# Run 341 (one GPU; not yet run: the twentieth session's GPU time ran out): the checks of ca7cc91
# and later with the CUDA sleep test of a drafting engine: the DFlash2
# suites, the decode graphs and sleep mode with a drafter's pool (model_beam_cuda_tests), and the
# kernels' suites.
# Call: tools/gpu/hold_tree.sh hold models/beam-nano; tools/gpu/pack_ab.sh build/gpu-bundle.tar.xz
#   --keep kernels_cuda_tests,model_beam_cuda_tests --held models/beam-nano;
#   run with carry ["build/all.tar.xz"], timeout 240.
set -u
source tools/gpu/run_prelude.sh
nvidia-smi -L
timeout 100 $bin/kernels_cuda_tests --gtest_filter='*DFlash2*:*Softcap*:*AddRounded*' \
  > $res/kernels.log 2>&1
echo "kernels rc=$? $((SECONDS - start)) s"; grep -E "^\[  (PASSED|FAILED) |Failure" $res/kernels.log | head
timeout 120 $bin/model_beam_cuda_tests \
  --gtest_filter='DFlash2Cuda*:BeamCuda.Captured*:DecodeGraph*:*Sleep*' > $res/model.log 2>&1
echo "model rc=$? $((SECONDS - start)) s"; grep -E "^\[  (PASSED|FAILED) |Failure|OK \]|sleep freed" $res/model.log | head -24
echo "total $((SECONDS - start)) s"
