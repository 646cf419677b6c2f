#!/usr/bin/env bash
# Run 254: main a370d8d (qk_norm_position two heads a warp at head_dim 128): every GPU suite.
set -u
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
tar -C build -xJf build/all.tar.xz
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
OUT=$OUT timeout 420 tools/gpu/run_tests.sh > $OUT/tests.log 2>&1; echo "run_tests rc=$?"
grep -E "PASSED|FAILED|passed|failed|^==" $OUT/tests.log | tail -22
timeout 120 build/gpu-bundle/bin/beamserve bench step --device cuda --json $OUT/step.json 2>&1 | grep -E "^decode batch|prefill" | head -8
