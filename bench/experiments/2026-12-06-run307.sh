#!/usr/bin/env bash
# Run 307: expert LoRA's expand as kernels of its own (B = branch gpu-pending/expert-lora-expand:
# the shrink a warp per (slot, j), the gate_up deltas written by an expand launch and read once in
# the epilogue, the down deltas added after the GEMM, grouped-row order and TMA down on the grouped
# path; A = main 475f333 as build/var/*-a). 1. CudaMoeExperts.* and CudaLora*, the model's LoRA
# tests; 2. compute-sanitizer memcheck on the expert-LoRA test; 3. cuda_kernels_bench's expert ops
# A B A B; 4. ncu's per-kernel times of B's T 32 and T 2048 r 16 calls; 5. `bench step --layers 4`
# with 2 slots of rank 16 and --lora-experts, A B A B, and B without adapters.
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
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|Failure" $res/kernels.log | head -30
timeout 150 $bin/model_beam_cuda_tests --gtest_filter='LoraCuda*:*LoraCudaMixed*:*EngineWithGraphs*' \
  --gtest_output=json:$res/model.json > $res/model.log 2>&1
echo "model tests rc=$? $((SECONDS - start)) s"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|Failure|rel error" $res/model.log | head -20
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $bin/kernels_cuda_tests \
  --gtest_filter='CudaMoeExperts.Lora*' > $res/memcheck.log 2>&1
echo "memcheck rc=$? $((SECONDS - start)) s"; grep -E "ERROR SUMMARY|PASSED|FAILED" $res/memcheck.log | head -5
f='BM_moe_experts_lora|BM_moe_experts/T:(1|32|128|2048)/path:0'
for side in a b a2 b2; do
  exe=$bin/cuda_kernels_bench; [[ $side == a* ]] && exe=$var/cuda_kernels_bench-a
  timeout 120 $exe --benchmark_filter="$f" --benchmark_out=$res/kb-$side.json \
    --benchmark_out_format=json > $res/kb-$side.log 2>&1
  echo "kernels bench $side rc=$? $((SECONDS - start)) s"
  grep -E "^BM_" $res/kb-$side.log | awk '{print "  "$1, $2, $3}'
done
for c in 'T:32/r:16' 'T:2048/r:16' 'T:1/r:16'; do
  n=${c//[:\/]/_}
  timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum --csv --launch-skip 60 \
    --launch-count 40 $bin/cuda_kernels_bench --benchmark_filter="BM_moe_experts_lora/$c/" \
    > $res/ncu-$n.csv 2> $res/ncu-$n.err
  echo "ncu $c rc=$? $((SECONDS - start)) s"
  python3 tools/gpu/ncu_summary.py $res/ncu-$n.csv
done
for run in a-r16x:a:2:--lora-experts b-r16x:b:2:--lora-experts a2-r16x:a:2:--lora-experts b2-r16x:b:2:--lora-experts b-base:b:0:; do
  IFS=: read -r name side slots extra <<< "$run"
  exe=$bin/beamserve; [[ $side == a* ]] && exe=$var/beamserve-a
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
