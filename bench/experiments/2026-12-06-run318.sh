#!/usr/bin/env bash
# Run 318: run 317's benches that its time limit cut (the same bundle: B = gpu-pending/lora-tiles,
# A = main 3e6bd46): cuda_kernels_bench's T 2048 expert LoRA A B, BM_lora_add's interleaved
# T 2048 case on A, and `bench step --layers 4` A B A B.
set -u
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
start=$SECONDS
res=$OUT/r; mkdir -p $res
trap 'tar -C $OUT -cJf $OUT/results.tar.xz r && rm -rf $res' EXIT
tar -C build -xJf build/all.tar.xz && cp -a --update=none build/held/. .
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
bin=build/gpu-bundle/bin var=build/var
for side in a b; do
  exe=$bin/cuda_kernels_bench; [[ $side == a* ]] && exe=$var/cuda_kernels_bench-a
  f='BM_moe_experts_lora/T:2048/r:16/runs:1/|BM_moe_experts_lora/T:2048/r:64/runs:1/'
  [[ $side == a ]] && f="$f|BM_lora_add/T:2048/r:16/mixed:1/"
  timeout 100 $exe --benchmark_filter="$f" --benchmark_out=$res/kb-$side.json \
    --benchmark_out_format=json > $res/kb-$side.log 2>&1
  echo "kernels bench $side rc=$? $((SECONDS - start)) s"
  grep -E "^BM_" $res/kb-$side.log | awk '{print "  "$1, $2, $3}'
done
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
print('  decode', [(x['batch'], round(x['decode_step_ms'],3)) for x in d['decode']], 'prefill', round(d['prefill']['prefill_ms'],2))" 2>&1 | tail -1
done
echo "total $((SECONDS - start)) s"
