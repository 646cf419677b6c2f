#!/usr/bin/env bash
# A/B of two beamserve binaries' routed experts on the GPU machine, in one call (the GPU a call
# lands on moves figures by ~1%, so A and B are only compared within one call):
#   1. the router and the experts alone: ROUNDS rounds of `bench kernels --batches AB_BATCHES
#      --prefill-tokens AB_PREFILL_TOKENS`, A and B alternating; prints each moe router+route row
#      and each moe_experts row (the model's routing and, from T = 32, the skewed one; with
#      AB_PREFILL_TOKENS also at that prefill size) with the hottest expert's rows, eager time,
#      time in a CUDA graph and ratio to the floor;
#   2. whole decode layers: ROUNDS rounds of `bench step --batches AB_STEP_BATCHES --steps 50
#      --prefill-tokens 0`, A and B alternating; prints the decode and MoE layer ratios per batch
#      (issue 8's batch-32 / 128 targets). AB_STEP_BATCHES=none skips it.
# Bits are not compared here: tools/gpu/run_tests.sh checks each binary's numerics.
#
#   tools/gpu/ab_moe.sh A_BIN B_BIN [ROUNDS]      # from the repository root; ROUNDS = 2
#
# AB_BATCHES (default 1,32,64,128), AB_PREFILL_TOKENS (default 0: none; e.g. 8192 for the prefill
# grouped GEMM, which also times bench kernels' prefill attention), AB_STEP_BATCHES (default
# 1,32,128), AB_DEVICE (default cuda) and AB_ARGS (more arguments for both commands, e.g.
# "--config models/tiny-beam" for a quick run). E.g. the 8K prefill experts alone:
#   AB_BATCHES=1 AB_PREFILL_TOKENS=8192 AB_STEP_BATCHES=none tools/gpu/ab_moe.sh A B 3
# Prints everything; nothing is written outside /tmp.
set -u -o pipefail

source "$(dirname "$0")/ab_setup.sh"
ab_setup "tools/gpu/ab_moe.sh A_BIN B_BIN [ROUNDS]" models/beam-1.0-config "$@"
read -r -a extra <<<"${AB_ARGS:-}"
device="${AB_DEVICE:-cuda}"

for ((r = 1; r <= rounds; ++r)); do
  for v in A B; do
    "${bin[$v]}" bench kernels --device "$device" --batches "${AB_BATCHES:-1,32,64,128}" \
      --prefill-tokens "${AB_PREFILL_TOKENS:-0}" "${extra[@]}" --json "$tmp/kernels.json" \
      >"$tmp/kernels.log" 2>&1 ||
      { echo "$v: bench kernels failed"; tail -3 "$tmp/kernels.log"; continue; }
    python3 - "$tmp/kernels.json" "$v$r" <<'PY'
import json, sys
for op in json.load(open(sys.argv[1]))["ops"]:
    if op["op"].startswith("moe"):  # "moe router+route T=..." and "moe_experts T=..."
        ms, ratio = op.get("graph_ms", op["ms"]), op.get("graph_ratio", op["ratio"])
        hot = op.get("hottest_expert_rows")
        print(f"{sys.argv[2]} {op['op']:<42} {'' if hot is None else f'hottest {hot} '}"
              f"eager {op['ms']:.4f} ms, graph {ms:.4f} ms ratio {ratio:.3f}")
PY
  done
done

step_batches="${AB_STEP_BATCHES:-1,32,128}"
[[ "$step_batches" == none ]] && rounds=0
for ((r = 1; r <= rounds; ++r)); do
  for v in A B; do
    "${bin[$v]}" bench step --device "$device" --batches "$step_batches" \
      --steps 50 --prefill-tokens 0 "${extra[@]}" --json "$tmp/step.json" >"$tmp/step.log" 2>&1 ||
      { echo "$v: bench step failed"; tail -3 "$tmp/step.log"; continue; }
    python3 - "$tmp/step.json" "$v$r" <<'PY'
import json, sys
for row in json.load(open(sys.argv[1]))["decode"]:
    print(f"{sys.argv[2]} batch {row['batch']}: layer {row['decode_layer_ms']:.4f} ms "
          f"{row['decode_layer_ratio']:.3f}x, MoE layer {row['moe_layer_ms']:.4f} ms "
          f"{row['moe_layer_ratio']:.3f}x, hottest expert {row['expert_rows_max_per_layer']}")
PY
  done
done
rm -rf "$tmp"
