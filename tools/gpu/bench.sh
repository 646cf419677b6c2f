#!/usr/bin/env bash
# GPU benchmarks of issue 8 on the GPU machine, from prebuilt binaries (tools/gpu/build.sh) and
# the repo root: `beamserve bench kernels|step|serve --device cuda` on beam-slice and the
# Hugging Face peer (tools/gpu/hf_peer.py), then a summary table: ours vs floor vs peer per MoE
# layer at batch 1 and 32.
#
#   tools/gpu/bench.sh [kernels] [step] [serve] [peer]     # default: all four, in that order
#
# Writes $OUT/{kernels,step,serve,hf_peer}.json and .log ($OUT defaults to ./bench-out). The
# commit recorded is $BEAMSERVE_COMMIT, else `git rev-parse HEAD` when .git exists, else unknown.
# Extra flags for one benchmark: BENCH_KERNELS_ARGS, BENCH_STEP_ARGS, BENCH_SERVE_ARGS.
set -u -o pipefail

bin_dir="${BEAMSERVE_GPU_BIN:-build/gpu-bundle/bin}"
if [[ ! -d "$bin_dir" && "$bin_dir" == build/gpu-bundle/bin && -f build/gpu-bundle.tar.xz ]]; then
  tar -C build -xJf build/gpu-bundle.tar.xz
fi
if [[ ! -x "$bin_dir/beamserve" || ! -d models/beam-1.0-config ]]; then
  echo "bench.sh: run from the repository root with $bin_dir/beamserve built (tools/gpu/build.sh)" >&2
  exit 2
fi
[[ -d "$bin_dir/../lib" ]] && export LD_LIBRARY_PATH="$(cd "$bin_dir/../lib" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
out="${OUT:-bench-out}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
if [[ -z "${BEAMSERVE_COMMIT:-}" ]]; then
  BEAMSERVE_COMMIT="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
fi
export BEAMSERVE_COMMIT
what=("$@")
[[ ${#what[@]} -eq 0 ]] && what=(kernels step serve peer)
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader 2>/dev/null | tee "$out/gpu.txt"

status=0
run_bench() {  # run_bench NAME EXTRA_ARGS
  echo "== bench $1 (log: $out/$1.log)"
  # shellcheck disable=SC2086
  "$bin_dir/beamserve" bench "$1" --device cuda --json "$out/$1.json" $2 >"$out/$1.log" 2>&1
  local rc=$?
  grep -v '^ \|^{\|^}' "$out/$1.log" | tail -40
  [[ $rc -eq 0 ]] || { echo "bench $1 failed (exit $rc)"; status=1; }
}

for w in "${what[@]}"; do
  case "$w" in
    kernels) run_bench kernels "${BENCH_KERNELS_ARGS:-}" ;;
    step) run_bench step "${BENCH_STEP_ARGS:-}" ;;
    serve) run_bench serve "${BENCH_SERVE_ARGS:-}" ;;
    peer)
      echo "== hf_peer (log: $out/hf_peer.log)"
      OUT="$out" python3 tools/gpu/hf_peer.py >"$out/hf_peer.log" 2>&1 || { echo "hf_peer failed"; status=1; }
      tail -5 "$out/hf_peer.log"
      ;;
    *) echo "bench.sh: unknown benchmark '$w' (kernels, step, serve, peer)" >&2; exit 2 ;;
  esac
done

python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
def load(name):
    p = os.path.join(out, name)
    return json.load(open(p)) if os.path.exists(p) else None
step, peer = load("step.json"), load("hf_peer.json")
if step:
    print(f"\nbench step  {step['date']}  commit {step['commit']}  {step['device']}")
    print(f"{'batch':>5} {'step ms':>9} {'layer ms':>9} {'floor':>8} {'ratio':>6} {'moe ms':>8} {'floor':>8} {'ratio':>6}"
          f" {'experts':>7} {'52L ms/tok':>10} {'floor':>8}")
    for d in step["decode"]:
        print(f"{d['batch']:>5} {d['decode_step_ms']:9.3f} {d['decode_layer_ms']:9.4f} {d['decode_layer_floor_ms']:8.4f}"
              f" {d['decode_layer_ratio']:6.2f} {d.get('moe_layer_ms', 0):8.4f} {d.get('moe_layer_floor_ms', 0):8.4f}"
              f" {d.get('moe_layer_ratio', 0):6.2f} {d['experts_touched']:7.1f} {d['extrapolated_52_layer_ms_per_token']:10.3f}"
              f" {d['extrapolated_52_layer_floor_ms_per_token']:8.3f}")
    for d in step["decode"]:
        print(f"batch {d['batch']}: host enqueue {d.get('host_enqueue_ms', 0):.4f} ms per step = "
              f"{100 * d.get('host_overhead_fraction', 0):.1f}% CPU overhead (cuda graphs {'on' if d.get('cuda_graphs') else 'off'})")
    p = step.get("prefill")
    if p:
        print(f"prefill {p['tokens']} tokens: {p['prefill_ms']:.2f} ms, {p['achieved_tflops']:.1f} TFLOP/s, "
              f"floor {p['floor_ms']:.2f} ms ({100 * p['fraction_of_floor']:.1f}% of floor)")
if step and peer:
    print("\nper MoE layer: ours vs floor vs Hugging Face peer (our decode tokens/s / theirs)")
    for b in (1, 32):
        d = next((x for x in step["decode"] if x["batch"] == b), None)
        theirs = peer.get(f"per_layer_B{b}")
        if d is None or theirs is None or "moe_layer_ms" not in d:
            print(f"  batch {b}: missing (step or peer did not measure it)")
            continue
        ours = d["moe_layer_ms"]
        print(f"  batch {b:>2}: ours {ours:.4f} ms (floor {d['moe_layer_floor_ms']:.4f}, {ours / d['moe_layer_floor_ms']:.2f}x)"
              f"  peer {theirs:.4f} ms (its floor {peer.get(f'floor_B{b}', 0):.4f})  speed-up {theirs / ours:.2f}x")
PY
exit $status
