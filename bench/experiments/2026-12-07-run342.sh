#!/usr/bin/env bash
# Run 342 (one GPU): runs 341 and 337 in one call, then serves with the drafter it trained.
# 1. The checks of ca7cc91 and later: the DFlash2 suites, the decode graphs (verification steps in
#    graphs too) and sleep mode with a drafter's pool (model_beam_cuda_tests), the kernels' DFlash2
#    suites.
# 2. Trains beam-nano's DFlash2 drafter on the GPU (torch), continuing from the CPU-trained one, on
#    every prompt window but the held-out ones (rows 5800 on); the checkpoint comes back in $OUT/nano.
# 3. beam-nano served on the GPU without drafts, with the new drafter and with n-grams (verification
#    steps now replay graphs; run 340: 3,019 / 1,979 / 4,510 tok/s eager)
#    (tools/bench/speculative_text.py, rows 5900:5916, batch 1, greedy, 128 tokens).
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
timeout 250 python3 tools/reference/nano/train_nano_drafter.py --device cuda --train-windows 5800 \
  --batch-seqs 64 --train-seconds 150 --eval-windows 0 --init models/beam-nano-dflash2 \
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
if ((SECONDS - start < 480)) && [[ -f $OUT/nano/config.json ]]; then
  serve_one none
  serve_one dflash --speculative-algorithm DFLASH --speculative-draft-model-path "$OUT/nano"
  grep -h "DFlash2\|error" $res/serve-dflash.log | head -5
fi
((SECONDS - start < 540)) && serve_one ngram --speculative-algorithm NGRAM
echo "total $((SECONDS - start)) s"
