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
done | tee "$tmp/lines.txt"

echo "medians over $rounds rounds (layer ms / ratio / moe ms):"
python3 - "$tmp/lines.txt" "${names[@]}" <<'PY'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r"(\S+?)(\d+) batch (\d+) layer ([\d.]+) ms ([\d.]+)x moe ([\d.]+) ms", line)
    if m:
        rows.setdefault((m[1], int(m[3])), []).append((float(m[4]), float(m[5]), float(m[6])))
for name in sys.argv[2:]:
    for (n, batch), runs in sorted(rows.items(), key=lambda kv: kv[0][1]):
        if n != name:
            continue
        med = [statistics.median(r[i] for r in runs) for i in range(3)]
        print("%s batch %d layer %.4f ms %.4fx moe %.4f ms" % (name, batch, *med))
PY
