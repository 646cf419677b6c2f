#!/usr/bin/env bash
# Run 250: main c119289+ (the device step budget and the largest-step warm-up): GPU tests, serve.
set -u
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
tar -C build -xJf build/all.tar.xz
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
B=build/gpu-bundle/bin
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
echo "== 1. the new engine test first"
timeout 200 $B/model_beam_cuda_tests --gtest_filter='*StepBudget*' 2>&1 | grep -E "engine:|step budget|OK|FAIL|PASSED" | head -20
echo "== 2. bench serve defaults (as run 218)"
timeout 240 $B/beamserve bench serve --device cuda --concurrency 1,8,32,128 --output-len 256 \
  --json $OUT/serve-default.json 2>&1 | grep -E "engine:|error" | head
echo "== 3. bench serve long prompts, default step and explicit 2048"
timeout 200 $B/beamserve bench serve --device cuda --concurrency 1,8,32 --prompt-len 8192 --output-len 128 \
  --json $OUT/serve-long-default.json 2>&1 | grep -E "engine:|error" | head
timeout 200 $B/beamserve bench serve --device cuda --concurrency 1,8,32 --prompt-len 8192 --output-len 128 \
  --max-step-tokens 2048 --json $OUT/serve-long-2048.json 2>&1 | grep -E "engine:|error" | head
echo "== 4. every GPU suite"
OUT=$OUT timeout 330 tools/gpu/run_tests.sh > $OUT/tests.log 2>&1; echo "run_tests rc=$?"
grep -E "PASSED|FAILED|passed|failed|suite|==" $OUT/tests.log | tail -25
