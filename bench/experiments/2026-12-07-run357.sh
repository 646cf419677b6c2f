#!/usr/bin/env bash
# Run 357 (one GPU, warm after run 356): `beamserve run-batch` on the CUDA engine: the CLI test's
# batch file (tests/cli/run_batch.py) with --device cuda, its lines answered in order.
# Call: the bundle of run 356; carry ["build/all.tar.xz"], timeout 120.
set -u
source tools/gpu/run_prelude.sh
sed -i 's/"--threads", "1"\]/"--threads", "1", "--device", "cuda"]/' tests/cli/run_batch.py
timeout 100 python3 tests/cli/run_batch.py $bin/beamserve > $res/run_batch.log 2>&1
echo "run_batch rc=$? $((SECONDS - start)) s"; tail -5 $res/run_batch.log
