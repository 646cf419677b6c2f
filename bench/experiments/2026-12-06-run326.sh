#!/usr/bin/env bash
# Run 326 (main with speculation under masks and the n-gram corpus): served beam-nano on the GPU,
# plain against SGLang's NGRAM flags (corpus on): guided_json / guided_regex / bad_words / free
# greedy requests, each twice (bench/experiments/2026-12-06-spec-masked-check.py).
set -u
source tools/gpu/run_prelude.sh
timeout 200 python3 bench/experiments/2026-12-06-spec-masked-check.py $bin/beamserve $res/check.json \
  > $res/check.log 2>&1
echo "check rc=$? $((SECONDS - start)) s"; tail -14 $res/check.log
