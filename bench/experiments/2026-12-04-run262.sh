#!/usr/bin/env bash
# Run 262: main 843c756 (integer bounds in the JSON matcher; the session's last code; the smoke's
# named tool call): every GPU suite, including the sampler's token masks
# (AllowedTokenMasksMatchTheCpu), EngineOnCudaKeepsResponseFormats and the server smoke's
# json_schema request.
set -u
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
tar -C build -xJf build/all.tar.xz
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
OUT=$OUT timeout 540 tools/gpu/run_tests.sh > $OUT/tests.log 2>&1; echo "run_tests rc=$?"
grep -E "PASSED|FAILED|passed|failed|^==|response_format|EngineOnCudaKeeps|AllowedToken" $OUT/tests.log | tail -30
