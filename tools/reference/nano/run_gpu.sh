#!/usr/bin/env bash
# The whole beam-nano build in ONE GPU-machine call (run from the repository root; see README.md):
# corpus -> tokenizer -> encoded tokens -> training until a wall-clock deadline -> export ->
# evaluation. Results land in $OUT, within the device tool's limits (<= 8 files of <= 16 MiB):
#   log.txt, model-0000{1,2,3}-of-00003.safetensors, val.npy (validation tokens), small.tgz (the
#   rest of the model folder, results.json, train_state.json, corpus manifest and file list,
#   token stats).
# Times are seconds after the start: TRAIN_END (training stops), EVAL_END (no new greedy run).
set -uo pipefail
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=true
START=$(date +%s)
OUT=${OUT:-/tmp/nano_out}
WORK=${WORK:-/tmp/nano_work}
TRAIN_END=${TRAIN_END:-490}
EVAL_END=${EVAL_END:-565}
STDLIB_TAR=${STDLIB_TAR:-.nano_data/cpython-3.11.tar.xz}
N=tools/reference/nano
mkdir -p "$OUT" "$WORK"
stamp() { echo "[$(( $(date +%s) - START ))s] $*"; }

pack() {  # copies the shards and tars the small files; safe to call more than once
  [ -d "$WORK/model" ] || return 0
  cp "$WORK"/model/model-*.safetensors "$OUT"/ 2>/dev/null
  local files=()
  for f in model/config.json model/generation_config.json model/model.safetensors.index.json \
           model/tokenizer.json model/tokenizer_config.json results.json train_state.json \
           corpus/manifest.json corpus/files.tsv data/stats.json; do
    [ -e "$WORK/$f" ] && files+=("$f")
  done
  tar -C "$WORK" -czf "$OUT/small.tgz.tmp" "${files[@]}" && mv "$OUT/small.tgz.tmp" "$OUT/small.tgz"
  [ -f "$WORK/data/val.npy" ] && cp "$WORK/data/val.npy" "$OUT/val.npy"
  stamp "packed: $(cd "$OUT" && ls -l | tail -n +2 | awk '{print $5, $9}' | tr '\n' ' ')"
}

pipeline() {
  stamp "environment"
  python3 -c 'import sys, torch, tokenizers, numpy; print(sys.version.split()[0], "torch", torch.__version__,
torch.cuda.get_device_name(0), "tokenizers", tokenizers.__version__, "numpy", numpy.__version__)' || return 1
  nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.sm --format=csv,noheader
  stamp "corpus"
  python3 $N/corpus.py --out "$WORK/corpus" --stdlib-tar "$STDLIB_TAR" --site-packages || return 1
  stamp "tokenizer"
  python3 $N/train_tokenizer.py --corpus "$WORK/corpus" --out "$WORK/tok" || return 1
  stamp "encode"
  python3 $N/encode_corpus.py --corpus "$WORK/corpus" --tokenizer "$WORK/tok" --out "$WORK/data" || return 1
  stamp "train (until +${TRAIN_END}s)"
  python3 $N/train.py --data "$WORK/data" --tokenizer "$WORK/tok" --out-model "$WORK/model" \
      --state-json "$WORK/train_state.json" --state-out "$WORK/state.pt" \
      --deadline $(( START + TRAIN_END )) || return 1
  pack
  stamp "evaluate"
  python3 $N/evaluate.py --model "$WORK/model" --data "$WORK/data" --corpus "$WORK/corpus" \
      --out "$WORK/results.json" --deadline $(( START + EVAL_END )) || return 1
  pack
  stamp "done"
}

pipeline 2>&1 | tee "$OUT/log.txt"
rc=${PIPESTATUS[0]}
pack >>"$OUT/log.txt" 2>&1
exit "$rc"
