#!/usr/bin/env bash
# /get_weights_by_name and the weight-loading changes on the GPU: model_beam_cuda (every tensor of
# beam-nano read back from the device, experts from the packed layout; reads while asleep) and
# the served beam-nano smoke test (its checkpoint streamed to the GPU).
set -uo pipefail
source tools/gpu/run_prelude.sh
nvidia-smi --query-gpu=name --format=csv,noheader | tee $res/gpu.txt
timeout 240 $bin/model_beam_cuda_tests --gtest_brief=1 > $res/model_beam_cuda.txt 2>&1
echo "model_beam_cuda rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $res/model_beam_cuda.txt | tr '\n' ' ')"
grep -E "FAILED|Failure" -A5 $res/model_beam_cuda.txt | head -30
echo "$((SECONDS - start)) s: model_beam_cuda"
timeout 200 python3 tools/gpu/server_smoke.py $bin cuda > $res/server_smoke.txt 2>&1
echo "server_smoke rc=$?"; tail -2 $res/server_smoke.txt
echo "$((SECONDS - start)) s: done"
