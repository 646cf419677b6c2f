#!/usr/bin/env bash
# Run 251: main 3af8bf6 (bench serve levels on prompts of their own): serving figures without
# prefix-cache hits between levels; long prompts at both step budgets; a 131,072- and a
# 1,000,000-token prompt at concurrency 1; chunk attention at 1M cached keys.
set -u
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
tar -C build -xJf build/all.tar.xz
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
B=build/gpu-bundle/bin
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
s() { local name=$1; shift; local t0=$SECONDS
  timeout 280 $B/beamserve bench serve --device cuda "$@" --json $OUT/$name.json > $OUT/$name.log 2>&1
  echo "$name rc=$? $((SECONDS - t0)) s"; grep -E "engine:|error|bench:" $OUT/$name.log | head -4; }
s serve-default --concurrency 1,8,32,128 --output-len 256
s serve-long-default --concurrency 1,8,32 --prompt-len 8192 --output-len 128
s serve-long-2048 --concurrency 1,8,32 --prompt-len 8192 --output-len 128 --max-step-tokens 2048
s serve-128k --concurrency 1 --prompt-len 131072 --output-len 64
s serve-1m --concurrency 1 --prompt-len 1000000 --output-len 32
timeout 150 $B/beamserve bench kernels --device cuda --batches 1 --context 1048576 --chunk-rows 2048 \
  --prefill-tokens 0 --json $OUT/chunk-ctx1m.json 2>&1 | grep -E "^attention"
