#!/usr/bin/env bash
# Run 249: measurements only (main 54d3958's bundle).
set -u
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
tar -C build -xJf build/all.tar.xz
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
B=build/gpu-bundle/bin
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
echo "== 1. cuda_kernels_bench prefill-chunk cases"
timeout 150 $B/cuda_kernels_bench --benchmark_filter='BM_moe_experts/T:(1536|2048|4096|257)/' \
  --benchmark_out=$OUT/kbench.json --benchmark_out_format=json 2>&1 | tail -12
echo "== 2. chunk attention after long context"
for ctx in 32768 131072; do
  timeout 120 $B/beamserve bench kernels --device cuda --batches 1 --context $ctx --chunk-rows 2048 \
    --prefill-tokens 0 --json $OUT/chunk-ctx$ctx.json 2>&1 | grep -i "attention" | head -12
done
timeout 120 $B/beamserve bench kernels --device cuda --batches 1 --context 32768 --chunk-rows 2048 \
  --prefill-tokens 0 --attention-probs bf16 --json $OUT/chunk-ctx32768-bf16.json 2>&1 | grep -i "attention chunk"
echo "== 3. ncu kernel times of a 2,048-token prefill step"
timeout 200 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --print-units base \
  $B/beamserve bench step --device cuda --batches 1 --context 16 --warmup 0 --steps 1 --prefill-tokens 2048 --prefill-reps 1 \
  > $OUT/ncu-prefill2048.csv 2> $OUT/ncu-prefill2048.err
ls -la $OUT/ncu-prefill2048.csv; tail -2 $OUT/ncu-prefill2048.err
xz -9 $OUT/ncu-prefill2048.csv
echo "== 4. bench serve: long prompts at max-step-tokens 2048 vs 8192"
for s in 2048 8192; do
  timeout 200 $B/beamserve bench serve --device cuda --concurrency 1,8,32 --prompt-len 8192 --output-len 128 \
    --max-step-tokens $s --json $OUT/serve-step$s.json 2>&1 | tail -6
done
