#!/usr/bin/env bash
# A/B(/C...) of whole decode layers on the GPU machine, in one call: ROUNDS rounds of `beamserve
# bench step --device cuda --batches BATCHES --steps 200 --prefill-tokens 0` for each binary in
# turn (the GPU a call lands on moves figures by several %, so binaries are only compared within
# one call, alternating), then each binary's median per batch. Prints one line a run and batch:
# "<name><round> batch <b> layer <ms> ms <ratio>x moe <ms> ms" (the decode layer, its ratio to its
# floor, the MoE layer), then the medians. Bits are not compared here: tools/gpu/run_tests.sh
# checks each binary's numerics.
#
#   tools/gpu/ab_step.sh BATCHES ROUNDS NAME=BIN [NAME=BIN ...]     # from the repository root
#   tools/gpu/ab_step.sh 1,2,4 3 a=build/var/beamserve-a b=build/gpu-bundle/bin/beamserve
#
# STEP_JSON_DIR=dir keeps each run's JSON as dir/step-<name><round>.json.
set -u -o pipefail
usage="usage: tools/gpu/ab_step.sh BATCHES ROUNDS NAME=BIN [NAME=BIN ...], from the repository root"
[[ $# -ge 3 && "$2" =~ ^[0-9]+$ && -d models ]] || { echo "$usage" >&2; exit 2; }
batches="$1" rounds="$2"
shift 2
names=() bins=()
for arg in "$@"; do
  name="${arg%%=*}" bin="${arg#*=}"
  # (a name ends in a non-digit: the round number follows it)
  [[ "$name" != "$arg" && "$name" =~ ^[A-Za-z0-9_-]*[A-Za-z_-]$ && -x "$bin" ]] ||
    { echo "ab_step.sh: '$arg' is not NAME=EXECUTABLE (NAME of letters, digits, _ or -, not ending in a digit)" >&2; exit 2; }
  names+=("$name") bins+=("$bin")
done
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader 2>/dev/null

for ((r = 1; r <= rounds; ++r)); do
  for i in "${!names[@]}"; do
    tag="${names[$i]}$r" json="$tmp/step-${names[$i]}$r.json"
    "${bins[$i]}" bench step --device cuda --batches "$batches" --steps 200 --prefill-tokens 0 \
      --json "$json" >"$tmp/step.log" 2>&1 ||
      { echo "$tag: bench step failed"; tail -3 "$tmp/step.log"; continue; }
    [[ -n "${STEP_JSON_DIR:-}" ]] && cp "$json" "$STEP_JSON_DIR/"
    python3 - "$json" "$tag" <<'PY'
import json, sys
for d in json.load(open(sys.argv[1]))["decode"]:
    print("%s batch %d layer %.4f ms %.4fx moe %.4f ms" % (
        sys.argv[2], d["batch"], d["decode_layer_ms"], d["decode_layer_ratio"], d["moe_layer_ms"]))
PY
  done
done

# From the runs' JSON (a failed run has none).
echo "medians over $rounds rounds (layer ms / ratio / moe ms):"
python3 - "$tmp" "$rounds" "${names[@]}" <<'PY'
import json, os, statistics, sys
tmp, rounds, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
for name in names:
    runs = {}  # batch -> [(layer ms, ratio, moe ms)]
    for r in range(1, rounds + 1):
        path = os.path.join(tmp, f"step-{name}{r}.json")
        if not os.path.exists(path):
            continue
        for d in json.load(open(path))["decode"]:
            runs.setdefault(d["batch"], []).append(
                (d["decode_layer_ms"], d["decode_layer_ratio"], d["moe_layer_ms"]))
    for batch, rows in sorted(runs.items()):
        med = [statistics.median(row[i] for row in rows) for i in range(3)]
        print("%s batch %d layer %.4f ms %.4fx moe %.4f ms" % (name, batch, *med))
PY
