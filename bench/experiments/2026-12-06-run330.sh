#!/usr/bin/env bash
# Run 330 (one GPU): the live-server protocol suite with the server on the GPU, after
# `serve` started loading through load_rank_weights and weight updates through RankWeights (the
# archive would not fit beside node and its SDKs with beam-nano).
set -u
source tools/gpu/run_prelude.sh
nccl=$(python3 -c "import nvidia.nccl; print(list(nvidia.nccl.__path__)[0] + '/lib')")
export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$nccl"
OUT=$res timeout 500 tools/gpu/run_client_tests.sh protocol
echo "client tests rc=$? $((SECONDS - start)) s"
grep -hE "^# (pass|fail|skip)|^not ok|SKIP" $res/client_*.log | head -12
