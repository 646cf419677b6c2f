#!/usr/bin/env bash
# Run 303b: run 303 cut to what fits ~2 minutes of device time (B = gpu-pending/lora-fused's
# bundle, A = main's beamserve as build/var/beamserve-a): CudaLora.* on B, then `bench step
# --layers 4 --lora-slots 4 --lora-rank 16` B A B A with the breakdown, results in results.tar.xz.
set -u
start=$SECONDS
res=$OUT/r; mkdir -p $res
tar -C build -xJf build/all.tar.xz
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
bin=build/gpu-bundle/bin var=build/var
timeout 40 $bin/kernels_cuda_tests --gtest_filter='CudaLora*' > $res/lora.log 2>&1
echo "lora tests rc=$? $((SECONDS - start)) s"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|Failure" $res/lora.log | head -12
for run in b:4 a:4 b:4 a:4 b:0; do
  IFS=: read -r side slots <<< "$run"
  exe=$bin/beamserve; [[ $side == a ]] && exe=$var/beamserve-a
  timeout 30 $exe bench step --device cuda --layers 4 --batches 1,32 --steps 10 --prefill-tokens 2048 \
    --prefill-reps 2 --lora-slots $slots --lora-rank 16 --breakdown --breakdown-steps 3 \
    --json $res/step-$side$slots-$SECONDS.json > /dev/null 2>&1
  echo "step $side slots $slots rc=$? $((SECONDS - start)) s"
done
python3 - "$res" <<'PY'
import glob, json, sys
for f in sorted(glob.glob(sys.argv[1] + "/step-*.json"), key=lambda p: int(p.rsplit("-", 1)[1][:-5])):
    d = json.load(open(f))
    print(f.rsplit("/", 1)[1], [(x["batch"], round(x["decode_step_ms"], 3),
          round(x["breakdown"]["ops"].get("lora", {}).get("ms", 0), 3)) for x in d["decode"]],
          "prefill", round(d["prefill"]["prefill_ms"], 2))
PY
tar -C $OUT -cJf $OUT/results.tar.xz r && rm -rf $res
echo "total $((SECONDS - start)) s"
