#!/usr/bin/env bash
# Run 346 (one GPU): SGLang's input_token_ids_logprobs on the GPU (the device sampler's score
# rows of a prompt position's token and of the given ids). beam-nano served on the GPU; an id
# equal to a position's prompt token must give that token's input logprob.
# Call: tools/gpu/hold_tree.sh hold models/beam-nano bench/results; tools/gpu/pack_ab.sh
#   build/gpu-bundle.tar.xz --keep beamserve --held models/beam-nano; run with carry
#   ["build/all.tar.xz"], timeout 120.
set -u
source tools/gpu/run_prelude.sh
nvidia-smi -L
$bin/beamserve serve --model models/beam-nano --device cuda --port 8395 > $res/serve.log 2>&1 &
pid=$!
for _ in $(seq 120); do curl -sf http://127.0.0.1:8395/health > /dev/null && break; sleep 0.5; done
sgl='{"input_ids": [1, 40, 41, 42, 43, 44, 45, 46], "sampling_params": {"max_new_tokens": 4, "temperature": 0}, "return_logprob": true, "logprob_start_len": 0, "token_ids_logprob": [42, 40]}'
curl -s http://127.0.0.1:8395/generate -H 'content-type: application/json' -d "$sgl" > $res/sglang.json
kill $pid; wait $pid
python3 -c "
import json
m = json.load(open('$res/sglang.json'))['meta_info']
ids, inp = m['input_token_ids_logprobs'], m['input_token_logprobs']
print('positions', len(ids), 'first', ids[0], 'second', ids[1])
print('id 40 at position 1 equals its input logprob:', ids[1][1][0] == inp[1][0], ids[1][1][0], inp[1][0])
print('id 42 at position 3 equals its input logprob:', ids[3][0][0] == inp[3][0], ids[3][0][0], inp[3][0])
print('output rows', len(m['output_token_ids_logprobs']))
" 2>&1 | tail -4
echo "total $((SECONDS - start)) s"
