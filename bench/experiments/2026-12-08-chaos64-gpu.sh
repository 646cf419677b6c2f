#!/usr/bin/env bash
# The server chaos suite (tests/server/chaos.test.mjs) with its servers on the GPU after 4ce652e's
# fix of the hang run 366 found, now with its fourth configuration: 64 clients against a 16 MiB
# KV budget while a control loop swaps other weights in and back. Every server runs with
# --enable-deterministic-inference (finished answers must equal the request's answer alone bit
# for bit while the reference's weights serve); the two configurations needing two GPUs skip.
# Chaos lasts BEAMSERVE_CHAOS_MS per configuration (30 s here, 12 s in CI).
set -uo pipefail
source tools/gpu/run_prelude.sh
nvidia-smi --query-gpu=name --format=csv,noheader | tee $res/gpu.txt
BEAMSERVE_CHAOS_MS=30000 OUT=$res timeout 500 tools/gpu/run_client_tests.sh chaos 2>&1 | tail -12
grep -E '"(sent|complete|aborted|hung-up|left)"|refusals|# (pass|fail|skip)|not ok' $res/client_chaos.log | head -30
echo "$((SECONDS - start)) s: done"
