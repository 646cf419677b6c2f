#!/usr/bin/env bash
# Run 319: e58543e (the tile kernels only for rows in runs of shared factors) against run 318's
# decode slowdown: CudaMoeExperts.* and CudaLora*, the model's LoRA / warm-up tests, B's
# BM_moe_experts_lora at decode sizes, `bench step --layers 4` A B A B (A = main 3e6bd46).
set -u
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
start=$SECONDS
res=$OUT/r; mkdir -p $res
trap 'tar -C $OUT -cJf $OUT/results.tar.xz r && rm -rf $res' EXIT
tar -C build -xJf build/all.tar.xz && cp -a --update=none build/held/. .
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
bin=build/gpu-bundle/bin var=build/var
timeout 100 $bin/kernels_cuda_tests --gtest_filter='CudaMoeExperts.*:CudaLora*' \
  --gtest_output=json:$res/kernels.json > $res/kernels.log 2>&1
echo "kernel tests rc=$? $((SECONDS - start)) s"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|Failure" $res/kernels.log | head -10
timeout 60 $bin/model_beam_cuda_tests --gtest_filter='LoraCuda*:*LoraCudaMixed*:*WarmUp*' \
  --gtest_output=json:$res/model.json > $res/model.log 2>&1
echo "model tests rc=$? $((SECONDS - start)) s"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|Failure" $res/model.log | head -10
timeout 60 $bin/cuda_kernels_bench --benchmark_filter='BM_moe_experts_lora/T:(1|32|128)/' \
  --benchmark_out=$res/kb-b.json --benchmark_out_format=json > $res/kb-b.log 2>&1
echo "kernels bench b rc=$? $((SECONDS - start)) s"
grep -E "^BM_" $res/kb-b.log | awk '{print "  "$1, $2, $3}'
for run in a-r16x:a b-r16x:b a2-r16x:a b2-r16x:b; do
  IFS=: read -r name side <<< "$run"
  exe=$bin/beamserve; [[ $side == a* ]] && exe=$var/beamserve-a
  timeout 60 $exe bench step --device cuda --layers 4 --batches 1,32,128 --steps 10 \
    --prefill-tokens 2048 --prefill-reps 2 --lora-slots 2 --lora-rank 16 --lora-experts \
    --json $res/step-$name.json > $res/step-$name.log 2>&1
  echo "step $name rc=$? $((SECONDS - start)) s"
  python3 -c "
import json
d=json.load(open('$res/step-$name.json'))
print('  decode', [(x['batch'], round(x['decode_step_ms'],3), round(x['decode_layer_ms'],3)) for x in d['decode']], 'prefill', round(d['prefill']['prefill_ms'],2))" 2>&1 | tail -1
done
echo "total $((SECONDS - start)) s"
