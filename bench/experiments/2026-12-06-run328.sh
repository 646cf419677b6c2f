#!/usr/bin/env bash
# Run 328 (tensor parallelism over two GPUs): `bench serve` on beam-slice (2 layers: 1 dense, 1
# MoE; host weights generated once per run) on one GPU and split over two, concurrency 1, 8 and
# 32, 512-token prompts, 128 tokens out.
set -u
source tools/gpu/run_prelude.sh
nccl=$(python3 -c "import nvidia.nccl; print(list(nvidia.nccl.__path__)[0] + '/lib')")
export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$nccl"
for tp in 1 2; do
  timeout 270 $bin/beamserve bench serve --device cuda --tensor-parallel-size $tp \
    --concurrency 1,8,32 --prompt-len 512 --output-len 128 --json > $res/serve_tp$tp.json \
    2> $res/serve_tp$tp.log
  echo "tp $tp rc=$? $((SECONDS - start)) s"
  python3 - $res/serve_tp$tp.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for run in r['runs']:
    print(run['concurrency'], {k: run.get(k) for k in ('output_tokens_per_s', 'ttft_ms_p50', 'itl_ms_p50', 'itl_ms_p99')})
PY
done
