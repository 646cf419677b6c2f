#!/usr/bin/env bash
# Run 337 (one GPU, not yet run: no GPU could be started for it on 2026-12-07): trains beam-nano's
# DFlash2 drafter on the GPU, continuing from the CPU-trained one (0.30 drafts accepted a block of
# 7), on every prompt window but the held-out ones; the checkpoint comes back in $OUT/nano.
# Call: run with carry [".nano_data", "models/beam-nano-dflash2"] (make both first:
#   /usr/bin/python3 tools/reference/nano/dflash2_prompts.py
#   /usr/bin/python3 tools/reference/nano/train_nano_drafter.py   # ~20 min on this CPU
# ), timeout 330. Then on this machine: copy $OUT/nano to models/beam-nano-dflash2, evaluate with
#   /usr/bin/python3 tools/reference/nano/train_nano_drafter.py --eval-only
# and measure served text against plain and n-gram drafts (docs/benchmarks.md "DFlash2 drafts on
# the CPU": tools/bench/speculative_text.py against `beamserve serve --model models/beam-nano`
# with and without --speculative-algorithm DFLASH --speculative-draft-model-path
# models/beam-nano-dflash2, rows 5900:5916).
set -u
nvidia-smi -L
timeout 300 python3 tools/reference/nano/train_nano_drafter.py --device cuda --train-windows 5800 \
  --batch-seqs 64 --train-seconds 180 --eval-windows 0 --init models/beam-nano-dflash2 \
  --out "$OUT/nano" 2>&1 | tail -20
ls -la "$OUT/nano"
