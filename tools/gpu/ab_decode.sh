#!/usr/bin/env bash
# A/B of two beamserve binaries' decode attention on the GPU machine, in one call (the GPU a call
# lands on moves figures by several %, so A and B are only compared within one call):
#   1. the decode attention alone: ROUNDS rounds of `bench kernels --context C --batches AB_BATCHES
#      --prefill-tokens 0` for each context C, A and B alternating; prints the fixed plan's time in
#      a CUDA graph and its ratio to the KV bytes' HBM floor, per op;
#   2. whole decode layers at batch 1 (tools/gpu/ab_step.sh): ROUNDS rounds of `bench step
#      --batches 1 --steps 200`, A and B alternating; prints the layer's time and ratio to its floor
#      (issue 8's batch-1 target) a run, then the medians.
# Bits are not compared here: tools/gpu/run_tests.sh checks each binary's numerics.
#
#   tools/gpu/ab_decode.sh A_BIN B_BIN [ROUNDS]      # from the repository root; ROUNDS = 2
#
# Contexts: AB_CONTEXTS (default "512 8192"); batches: AB_BATCHES (default 1,32,128). Prints
# everything; nothing is written outside /tmp. Rows start at slot 0, so a 512-key context gives
# 16-tile rows; a sliding row of a longer context (e.g. 8200) spans 17 tiles, as most real sliding
# rows do (the window [p - 511, p] is tile-aligned only when p % 32 = 31).
set -u -o pipefail

source "$(dirname "$0")/ab_setup.sh"
ab_setup "tools/gpu/ab_decode.sh A_BIN B_BIN [ROUNDS]" models/beam-1.0-config "$@"

for ((r = 1; r <= rounds; ++r)); do
  for ctx in ${AB_CONTEXTS:-512 8192}; do
    for v in A B; do
      "${bin[$v]}" bench kernels --device cuda --context "$ctx" \
        --batches "${AB_BATCHES:-1,32,128}" --prefill-tokens 0 >"$tmp/kernels.log" 2>&1 ||
        { echo "$v: bench kernels failed"; tail -3 "$tmp/kernels.log"; }
      # "attention decode <kind> B=<b> ctx=<c> fixed ... in graph <ms> ms ratio <ratio>"
      grep "^attention decode .* fixed " "$tmp/kernels.log" |
        awk -v tag="$v$r" '{printf "%s %-8s %-6s %-10s graph %s ms ratio %s\n", tag, $3, $4, $5, $(NF-3), $NF}'
    done
  done
done

tools/gpu/ab_step.sh 1 "$rounds" A="${bin[A]}" B="${bin[B]}"
rm -rf "$tmp"
