#!/usr/bin/env bash
# The checks of 2ee8f97 / 7a5a389 that the twenty-fourth session had no device time for, on this
# tree's bundle alone: model_beam_cuda (the pread streaming path, an update from a file cut
# short), the load of a synthetic Beam-width checkpoint (4 routed layers of 64 experts, ~24 GB;
# warm twice, then cold) with `bench offline` (wall time, peak RSS, upload rate), three weight
# updates on a served model (wall time, RSS, /metrics).
set -uo pipefail
source tools/gpu/run_prelude.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee $res/gpu.txt
timeout 300 $bin/model_beam_cuda_tests --gtest_brief=1 > $res/model_beam_cuda.txt 2>&1
echo "model_beam_cuda rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $res/model_beam_cuda.txt | tr '\n' ' ')"
grep -E "FAILED" $res/model_beam_cuda.txt | head -10
echo "$((SECONDS - start)) s: model_beam_cuda"
ck=/tmp/synth
python3 tools/gpu/synthetic_checkpoint.py $ck --layers 4 --experts 64 > $res/checkpoint.txt
echo "$((SECONDS - start)) s: written $(du -sh $ck | cut -f1)"
load() {  # NAME
  /usr/bin/time -v $bin/beamserve bench offline --model $ck --device cuda --requests 1 \
    --prompt-len 16 --output-len 2 --kv-budget-mb 2048 --max-step-tokens 2048 --no-cuda-graphs \
    > $res/$1.json 2> $res/$1.err
  echo "$1 rc=$? $(grep -E 'Elapsed|Maximum resident' $res/$1.err | tr -s ' ' | tr '\n' ' ') $(grep -o 'weights on GPU.*' $res/$1.err)"
}
{ load warm1; load warm2; sync; echo 3 > /proc/sys/vm/drop_caches && load cold; } | tee $res/load.txt
echo "$((SECONDS - start)) s: loads"
/usr/bin/time -v $bin/beamserve serve --model $ck --tokenizer tests/server/fixtures/tiny-chat \
  --device cuda --port 18302 --enable-weight-updates --kv-budget-mb 2048 --max-running 16 \
  --max-tokens-per-step 2048 > $res/serve.log 2> $res/serve.err &
pid=$!
for i in $(seq 240); do curl -sf localhost:18302/health > /dev/null && break; sleep 0.5; done
echo "healthy after ~$((i / 2)) s" | tee $res/updates.txt
for n in 1 2 3; do
  curl -s -o $res/update$n.json -w "update $n: %{http_code} %{time_total} s\n" -X POST \
    localhost:18302/update_weights_from_disk -H 'content-type: application/json' \
    -d "{\"model_path\": \"$ck\"}"
done | tee -a $res/updates.txt
curl -s localhost:18302/metrics | grep -E "^beamserve_weight_update" | tee -a $res/updates.txt
pkill -INT -P $pid; wait $pid
grep -E "Maximum resident" $res/serve.err | tee -a $res/updates.txt
rm -rf $ck
echo "$((SECONDS - start)) s: updates"
echo "$((SECONDS - start)) s: done"
