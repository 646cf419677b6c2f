#!/usr/bin/env bash
# Run 348 (one GPU): the drafter's context feed in CUDA graphs, and return_hidden_states.
# 1. model_beam_cuda_tests DFlash2Cuda* (GraphedContextFeedsEqualEagerOnes new), DecodeGraph*
#    (FinalHiddenStates* new), BeamCuda.Captured*.
# 2. beam-nano served with --enable-return-hidden-states: one greedy /generate with the states
#    (compared on the CPU afterwards with the CPU engine's).
# 3. beam-nano served on the GPU without drafts and with the GPU-trained drafter, twice each
#    alternating (run 345, draft graphs: 3,054 / 3,058 none, 3,150 / 3,045 DFlash2 tok/s on an
#    H100; tools/bench/speculative_text.py, rows 5900:5916, batch 1, greedy, 128 tokens).
# Call: tools/gpu/hold_tree.sh hold models/beam-nano bench/results; tools/gpu/pack_ab.sh
#   build/gpu-bundle.tar.xz --keep beamserve,model_beam_cuda_tests --held models/beam-nano; run
#   with carry ["build/all.tar.xz", ".nano_data", "models/beam-nano-dflash2"], timeout 300.
set -u
source tools/gpu/run_prelude.sh
nvidia-smi -L
timeout 120 $bin/model_beam_cuda_tests --gtest_filter='DFlash2Cuda*:DecodeGraph*:BeamCuda.Captured*' > $res/model.log 2>&1
echo "model rc=$? $((SECONDS - start)) s"; grep -E "^\[  (PASSED|FAILED) |Failure|context graph" $res/model.log | head
start_server() {
  $bin/beamserve serve --model models/beam-nano --device cuda --port 8394 \
    --served-model-name nano "$@" > $res/serve-$mode.log 2>&1 &
  pid=$!
  for _ in $(seq 120); do
    curl -sf http://127.0.0.1:8394/health > /dev/null && break
    sleep 0.5
  done
}
mode=states; start_server --enable-return-hidden-states
curl -s http://127.0.0.1:8394/generate -H 'content-type: application/json' -d '{"input_ids":
  [3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14], "max_tokens": 6, "ignore_eos": true,
  "temperature": 0, "return_hidden_states": true}' > $res/states.json
echo "states: $(head -c 200 $res/states.json)"
kill $pid; wait $pid
serve_one() {
  mode=$1; shift
  start_server "$@"
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
