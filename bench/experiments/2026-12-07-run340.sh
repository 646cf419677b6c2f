#!/usr/bin/env bash
# Run 340 (one GPU): run 338 again after its fixes (test tolerances, the benchmarks' fixed
# iterations) with decode graphs that include the residual copies (capture in decode graphs).
# The CUDA ops against the CPU ones (kernels_cuda_tests), the drafter against the reference's
# goldens and an engine on the GPU against plain decoding (model_beam_cuda_tests DFlash2Cuda*), the
# ops' timings at Beam's drafter shapes (cuda_kernels_bench dflash2), then beam-nano served on the
# GPU without drafts, with DFlash2 drafts (models/beam-nano-dflash2) and with n-gram drafts:
# tools/bench/speculative_text.py, 16 windows (rows 5900:5916), batch 1, greedy, 128 tokens.
# Call: tools/gpu/hold_tree.sh hold models/beam-nano; tools/gpu/pack_ab.sh build/gpu-bundle.tar.xz
#   --keep beamserve,kernels_cuda_tests,model_beam_cuda_tests,cuda_kernels_bench --held
#   models/beam-nano,models/beam-nano-dflash2,.nano_data/prompts_5900.npy (rows 5900:5916 of
#   .nano_data/dflash2_prompts.npy copied into build/held/), run with carry ["build/all.tar.xz"],
#   timeout 420.
set -u
source tools/gpu/run_prelude.sh
nvidia-smi -L
timeout 120 $bin/kernels_cuda_tests --gtest_filter='*DFlash2*:*Softcap*:*AddRounded*' \
  > $res/kernels.log 2>&1
echo "kernels rc=$? $((SECONDS - start)) s"; grep -E "^\[  (PASSED|FAILED) |Failure" $res/kernels.log | head -20
timeout 180 $bin/model_beam_cuda_tests --gtest_filter='DFlash2Cuda*:BeamCuda.Captured*:DecodeGraph*' \
  > $res/model.log 2>&1
echo "model rc=$? $((SECONDS - start)) s"; grep -E "^\[  (PASSED|FAILED) |Failure|OK \]" $res/model.log | head -20
timeout 120 $bin/cuda_kernels_bench --benchmark_filter=dflash2 --benchmark_format=json \
  > $res/kbench.json 2> $res/kbench.log
echo "bench rc=$? $((SECONDS - start)) s"
python3 -c "
import json; d=json.load(open('$res/kbench.json'))
for b in d['benchmarks']: print('  ', b['name'], round(b['real_time'], 2), b['time_unit'], {k: round(v, 3) for k, v in b.items() if k.endswith('_per_s') or k in ('GBps', 'roofline')})" 2>&1 | tail -30
serve_one() {
  local mode=$1; shift
  $bin/beamserve serve --model models/beam-nano --device cuda --port 8391 \
    --served-model-name nano "$@" > $res/serve-$mode.log 2>&1 &
  local pid=$!
  for _ in $(seq 120); do
    curl -sf http://127.0.0.1:8391/health > /dev/null && break
    sleep 0.5
  done
  timeout 120 python3 tools/bench/speculative_text.py --url http://127.0.0.1:8391 --model nano \
    --prompts .nano_data/prompts_5900.npy --rows 0:16 > $res/text-$mode.json 2>&1
  echo "$mode rc=$? $((SECONDS - start)) s: $(cat $res/text-$mode.json | tail -3)"
  kill $pid; wait $pid
}
serve_one none
serve_one dflash --speculative-algorithm DFLASH --speculative-draft-model-path models/beam-nano-dflash2
serve_one ngram --speculative-algorithm NGRAM
grep -h "DFlash2\|error" $res/serve-dflash.log | head -5
echo "total $((SECONDS - start)) s"
