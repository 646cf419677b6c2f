#!/usr/bin/env bash
# Run 334 (one GPU): the hierarchical cache's host ranks and write policies on the GPU, against
# main before them (e888b55, carried as var/beamserve-main). The CUDA host-tier tests, then bench
# offline's agentic workload on beam-nano (16 sessions x 8 turns, 4 running, 2,048-token steps,
# 32 MiB of KV pools: they hold the running set, not the working set):
#   main:  no host tier, write-back ratio 2, ratio 4 (run 333's rows after the fixes since)
#   new:   write-back ratio 2 and 4 (loose sliding blocks ranked below resumable ones),
#          write-through and write-through-selective ratio 2;
# and with one one-off prompt beside every turn (background traffic; main lacks the flag): new
# write-back and selective, ratio 2, and no host tier.
set -u
source tools/gpu/run_prelude.sh
nvidia-smi -L | tee $res/gpus.txt
timeout 120 $bin/model_beam_cuda_tests --gtest_filter='*HostKv*:*FromTheHost*' > $res/model_beam_cuda.log 2>&1
echo "hicache cuda tests rc=$? $((SECONDS - start)) s"; grep -E "OK \]|PASSED|FAILED|Failure" $res/model_beam_cuda.log
wl="--model models/beam-nano --workload agentic --conversations 16 --turns 8 --first-prompt-len 1024
    --turn-append-len 200 --output-len 64 --max-running 4 --device cuda --max-step-tokens 2048
    --kv-budget-mb 32"
run() {  # name, binary, flags
  local name=$1 exe=$2; shift 2
  timeout 150 $exe bench offline $wl "$@" > $res/$name.json 2> $res/$name.log
  echo "$name rc=$? $((SECONDS - start)) s"
  python3 - "$res/$name.json" <<'PY'
import json, sys
o = json.load(open(sys.argv[1]))
print("  hit by turn", [round(x, 3) for x in o["hit_rate_by_turn"]], "later", round(o["prefix_cache_hit_rate_turns_2plus"], 3),
      "hit", round(o["prefix_cache_hit_rate"], 3), "tok/s", round(o["total_tokens_per_s"]), "wall", round(o["wall_s"], 2),
      "ttft p50", round(o["ttft_ms_p50"], 1), "restored", o["host_restored_tokens"], "saved", o["host_saved_blocks"],
      "loaded", o["host_loaded_blocks"], "unused", o.get("host_unused_blocks"))
PY
}
hc="--enable-hierarchical-cache"
run main_device $var/beamserve-main
run main_wb2 $var/beamserve-main $hc --hicache-ratio 2
run main_wb4 $var/beamserve-main $hc --hicache-ratio 4
run new_wb2 $bin/beamserve $hc --hicache-ratio 2
run new_wb4 $bin/beamserve $hc --hicache-ratio 4
run new_wt2 $bin/beamserve $hc --hicache-ratio 2 --hicache-write-policy write_through
run new_wts2 $bin/beamserve $hc --hicache-ratio 2 --hicache-write-policy write_through_selective
run new_device $bin/beamserve
wl="$wl --one-off-per-turn 1"
run new_wb2_oneoff $bin/beamserve $hc --hicache-ratio 2
run new_wts2_oneoff $bin/beamserve $hc --hicache-ratio 2 --hicache-write-policy write_through_selective
run new_device_oneoff $bin/beamserve
