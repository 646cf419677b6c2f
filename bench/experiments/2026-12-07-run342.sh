#!/usr/bin/env bash
# Run 342 (one GPU): runs 341 and 337 in one call, then serves with the drafter it trained.
# 1. The checks of ca7cc91 and later: the DFlash2 suites, the decode graphs (verification steps in
#    graphs too) and sleep mode with a drafter's pool (model_beam_cuda_tests), the kernels' DFlash2
#    suites.
# 2. Trains beam-nano's DFlash2 drafter on the GPU (torch), continuing from the CPU-trained one, on
#    every prompt window but the held-out ones (rows 5800 on); the checkpoint comes back in $OUT/nano.
# 3. `bench step --draft-tokens 4` at Beam's widths with and without graphs; then beam-nano
#    served on the GPU without drafts, with the new drafter and with n-grams (verification
#    steps now replay graphs; run 340: 3,019 / 1,979 / 4,510 tok/s eager)
#    (tools/bench/speculative_text.py, rows 5900:5916, batch 1, greedy, 128 tokens); `bench
#    offline` on beam-nano with and without n-gram drafts. Later stages are skipped past their
#    time.
# Call: tools/gpu/hold_tree.sh hold models/beam-nano; tools/gpu/pack_ab.sh build/gpu-bundle.tar.xz
#   --keep beamserve,kernels_cuda_tests,model_beam_cuda_tests --held models/beam-nano; write
#   .nano_data/prompts_5900.npy (rows 5900:5916 of .nano_data/dflash2_prompts.npy); run with carry
#   ["build/all.tar.xz", ".nano_data", "models/beam-nano-dflash2"], timeout 600.
set -u
source tools/gpu/run_prelude.sh
nvidia-smi -L
timeout 90 $bin/kernels_cuda_tests --gtest_filter='*DFlash2*:*Softcap*:*AddRounded*' \
  > $res/kernels.log 2>&1
echo "kernels rc=$? $((SECONDS - start)) s"; grep -E "^\[  (PASSED|FAILED) |Failure" $res/kernels.log | head
timeout 120 $bin/model_beam_cuda_tests \
  --gtest_filter='DFlash2Cuda*:BeamCuda.Captured*:DecodeGraph*:*Sleep*' > $res/model.log 2>&1
echo "model rc=$? $((SECONDS - start)) s"; grep -E "^\[  (PASSED|FAILED) |Failure|OK \]|sleep freed" $res/model.log | head -24
# What a verification step costs with and without graphs at Beam's widths (run 321: eager
# verification K 4 at batch 1: 3.716 ms against a 1.751 ms decode graph, beam-slice 4 layers).
for run in k0:0 k4:4 k4-eager:4; do
  IFS=: read -r name k <<< "$run"
  extra=(); [[ $name == *eager ]] && extra=(--no-cuda-graphs)
  timeout 60 $bin/beamserve bench step --device cuda --layers 4 --batches 1,8,32 --steps 20 \
    --prefill-tokens 0 --draft-tokens $k "${extra[@]}" --json $res/step-$name.json > $res/step-$name.log 2>&1
  echo "step $name rc=$? $((SECONDS - start)) s"
  python3 -c "
import json
d=json.load(open('$res/step-$name.json'))
print('  ', [(x['batch'], round(x['decode_step_ms'],3), round(x['host_enqueue_ms'],3)) for x in d['decode']])" 2>&1 | tail -1
done
timeout 230 python3 tools/reference/nano/train_nano_drafter.py --device cuda --train-windows 5800 \
  --batch-seqs 64 --train-seconds 140 --eval-windows 0 --init models/beam-nano-dflash2 \
  --out "$OUT/nano" > $res/train.log 2>&1
echo "train rc=$? $((SECONDS - start)) s"; tail -8 $res/train.log; ls "$OUT/nano"
serve_one() {
  local mode=$1; shift
  $bin/beamserve serve --model models/beam-nano --device cuda --port 8391 \
    --served-model-name nano "$@" > $res/serve-$mode.log 2>&1 &
  local pid=$!
  for _ in $(seq 120); do
    curl -sf http://127.0.0.1:8391/health > /dev/null && break
    sleep 0.5
  done
  timeout 60 python3 tools/bench/speculative_text.py --url http://127.0.0.1:8391 --model nano \
    --prompts .nano_data/prompts_5900.npy --rows 0:16 > $res/text-$mode.json 2>&1
  echo "$mode rc=$? $((SECONDS - start)) s: $(tail -3 $res/text-$mode.json)"
  kill $pid; wait $pid
}
if ((SECONDS - start < 500)) && [[ -f $OUT/nano/config.json ]]; then
  serve_one none
  serve_one dflash --speculative-algorithm DFLASH --speculative-draft-model-path "$OUT/nano"
  grep -h "DFlash2\|error" $res/serve-dflash.log | head -5
fi
((SECONDS - start < 530)) && serve_one ngram --speculative-algorithm NGRAM
# bench offline on beam-nano (run 321 with eager verification: 13,844 -> 10,617 tok/s with drafts).
spec='{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 1}'
for mode in plain spec; do
  ((SECONDS - start < 560)) || break
  extra=(); [[ $mode == spec ]] && extra=(--speculative-config "$spec")
  timeout 30 $bin/beamserve bench offline --model models/beam-nano --device cuda --requests 8 \
    --prompt-len 256 --output-len 256 --json "${extra[@]}" > $res/offline-$mode.json 2> $res/offline-$mode.log
  echo "offline $mode rc=$? $((SECONDS - start)) s"
  python3 -c "
import json; d=json.load(open('$res/offline-$mode.json'))
print('  ', {k: d[k] for k in ('output_tokens_per_s','itl_ms_p50','steps','spec_draft_tokens','spec_accepted_tokens')})" 2>&1 | tail -1
done
echo "total $((SECONDS - start)) s"
