#!/usr/bin/env bash
# Run 344 (one GPU): the checks of the token_ids_logprob commit.
# 1. runtime_sampling_cuda_tests (TokenIdsLogprobsMatchTheCpus new).
# 2. beam-nano served on the GPU: SGLang /generate with return_logprob and token_ids_logprob (and
#    return_entropy), without drafts and with n-gram drafts (verification rows).
# Call: tools/gpu/hold_tree.sh hold models/beam-nano bench/results; tools/gpu/pack_ab.sh
#   build/gpu-bundle.tar.xz --keep beamserve,runtime_sampling_cuda_tests --held models/beam-nano;
#   run with carry ["build/all.tar.xz"], timeout 240.
set -u
source tools/gpu/run_prelude.sh
nvidia-smi -L
timeout 120 $bin/runtime_sampling_cuda_tests > $res/sampling.log 2>&1
echo "sampling rc=$? $((SECONDS - start)) s"; grep -E "^\[  (PASSED|FAILED) |Failure|TokenIds" $res/sampling.log | head
sgl='{"input_ids": [1, 40, 41, 42, 43, 44, 45, 46], "sampling_params": {"max_new_tokens": 24, "temperature": 0, "ignore_eos": true}, "return_logprob": true, "return_entropy": true, "token_ids_logprob": [40, 41, 7]}'
for mode in plain ngram; do
  extra=(); [[ $mode == ngram ]] && extra=(--speculative-algorithm NGRAM)
  $bin/beamserve serve --model models/beam-nano --device cuda --port 8393 "${extra[@]}" > $res/serve-$mode.log 2>&1 &
  pid=$!
  for _ in $(seq 120); do curl -sf http://127.0.0.1:8393/health > /dev/null && break; sleep 0.5; done
  curl -s http://127.0.0.1:8393/generate -H 'content-type: application/json' -d "$sgl" > $res/sglang-$mode.json
  kill $pid; wait $pid
  echo "$mode $((SECONDS - start)) s"
done
python3 -c "
import json
s = {m: json.load(open('$res/sglang-%s.json' % m)) for m in ('plain', 'ngram')}
p, n = s['plain'], s['ngram']
ids = p['meta_info']['output_token_ids_logprobs']
print('tokens', len(p['output_ids']), 'id rows', len(ids), 'first', ids[0])
own = [t for t, out in zip(ids, p['output_ids']) if out in (40, 41, 7)]
print('ngram tokens equal:', n['output_ids'] == p['output_ids'], 'verify', n['meta_info'].get('spec_verify_ct'))
d = max(abs(a[0] - b[0]) for x, y in zip(ids, n['meta_info']['output_token_ids_logprobs']) for a, b in zip(x, y))
print('max |ids logprob diff| plain vs ngram:', d)
" 2>&1 | tail -4
echo "total $((SECONDS - start)) s"
