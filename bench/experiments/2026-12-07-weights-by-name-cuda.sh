#!/usr/bin/env bash
# /get_weights_by_name and the weight-loading changes on the GPU: model_beam_cuda (every tensor of
# beam-nano read back from the device, experts from the packed layout; reads while asleep), then
# the protocol and openai SDK suites with their servers on the GPU (checkpoints streamed to it).
set -uo pipefail
source tools/gpu/run_prelude.sh
nvidia-smi --query-gpu=name --format=csv,noheader | tee $res/gpu.txt
timeout 240 $bin/model_beam_cuda_tests --gtest_brief=1 > $res/model_beam_cuda.txt 2>&1
echo "model_beam_cuda rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $res/model_beam_cuda.txt | tr '\n' ' ')"
grep -E "FAILED|Failure" -A5 $res/model_beam_cuda.txt | head -30
echo "$((SECONDS - start)) s: model_beam_cuda"
OUT=$res timeout 330 tools/gpu/run_client_tests.sh protocol openai_sdk 2>&1 | tail -5
grep -E "get_weights_by_name|update_weights|not ok" $res/client_protocol.log | head -10
echo "$((SECONDS - start)) s: done"
