#!/usr/bin/env bash
# Run 303: branch gpu-pending/lora-fused (B = d414f33: one lora_add launch for the modules that
# share x; CUDA ranks up to 512) against main (A = 08127f5's beamserve, build/var/beamserve-a).
# 1. CudaLora.* (new: SeveralOutputsAreEachOutputsOwnCall, rank 512); 2. `bench step --layers 4`
# with 4 adapter slots of rank 16 / 64, A and B alternating, and B without adapters;
# 3. model_beam_cuda_tests whole (LoRA on the model, graphs, sleep) with the time left.
set -u
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
start=$SECONDS
res=$OUT/r; mkdir -p $res
trap 'tar -C $OUT -cJf $OUT/results.tar.xz r && rm -rf $res' EXIT
tar -C build -xJf build/all.tar.xz && cp -a -n build/held/. .
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
bin=build/gpu-bundle/bin var=build/var
timeout 90 $bin/kernels_cuda_tests --gtest_filter='CudaLora*' --gtest_output=json:$res/lora.json > $res/lora.log 2>&1
echo "lora tests rc=$? $((SECONDS - start)) s"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|token .* column|Failure|Expected|Which is|actual" $res/lora.log | head -30
for run in b-base:b:0:16 a-r16:a:4:16 b-r16:b:4:16 a-r16x:a:4:16 b-r16x:b:4:16 a-r64:a:4:64 b-r64:b:4:64; do
  IFS=: read -r name side slots rank <<< "$run"
  exe=$bin/beamserve; [[ $side == a ]] && exe=$var/beamserve-a
  timeout 60 $exe bench step --device cuda --layers 4 --batches 1,32 --steps 10 --prefill-tokens 2048 \
    --prefill-reps 2 --lora-slots $slots --lora-rank $rank --breakdown --breakdown-steps 3 \
    --json $res/step-$name.json > $res/step-$name.log 2>&1
  echo "step $name rc=$? $((SECONDS - start)) s"
  python3 -c "
import json
d=json.load(open('$res/step-$name.json'))
print('  decode', [(x['batch'], round(x['decode_step_ms'],3), round(x['breakdown']['ops'].get('lora',{}).get('ms',0),3)) for x in d['decode']], 'prefill', round(d['prefill']['prefill_ms'],2))" 2>&1 | tail -1
done
left=$((500 - (SECONDS - start)))
timeout $left $bin/model_beam_cuda_tests --gtest_output=json:$res/model.json > $res/model.log 2>&1
echo "model tests rc=$? $((SECONDS - start)) s"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" $res/model.log | head -20
echo "total $((SECONDS - start)) s"
