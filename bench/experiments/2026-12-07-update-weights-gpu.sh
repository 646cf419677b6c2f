#!/usr/bin/env bash
# /update_weights_from_disk on the GPU (the RL weight sync) with a synthetic Beam-width checkpoint
# (22.43 GiB): A = the bundle of c3f0e58 (experts fused into host memory at each update), B = this
# tree's (read when the update applies, experts streamed to the GPU); three updates each, their
# wall time and the server's peak RSS; then the protocol suite with its servers on the GPU.
set -uo pipefail
source tools/gpu/run_prelude.sh
nvidia-smi --query-gpu=name --format=csv,noheader | tee $res/gpu.txt
ck=/tmp/synth
python3 tools/gpu/synthetic_checkpoint.py $ck --layers 4 --experts 64 | tee $res/checkpoint.txt
serve_and_update() {  # NAME BIN PORT
  /usr/bin/time -v "$2" serve --model $ck --tokenizer tests/server/fixtures/tiny-chat --device cuda \
    --port $3 --enable-weight-updates --kv-budget-mb 2048 --max-running 16 \
    --max-tokens-per-step 2048 > $res/$1.log 2> $res/$1.err &
  local pid=$!
  for i in $(seq 240); do curl -sf localhost:$3/health > /dev/null && break; sleep 0.5; done
  echo "$1 healthy after ~$((i / 2)) s"
  for n in 1 2 3; do
    curl -s -o $res/$1-update$n.json -w "$1 update $n: %{http_code} %{time_total} s\n" -X POST \
      localhost:$3/update_weights_from_disk -H 'content-type: application/json' \
      -d "{\"model_path\": \"$ck\"}"
  done
  curl -s "localhost:$3/get_weights_by_name?name=model.layers.2.mlp.experts.63.down_proj.weight&truncate_size=1" \
    -o $res/$1-expert.json -w "$1 get_weights_by_name: %{http_code}\n"
  pkill -INT -P $pid; wait $pid  # the server, not GNU time (which ignores SIGINT: run 361 hung)
  grep -E "Maximum resident" $res/$1.err | sed "s/^/$1 /"
}
serve_and_update a $var/beamserve-a 18301 | tee $res/updates.txt
serve_and_update b $bin/beamserve 18302 | tee -a $res/updates.txt
rm -rf $ck
echo "$((SECONDS - start)) s: updates"
OUT=$res timeout 300 tools/gpu/run_client_tests.sh protocol 2>&1 | tail -3
grep -E "update_weights|get_weights_by_name|not ok" $res/client_protocol.log | head -6
echo "$((SECONDS - start)) s: done"
