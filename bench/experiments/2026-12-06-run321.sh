#!/usr/bin/env bash
# Run 321 (main 8ebd135): what a speculative verification step costs against a decode step at
# Beam's widths (`bench step --draft-tokens K`, beam-slice 4 layers, 512 cached tokens: K = 0 with
# and without decode graphs, K = 1, 2, 4 at batches 1, 8, 32); then run 320's served beam-nano
# check, `bench offline` on beam-nano and `bench serve` plain / drafts again with the cooldown
# (a sequence whose drafts were all rejected waits 2..32 steps).
set -u
source tools/gpu/run_prelude.sh
for run in k0:0 k0-eager:0 k1:1 k2:2 k4:4; do
  IFS=: read -r name k <<< "$run"
  extra=(); [[ $name == *eager ]] && extra=(--no-cuda-graphs)
  timeout 90 $bin/beamserve bench step --device cuda --layers 4 --batches 1,8,32 --steps 20 \
    --prefill-tokens 0 --draft-tokens $k "${extra[@]}" --json $res/step-$name.json > $res/step-$name.log 2>&1
  echo "step $name rc=$? $((SECONDS - start)) s"
  python3 -c "
import json
d=json.load(open('$res/step-$name.json'))
print('  ', [(x['batch'], round(x['decode_step_ms'],3), round(x['decode_layer_ms'],3), round(x['host_enqueue_ms'],3), round(x['lm_head_ms'],3)) for x in d['decode']])" 2>&1 | tail -1
done
spec='{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 1}'
timeout 150 python3 bench/experiments/2026-12-06-spec-check.py $bin/beamserve $res/check.json \
  > $res/check.log 2>&1
echo "check rc=$? $((SECONDS - start)) s"; cat $res/check.log | tail -12
for mode in plain spec; do
  extra=(); [[ $mode == spec ]] && extra=(--speculative-config "$spec")
  timeout 60 $bin/beamserve bench offline --model models/beam-nano --device cuda --requests 8 \
    --prompt-len 256 --output-len 256 --json "${extra[@]}" > $res/offline-$mode.json 2> $res/offline-$mode.log
  echo "offline $mode rc=$? $((SECONDS - start)) s"
  python3 -c "
import json; d=json.load(open('$res/offline-$mode.json'))
print('  ', {k: d[k] for k in ('output_tokens_per_s','itl_ms_p50','steps','spec_draft_tokens','spec_accepted_tokens')})" 2>&1 | tail -1
done
for mode in plain spec; do
  extra=(); [[ $mode == spec ]] && extra=(--speculative-config "$spec")
  timeout 150 $bin/beamserve bench serve --device cuda --concurrency 1,8,32 --output-len 256 \
    --json $res/serve-$mode.json "${extra[@]}" > $res/serve-$mode.log 2>&1
  echo "serve $mode rc=$? $((SECONDS - start)) s"
  python3 -c "
import json; d=json.load(open('$res/serve-$mode.json'))
for r in d['runs']: print('  ', r['concurrency'], round(r['output_tokens_per_s']), round(r['itl_ms_p50'],3), r['steps'], r['spec_draft_tokens'], r['spec_accepted_tokens'])" 2>&1 | tail -3
done
echo "total $((SECONDS - start)) s"
