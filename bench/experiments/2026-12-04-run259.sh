#!/usr/bin/env bash
# Run 259: main a140e5d (constrained decoding): model_beam_cuda_tests with the fixed response-format
# test; bench serve on beam-slice (2 layers) with Qwen3's 151,669-token vocabulary as the masks'
# text: free output against every output constrained (a free JSON string: ~147K tokens allowed a
# step, the string caches; an array of integers: the trie walk), concurrency 1 / 8 / 32 / 128.
set -u
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
tar -C build -xJf build/all.tar.xz
mkdir -p /tmp/qwen3 && tar -C /tmp/qwen3 -xJf build/qwen3-tok.tar.xz
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
B=build/gpu-bundle/bin
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 200 $B/model_beam_cuda_tests > /tmp/mbc.log 2>&1; echo "model_beam_cuda_tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|KeepsResponse" /tmp/mbc.log | head
echo '{"type": "string", "minLength": 100000}' > /tmp/str.json
echo '{"type": "array", "items": {"type": "integer"}, "minItems": 100000}' > /tmp/ints.json
s() { local name=$1; shift; local t0=$SECONDS
  timeout 170 $B/beamserve bench serve --device cuda --concurrency 1,8,32,128 --output-len 128 "$@" \
    --json $OUT/$name.json > /tmp/$name.log 2>&1
  echo "$name rc=$? $((SECONDS - t0)) s"; grep -E "error|bench:" /tmp/$name.log | head -3
  python3 -c "
import json; r = json.load(open('$OUT/$name.json'))
for x in r['runs']: print(x['concurrency'], x['output_tokens'], round(x['output_tokens_per_s']), 'itl', round(x['itl_ms_p50'], 3), round(x['itl_ms_p99'], 3), 'ttft', round(x['ttft_ms_p50'], 1))"; }
s serve-free
s serve-json-string --json-schema /tmp/str.json --tokenizer /tmp/qwen3/models
s serve-json-ints --json-schema /tmp/ints.json --tokenizer /tmp/qwen3/models
