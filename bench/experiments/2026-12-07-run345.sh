#!/usr/bin/env bash
# Run 345 (one GPU): the drafter's block forward in CUDA graphs.
# 1. model_beam_cuda_tests DFlash2Cuda* (GraphedDraftsEqualEagerOnes new; the engine test drafts
#    through graphs now) and DecodeGraph*.
# 2. beam-nano served on the GPU without drafts and with the GPU-trained drafter, twice each
#    alternating (run 342, eager drafter: 3,087 and 2,988 tok/s on an H100;
#    tools/bench/speculative_text.py, rows 5900:5916, batch 1, greedy, 128 tokens).
# Call: tools/gpu/hold_tree.sh hold models/beam-nano bench/results; tools/gpu/pack_ab.sh
#   build/gpu-bundle.tar.xz --keep beamserve,model_beam_cuda_tests --held models/beam-nano; write
#   .nano_data/prompts_5900.npy; run with carry ["build/all.tar.xz", ".nano_data",
#   "models/beam-nano-dflash2"] (the drafter run 342 trained), timeout 240.
set -u
source tools/gpu/run_prelude.sh
nvidia-smi -L
timeout 100 $bin/model_beam_cuda_tests --gtest_filter='DFlash2Cuda*:DecodeGraph*' > $res/model.log 2>&1
echo "model rc=$? $((SECONDS - start)) s"; grep -E "^\[  (PASSED|FAILED) |Failure|Graphed" $res/model.log | head
serve_one() {
  local mode=$1; shift
  $bin/beamserve serve --model models/beam-nano --device cuda --port 8394 \
    --served-model-name nano "$@" > $res/serve-$mode.log 2>&1 &
  local pid=$!
  for _ in $(seq 120); do
    curl -sf http://127.0.0.1:8394/health > /dev/null && break
    sleep 0.5
  done
  timeout 60 python3 tools/bench/speculative_text.py --url http://127.0.0.1:8394 --model nano \
    --prompts .nano_data/prompts_5900.npy --rows 0:16 > $res/text-$mode.json 2>&1
  echo "$mode rc=$? $((SECONDS - start)) s: $(tail -1 $res/text-$mode.json)"
  kill $pid; wait $pid
}
serve_one none
serve_one dflash --speculative-algorithm DFLASH --speculative-draft-model-path models/beam-nano-dflash2
serve_one none2
serve_one dflash2 --speculative-algorithm DFLASH --speculative-draft-model-path models/beam-nano-dflash2
grep -h "DFlash2\|warn\|error" $res/serve-dflash.log | head -5
echo "total $((SECONDS - start)) s"
