#!/usr/bin/env bash
# Run 252: main 3af8bf6: long prompts (8,192 tokens, prompts of their own at every level) at the
# default step budget (8192 on the H200) and at 2048, two rounds alternating.
set -u
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
tar -C build -xJf build/all.tar.xz
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
B=build/gpu-bundle/bin
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
for round in 1 2; do
  for step in 8192 2048; do
    timeout 200 $B/beamserve bench serve --device cuda --concurrency 1,8,32 --prompt-len 8192 --output-len 128 \
      --max-step-tokens $step --json $OUT/long-$step-r$round.json > /tmp/long-$step-r$round.log 2>&1
    echo "round $round step $step rc=$?"
  done
done
