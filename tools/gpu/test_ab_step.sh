#!/usr/bin/env bash
# tools/gpu/ab_step.sh on fake beamserve binaries (no GPU needed): each run's line per batch in
# alternating order, the JSON kept under STEP_JSON_DIR, each binary's medians, and the argument
# checks (exit 2).
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# A fake `beamserve bench step ... --json FILE`: layer ms = LAYER + 0.001 x (its call count).
make_fake() {
  cat >"$tmp/$1" <<FAKE
#!/usr/bin/env bash
while [[ \$# -gt 0 ]]; do [[ "\$1" == --json ]] && out="\$2"; shift; done
n=\$(cat "$tmp/$1.count" 2>/dev/null || echo 0); echo \$((n + 1)) >"$tmp/$1.count"
python3 -c "import json; json.dump({'decode': [{'batch': b, 'decode_layer_ms': $2 + 0.001 * \$n + b,
  'decode_layer_ratio': 1.5, 'moe_layer_ms': 0.25} for b in (1, 4)]}, open('\$out', 'w'))"
FAKE
  chmod +x "$tmp/$1"
}
make_fake fast 0.2
make_fake slow 0.3
mkdir "$tmp/json"
STEP_JSON_DIR="$tmp/json" tools/gpu/ab_step.sh 1,4 3 a="$tmp/fast" b="$tmp/slow" >"$tmp/out.txt"
fail() { echo "test_ab_step.sh: $1"; cat "$tmp/out.txt"; exit 1; }
grep -q "^a1 batch 1 layer 1.2000 ms 1.5000x moe 0.2500 ms$" "$tmp/out.txt" || fail "first run line"
grep -q "^b3 batch 4 layer 4.3020 ms 1.5000x moe 0.2500 ms$" "$tmp/out.txt" || fail "last run line"
[[ "$(grep -cE '^[ab][123] batch' "$tmp/out.txt")" == 12 ]] || fail "12 run lines"
[[ "$(grep -E '^[ab][123] batch 1 ' "$tmp/out.txt" | cut -c1-2 | tr '\n' ' ')" == "a1 b1 a2 b2 a3 b3 " ]] ||
  fail "alternating order"
grep -q "^a batch 1 layer 1.2010 ms 1.5000x moe 0.2500 ms$" "$tmp/out.txt" || fail "a's median"
grep -q "^b batch 4 layer 4.3010 ms 1.5000x moe 0.2500 ms$" "$tmp/out.txt" || fail "b's median"
[[ "$(ls "$tmp/json" | tr '\n' ' ')" == "step-a1.json step-a2.json step-a3.json step-b1.json step-b2.json step-b3.json " ]] ||
  fail "kept JSON"
for bad in "1 x a=$tmp/fast" "1 2 a" "1 2 a1=$tmp/fast" "1 2 a=$tmp/missing"; do
  # shellcheck disable=SC2086
  if tools/gpu/ab_step.sh $bad >/dev/null 2>&1; then fail "accepted '$bad'"; else rc=$?; fi
  [[ $rc == 2 ]] || fail "'$bad' exited $rc, not 2"
done
echo "test_ab_step.sh: ok"
