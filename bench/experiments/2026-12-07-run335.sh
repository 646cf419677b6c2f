#!/usr/bin/env bash
# Run 335 (one GPU): after run 334, at 01e7ceb: every model_beam_cuda test (the LoRA-on-ranks
# commit changed the workspace's tensor-parallel buffers and the logits' gather), then run 334's
# workload at ratio 2 with write-back and write-through (write-through's copies now rank below
# every block the device lost: HostRank::kDeviceCopy).
set -u
source tools/gpu/run_prelude.sh
nvidia-smi -L | tee $res/gpus.txt
timeout 200 $bin/model_beam_cuda_tests > $res/model_beam_cuda.log 2>&1
echo "model_beam_cuda rc=$? $((SECONDS - start)) s"; grep -E "^\[  (PASSED|FAILED|SKIPPED) \]" $res/model_beam_cuda.log | head -3
wl="--model models/beam-nano --workload agentic --conversations 16 --turns 8 --first-prompt-len 1024
    --turn-append-len 200 --output-len 64 --max-running 4 --device cuda --max-step-tokens 2048
    --kv-budget-mb 32 --enable-hierarchical-cache --hicache-ratio 2"
for p in write_back write_through; do
  timeout 100 $bin/beamserve bench offline $wl --hicache-write-policy $p > $res/$p.json 2> $res/$p.log
  echo "$p rc=$? $((SECONDS - start)) s"
  python3 - "$res/$p.json" <<'PY'
import json, sys
o = json.load(open(sys.argv[1]))
print("  hit by turn", [round(x, 3) for x in o["hit_rate_by_turn"]], "later", round(o["prefix_cache_hit_rate_turns_2plus"], 3),
      "tok/s", round(o["total_tokens_per_s"]), "saved", o["host_saved_blocks"], "loaded", o["host_loaded_blocks"])
PY
done
