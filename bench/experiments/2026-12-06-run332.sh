#!/usr/bin/env bash
# Run 332 (one GPU): the hierarchical cache on the GPU. model_beam_cuda_tests whole (its new
# HostKvStore round trip and the engine's evicted prompt back from the host, exact), then
# bench offline's agentic workload on beam-nano with KV pools holding about half the sessions:
# no host tier vs a host tier (--hicache-ratio 2, 4), and with roomy pools (nothing evicted:
# the host tier's cost when idle). Run 333: the same with RUNNING=4 STEP=2048 HALF=32 (pools
# that hold the running set, not the working set) and MODEL_TESTS=0.
set -u
source tools/gpu/run_prelude.sh
nvidia-smi -L | tee $res/gpus.txt
if [[ ${MODEL_TESTS:-1} == 1 ]]; then
  timeout 420 $bin/model_beam_cuda_tests > $res/model_beam_cuda.log 2>&1
  echo "model_beam_cuda rc=$? $((SECONDS - start)) s"
  grep -E "Hierarch|HostKv|PASSED|FAILED|Failure" $res/model_beam_cuda.log | tail -12
else
  timeout 120 $bin/model_beam_cuda_tests --gtest_filter='*HostKv*:*FromTheHost*' > $res/model_beam_cuda.log 2>&1
  echo "hicache cuda tests rc=$? $((SECONDS - start)) s"; grep -E "OK \]|PASSED|FAILED|Failure" $res/model_beam_cuda.log
fi
wl="--model models/beam-nano --workload agentic --conversations 16 --turns 8 --first-prompt-len 1024
    --turn-append-len 200 --output-len 64 --max-running ${RUNNING:-8} --device cuda
    ${STEP:+--max-step-tokens $STEP}"
run() {  # name, flags
  local name=$1; shift
  timeout 150 $bin/beamserve bench offline $wl "$@" > $res/$name.json 2> $res/$name.log
  echo "$name rc=$? $((SECONDS - start)) s"
  python3 - "$res/$name.json" <<'PY'
import json, sys
o = json.load(open(sys.argv[1]))
print("  hit by turn", [round(x, 3) for x in o["hit_rate_by_turn"]], "hit", round(o["prefix_cache_hit_rate"], 3),
      "tok/s", round(o["total_tokens_per_s"]), "wall", round(o["wall_s"], 2), "ttft p50", round(o["ttft_ms_p50"], 1),
      "host restored", o["host_restored_tokens"], "saved", o["host_saved_blocks"], "loaded", o["host_loaded_blocks"])
PY
}
half=${HALF:-24}
run half_device --kv-budget-mb $half
run half_host2 --kv-budget-mb $half --enable-hierarchical-cache --hicache-ratio 2
run half_host4 --kv-budget-mb $half --enable-hierarchical-cache --hicache-ratio 4
run roomy_device --kv-budget-mb 256
run roomy_host4 --kv-budget-mb 256 --enable-hierarchical-cache --hicache-ratio 4
run roomy_device_again --kv-budget-mb 256
grep -h "hierarchical cache\|KV pools" $res/half_host4.log $res/roomy_host4.log | cut -c1-220
