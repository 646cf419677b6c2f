#!/usr/bin/env bash
# Run 356 (one GPU): the live-server suites against the CUDA engine after this session's server
# work (/pooling, /score, /rerank, return_token_ids, continuous usage, beam search, the tool-call
# delimiter mask): protocol, openai_sdk and anthropic_sdk with BEAMSERVE_DEVICE=cuda.
# Call: pack_ab.sh build/gpu-bundle.tar.xz --keep beamserve --node; carry ["build/all.tar.xz"],
#   timeout 420.
set -u
source tools/gpu/run_prelude.sh
OUT=$res timeout 360 tools/gpu/run_client_tests.sh protocol openai_sdk anthropic_sdk
echo "client rc=$? $((SECONDS - start)) s"
grep -h -B2 -A14 "^✖" $res/client_*.log | head -80
echo "total $((SECONDS - start)) s"
