#!/usr/bin/env bash
# Weights straight from the checkpoint's mapping to the GPU (ExpertCopy::kDeferred) against the
# host-fused load (A: the bundle of c3f0e58): a synthetic Beam-width checkpoint (4 routed layers
# of 64 experts, ~24 GB), `bench offline` wall time and peak RSS, page cache warm, alternating;
# then --load-format dummy (the same config filled on the GPU) and the CUDA suites that cover
# uploads and the served model on the GPU.
set -uo pipefail
source tools/gpu/run_prelude.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee $res/gpu.txt
free -g | tee $res/free.txt
ck=/tmp/synth
python3 tools/gpu/synthetic_checkpoint.py $ck --layers 4 --experts 64 | tee $res/checkpoint.txt
echo "$((SECONDS - start)) s: written"
du -sh $ck
load() {  # NAME BIN [FLAGS]
  /usr/bin/time -v "$2" bench offline --model $ck --device cuda --requests 1 --prompt-len 16 \
    --output-len 2 --kv-budget-mb 2048 --max-step-tokens 2048 --no-cuda-graphs "${@:3}" \
    > $res/$1.json 2> $res/$1.err
  echo "$1 rc=$? $(grep -E 'Elapsed|Maximum resident' $res/$1.err | tr -s ' ' | tr '\n' ' ') $(grep -o 'weights on GPU.*' $res/$1.err)"
}
for round in 1 2; do
  load a$round $var/beamserve-a
  load b$round $bin/beamserve
done | tee $res/load.txt
load dummy $bin/beamserve --load-format dummy | tee -a $res/load.txt
echo "$((SECONDS - start)) s: loads"
if sync && echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; then
  load a_cold $var/beamserve-a | tee -a $res/load.txt
  sync; echo 3 > /proc/sys/vm/drop_caches
  load b_cold $bin/beamserve | tee -a $res/load.txt
else
  echo "no drop_caches (not root?)" | tee -a $res/load.txt
fi
rm -rf $ck
echo "$((SECONDS - start)) s: cold loads"
timeout 300 $bin/model_beam_cuda_tests --gtest_brief=1 > $res/model_beam_cuda.txt 2>&1
echo "model_beam_cuda rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $res/model_beam_cuda.txt | tr '\n' ' ')"
grep -E "FAILED|DeviceWeightsCuda" $res/model_beam_cuda.txt | head -20
echo "$((SECONDS - start)) s: model_beam_cuda"
timeout 200 python3 tools/gpu/server_smoke.py $bin cuda > $res/server_smoke.txt 2>&1
echo "server_smoke rc=$?"; tail -5 $res/server_smoke.txt
mkdir -p /tmp/nano-config && cp models/beam-nano/{config.json,tokenizer*.json,generation_config.json} /tmp/nano-config/
$bin/beamserve generate --model /tmp/nano-config --load-format dummy --device cuda --tokens 5,6,7 \
  --max-tokens 6 > $res/dummy_generate.txt 2>&1; echo "dummy generate rc=$?"; tail -2 $res/dummy_generate.txt
echo "$((SECONDS - start)) s: done"
