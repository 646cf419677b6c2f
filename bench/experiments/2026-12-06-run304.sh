#!/usr/bin/env bash
# Runs 304-305: per-request LoRA on the routed experts on CUDA (B = the expert-LoRA branch: a
# shrink launch before each expert GEMM, the expand in the GEMM epilogues; run 305: those epilogues
# in kernel instantiations of their own; A = main 1936479's beamserve as build/var/beamserve-a). 1. CudaMoeExperts.* (every path, LoRA among them) and CudaLora*;
# 2. model_beam_cuda_tests' LoraCuda* (the model with expert adapters against the CPU, decode
# graphs); 3. `bench step --layers 4` without adapters A B A B (the epilogues' cost when LoRA is
# off), then B with 2 slots of rank 16 without and with --lora-experts.
set -u
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
start=$SECONDS
res=$OUT/r; mkdir -p $res
trap 'tar -C $OUT -cJf $OUT/results.tar.xz r && rm -rf $res' EXIT
tar -C build -xJf build/all.tar.xz && cp -a --update=none build/held/. .
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
bin=build/gpu-bundle/bin var=build/var
timeout 200 $bin/kernels_cuda_tests --gtest_filter='CudaMoeExperts.*:CudaLora*' \
  --gtest_output=json:$res/kernels.json > $res/kernels.log 2>&1
echo "kernel tests rc=$? $((SECONDS - start)) s"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|Failure|LoRA S=" $res/kernels.log | head -30
grep -E "^moe_experts" $res/kernels.log | tail -8
timeout 150 $bin/model_beam_cuda_tests --gtest_filter='LoraCuda*:*LoraCudaMixed*' \
  --gtest_output=json:$res/model.json > $res/model.log 2>&1
echo "model tests rc=$? $((SECONDS - start)) s"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|Failure|rel error" $res/model.log | head -20
for run in a-base:a:0: b-base:b:0: a-base2:a:0: b-base2:b:0: b-r16:b:2: b-r16-experts:b:2:--lora-experts; do
  IFS=: read -r name side slots extra <<< "$run"
  exe=$bin/beamserve; [[ $side == a ]] && exe=$var/beamserve-a
  timeout 60 $exe bench step --device cuda --layers 4 --batches 1,32,128 --steps 10 \
    --prefill-tokens 2048 --prefill-reps 2 --lora-slots $slots --lora-rank 16 $extra --breakdown \
    --breakdown-steps 3 --json $res/step-$name.json > $res/step-$name.log 2>&1
  echo "step $name rc=$? $((SECONDS - start)) s"
  python3 -c "
import json
d=json.load(open('$res/step-$name.json'))
print('  decode', [(x['batch'], round(x['decode_step_ms'],3), round(x['breakdown']['ops'].get('experts',{}).get('ms',0),3)) for x in d['decode']], 'prefill', round(d['prefill']['prefill_ms'],2))" 2>&1 | tail -1
  tail -2 $res/step-$name.log | grep -i error
done
echo "total $((SECONDS - start)) s"
