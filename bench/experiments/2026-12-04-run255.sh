#!/usr/bin/env bash
# Run 255: main 2305a22 (the warm-up step runs eagerly; a GPU test of a budget below max_running):
# model_beam_cuda_tests and the server smoke.
set -u
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
tar -C build -xJf build/all.tar.xz
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 150 build/gpu-bundle/bin/model_beam_cuda_tests --gtest_output=json:$OUT/model_beam_cuda_tests.json 2>&1 \
  | grep -E "engine: up to|step budget|OK \]|FAIL|PASSED|SKIPPED" | tail -24
timeout 120 python3 tools/gpu/server_smoke.py build/gpu-bundle/bin cuda > $OUT/server_smoke.log 2>&1; echo "server_smoke rc=$?"
tail -2 $OUT/server_smoke.log
