#!/usr/bin/env bash
# CPU pipeline test at toy scale (this machine: /usr/bin/python3, torch 1.13, no `tokenizers`):
# corpus from the packed 3.11 stdlib -> toy byte tokenizer -> encode -> 30 training steps of
# toy_config() -> export -> evaluation (exact numerics) -> fixture selection. Same scripts as
# run_gpu.sh except the tokenizer (toy_tokenizer.py) and the sizes. ~2 minutes.
#   tools/reference/nano/run_cpu_toy.sh [WORK_DIR]
set -euo pipefail
PY=/usr/bin/python3
N=tools/reference/nano
W=${1:-/tmp/nano_toy}
rm -rf "$W"
mkdir -p "$W"
[ -f .nano_data/cpython-3.11.tar.xz ] || $N/pack_local_stdlib.sh
$PY $N/corpus.py --out "$W/corpus" --stdlib-tar .nano_data/cpython-3.11.tar.xz --no-local-stdlib
$PY $N/toy_tokenizer.py --out "$W/tok"
$PY $N/encode_corpus.py --corpus "$W/corpus" --tokenizer "$W/tok" --out "$W/data" --toy
$PY $N/train.py --data "$W/data" --tokenizer "$W/tok" --out-model "$W/model" --state-json "$W/train_state.json" \
    --state-out "$W/state.pt" --toy --total-steps 30 --batch 4 --seq-len 64 --warmup 5 --lr 3e-3 \
    --log-every-s 5 --device cpu
$PY $N/train.py --data "$W/data" --tokenizer "$W/tok" --out-model "$W/model_resumed" \
    --state-json "$W/train_state_resumed.json" --toy --total-steps 35 --batch 4 --seq-len 64 --warmup 5 \
    --resume "$W/model" --resume-state "$W/train_state.json" --device cpu
$PY $N/evaluate.py --model "$W/model" --data "$W/data" --corpus "$W/corpus" --out "$W/results.json" \
    --seq-len 64 --exact-windows 16 --candidates 4 --max-new 8 --toy --device cpu
$PY $N/check_cpu.py --model "$W/model" --results "$W/results.json" --out "$W/greedy.json" --count 2 \
    --allow-stop --min-margin 0
echo "toy pipeline ok: $W"
