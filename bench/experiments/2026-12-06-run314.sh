#!/usr/bin/env bash
# Run 314 (ran 2026-12-06, passed; docs/benchmarks.md): run 313's new test rewritten (a
# LoRA step after the warm-up grows no scratch; run 313's version compared free memory, which the
# stream-ordered pool hides): CudaModelTest.WarmUp* only.
set -u
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
start=$SECONDS
res=$OUT/r; mkdir -p $res
trap 'tar -C $OUT -cJf $OUT/results.tar.xz r && rm -rf $res' EXIT
tar -C build -xJf build/all.tar.xz && cp -a --update=none build/held/. .
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
bin=build/gpu-bundle/bin
timeout 150 $bin/model_beam_cuda_tests \
  --gtest_filter='*WarmUp*' \
  --gtest_output=json:$res/model.json > $res/model.log 2>&1
echo "model tests rc=$? $((SECONDS - start)) s"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|Failure|warm-up step|^\[ RUN" $res/model.log | head -30
echo "total $((SECONDS - start)) s"
