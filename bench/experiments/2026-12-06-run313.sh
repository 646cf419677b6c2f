#!/usr/bin/env bash
# Run 313: the engine's warm-up step on the LoRA slots (branch gpu-pending/warmup-lora): the new
# CudaModelTest.WarmUpWithLoraSlotsReservesTheirScratchAndGivesThemBack and the model's LoRA / sleep
# tests (engines with LoRA slots warm up through the new path; the memory sweeps left out for
# the device budget).
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
  --gtest_filter='*WarmUp*:LoraCuda*:*LoraCudaMixed*:*Sleep*' \
  --gtest_output=json:$res/model.json > $res/model.log 2>&1
echo "model tests rc=$? $((SECONDS - start)) s"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|Failure|warm-up step|^\[ RUN" $res/model.log | head -30
echo "total $((SECONDS - start)) s"
