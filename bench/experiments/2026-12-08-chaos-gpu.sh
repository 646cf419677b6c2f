#!/usr/bin/env bash
# The server chaos suite (tests/server/chaos.test.mjs) with its servers on the GPU: clients
# hanging up while two control loops pause, abort, update the weights, flush and (where the
# configuration has them) sleep and swap adapters; every server with
# --enable-deterministic-inference, so that each finished answer must equal the request's answer
# alone bit for bit. One GPU: the n-gram / host tier / preemption configuration runs, the two
# needing two GPUs (data-parallel replicas, tensor-parallel ranks) skip.
set -uo pipefail
source tools/gpu/run_prelude.sh
nvidia-smi --query-gpu=name --format=csv,noheader | tee $res/gpu.txt
OUT=$res timeout 280 tools/gpu/run_client_tests.sh chaos 2>&1 | tail -12
grep -E '"(sent|complete|aborted|hung-up|left)"|refusals|# (pass|fail|skip)' $res/client_chaos.log | head -20
echo "$((SECONDS - start)) s: done"
