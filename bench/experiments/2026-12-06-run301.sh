#!/usr/bin/env bash
# Run 301: branch gpu-pending/lora-latency (B = 629fd4b: lora_add issues each phase's loads
# before using them, the same sums in the same order; LoRA slots sleep with the weights) against
# main (A = 08127f5: the previous kernel; build/var/cuda_kernels_bench-a, build/var/beamserve-a).
# 1. CudaLora.* on B (agreement with the CPU within the fp64 bound, plus the slice-less ranks
# case), LoraCuda* and the sleep-mode tests of model_beam_cuda_tests; 2. BM_lora_add B then A;
# 3. `bench step` (beam-slice) decode at batches 1 and 32 and a 2,048-token prefill: B without
# adapters, B and A with 4 slots of rank 16, B with rank 64 (--lora-slots, 08127f5).
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
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|token .* column|Failure|Expected|Which is|actual" $res/lora.log | head -40
echo "bit-equal lines: $(grep -c bit-equal $res/lora.log)"; grep "bit-equal" $res/lora.log | awk '{print $(NF-5)}' | sort | uniq -c | head
timeout 120 $bin/model_beam_cuda_tests --gtest_filter='LoraCuda*:*Sleep*:*Releasable*' \
  --gtest_output=json:$res/model.json > $res/model.log 2>&1
echo "model tests rc=$? $((SECONDS - start)) s"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|Failure|Expected|Which is|sleep freed" $res/model.log | head -30
for side in b a; do
  exe=$bin/cuda_kernels_bench; [[ $side == a ]] && exe=$var/cuda_kernels_bench-a
  timeout 100 $exe --benchmark_filter=lora --benchmark_min_time=0.05 \
    --benchmark_out=$res/lora-$side.json --benchmark_out_format=json > $res/lora-$side.log 2>&1
  echo "bench $side rc=$? $((SECONDS - start)) s"
done
python3 - "$res" <<'PY'
import json, sys
res = sys.argv[1]
def load(s):
    try:
        return {b["name"]: b["real_time"] for b in json.load(open(f"{res}/lora-{s}.json"))["benchmarks"]}
    except Exception as e:
        print("missing", s, e)
        return {}
a, b = load("a"), load("b")
for k in a:
    if k in b:
        print(f"{k:48s} A {a[k]:8.1f} us  B {b[k]:8.1f} us  B/A {b[k] / a[k]:.2f}")
PY
for run in b-base:b:0:16 b-r16:b:4:16 a-r16:a:4:16 b-r64:b:4:64; do
  IFS=: read -r name side slots rank <<< "$run"
  (( SECONDS - start > 470 )) && break
  exe=$bin/beamserve; [[ $side == a ]] && exe=$var/beamserve-a
  timeout 100 $exe bench step --device cuda --batches 1,32 --steps 10 --prefill-tokens 2048 \
    --prefill-reps 2 --lora-slots $slots --lora-rank $rank --json $res/step-$name.json \
    > $res/step-$name.log 2>&1
  echo "step $name rc=$? $((SECONDS - start)) s"
  python3 -c "
import json,sys
d=json.load(open('$res/step-$name.json'))
print('  decode', [(x['batch'], round(x['decode_step_ms'],3)) for x in d['decode']], 'prefill 2048', round(d['prefill']['prefill_ms'],2))
" 2>/dev/null
done
echo "total $((SECONDS - start)) s"
