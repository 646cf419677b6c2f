#!/usr/bin/env bash
# Run 343 (one GPU): the checks of the entropy commit and of the drafter pool's sleep test.
# 1. runtime_sampling_cuda_tests (all: EntropiesMatchTheCpus new; the SampledRow's new word).
# 2. model_beam_cuda_tests: the sleep tests (EngineOnCudaSleepsWithItsDraftersPool with its 512 MiB
#    budget, failed in run 342 at creation), the decode graphs and DFlash2Cuda* again.
# 3. beam-nano served on the GPU: /generate with return_entropy, native and SGLang formats,
#    with n-gram drafts (verification rows' entropies) against without.
# Call: tools/gpu/hold_tree.sh hold models/beam-nano bench/results; tools/gpu/pack_ab.sh
#   build/gpu-bundle.tar.xz --keep beamserve,model_beam_cuda_tests,runtime_sampling_cuda_tests
#   --held models/beam-nano; run with carry ["build/all.tar.xz"], timeout 300.
set -u
source tools/gpu/run_prelude.sh
nvidia-smi -L
timeout 120 $bin/runtime_sampling_cuda_tests > $res/sampling.log 2>&1
echo "sampling rc=$? $((SECONDS - start)) s"; grep -E "^\[  (PASSED|FAILED) |Failure|Entrop" $res/sampling.log | head
timeout 120 $bin/model_beam_cuda_tests --gtest_filter='*Sleep*:DecodeGraph*:DFlash2Cuda*' \
  > $res/model.log 2>&1
echo "model rc=$? $((SECONDS - start)) s"; grep -E "^\[  (PASSED|FAILED) |Failure" $res/model.log | head
ask='{"input_ids": [1, 40, 41, 42, 43, 44, 45, 46], "max_tokens": 24, "temperature": 0.8, "seed": 3, "ignore_eos": true, "return_entropy": true, "logprobs": true}'
sgl='{"input_ids": [1, 40, 41, 42, 43, 44, 45, 46], "sampling_params": {"max_new_tokens": 24, "temperature": 0.8, "sampling_seed": 3, "ignore_eos": true}, "return_entropy": true}'
for mode in plain ngram; do
  extra=(); [[ $mode == ngram ]] && extra=(--speculative-algorithm NGRAM)
  $bin/beamserve serve --model models/beam-nano --device cuda --port 8392 "${extra[@]}" > $res/serve-$mode.log 2>&1 &
  pid=$!
  for _ in $(seq 120); do curl -sf http://127.0.0.1:8392/health > /dev/null && break; sleep 0.5; done
  curl -s http://127.0.0.1:8392/generate -H 'content-type: application/json' -d "$ask" > $res/native-$mode.json
  curl -s http://127.0.0.1:8392/generate -H 'content-type: application/json' -d "$sgl" > $res/sglang-$mode.json
  kill $pid; wait $pid
  echo "$mode $((SECONDS - start)) s"
done
python3 -c "
import json
n = {m: json.load(open('$res/native-%s.json' % m))['choices'][0] for m in ('plain', 'ngram')}
s = {m: json.load(open('$res/sglang-%s.json' % m))['meta_info'] for m in ('plain', 'ngram')}
p = n['plain']
print('tokens', len(p['token_ids']), 'entropies', len(p['entropy']), 'first', [round(h, 4) for h in p['entropy'][:6]])
print('sglang equals native:', s['plain']['output_token_entropy'] == p['entropy'])
print('ngram tokens equal:', n['ngram']['token_ids'] == p['token_ids'],
      'max |entropy diff|:', max(abs(a - b) for a, b in zip(n['ngram']['entropy'], p['entropy'])))
print('ngram verify count', s['ngram'].get('spec_verify_ct'))
" 2>&1 | tail -5
echo "total $((SECONDS - start)) s"
