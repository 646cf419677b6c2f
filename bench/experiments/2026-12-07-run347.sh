#!/usr/bin/env bash
# Run 347 (one GPU): the review commit (LazyGraph shared by the decode and drafter graphs):
# model_beam_cuda_tests DFlash2Cuda*, DecodeGraph*, BeamCuda.Captured*.
# Call: hold models/beam-nano bench/results; pack_ab.sh --keep model_beam_cuda_tests --held
#   models/beam-nano; carry ["build/all.tar.xz"], timeout 150.
source tools/gpu/run_prelude.sh
timeout 100 $bin/model_beam_cuda_tests --gtest_filter='DFlash2Cuda*:DecodeGraph*:BeamCuda.Captured*' > $res/model.log 2>&1
echo "model rc=$? $((SECONDS - start)) s"; grep -E "^\[  (PASSED|FAILED) |Failure" $res/model.log | head
