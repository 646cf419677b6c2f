#!/usr/bin/env bash
# Per-kernel device times inside `beamserve bench step` decode steps, from Nsight Compute (the
# GPU machine's Firecracker runtime reads counters; clocks and caches left alone), plus a full
# ncu report of chosen kernels. Kernels run serialized under ncu, so each time is that kernel
# alone with the L2 as the previous kernel left it.
#
#   OUT=dir tools/gpu/ncu_step.sh BATCHES [KERNEL_REGEX...]
#
# Writes $OUT/seq-bB.txt (every kernel launch of the run at batch B in order: us, name; the decode
# graph's replay is the last step) and, per regex, $OUT/full-<regex>-bB.txt (ncu --set full of the
# first matching launch). The raw CSV is removed (the GPU machine returns few files).
set -u -o pipefail
bin="${BEAMSERVE_GPU_BIN:-build/gpu-bundle/bin}"
[[ -d "$bin/../lib" ]] && export LD_LIBRARY_PATH="$(cd "$bin/../lib" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
out="${OUT:-ncu-out}"; mkdir -p "$out"
batches="$1"; shift
ncu_common=(--clock-control none --cache-control none --target-processes all)
step_args=(bench step --device cuda --warmup 1 --steps 1 --prefill-tokens 0)
IFS=, read -r -a list <<<"$batches"
for b in "${list[@]}"; do
  ncu "${ncu_common[@]}" --metrics gpu__time_duration.sum --csv --print-units base \
    "$bin/beamserve" "${step_args[@]}" --batches "$b" >"$out/times-b$b.csv" 2>"$out/times-b$b.err"
  python3 - "$out/times-b$b.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; ki = hdr.index("Kernel Name"); vi = hdr.index("Metric Value")
tot = collections.OrderedDict(); cnt = collections.Counter()
for r in rows[1:]:
    name = r[ki].replace("<unnamed>", "").replace("void ", "").split("(")[0].split("<")[0][-60:]
    tot[name] = tot.get(name, 0.0) + float(r[vi].replace(",", "")) / 1e3; cnt[name] += 1
with open(sys.argv[1].replace("times-", "seq-").replace(".csv", ".txt"), "w") as f:
    for r in rows[1:]:
        f.write(f"{float(r[vi].replace(',', '')) / 1e3:9.2f} {r[ki][:110]}\n")
print(sys.argv[1], "kernels:", len(rows) - 1, "total us:", round(sum(tot.values()), 1))
for n, t in sorted(tot.items(), key=lambda kv: -kv[1]):
    print(f"  {t:10.1f} us  {cnt[n]:5d} x  {t / cnt[n]:8.2f} us  {n}")
PY
  rm -f "$out/times-b$b.csv" "$out/times-b$b.err"
  for k in "$@"; do
    ncu "${ncu_common[@]}" --set full -k "regex:$k" -s 0 -c 1 \
      "$bin/beamserve" "${step_args[@]}" --batches "$b" >"$out/full-$k-b$b.txt" 2>&1
    grep -E "Duration|Memory Throughput|DRAM Throughput|Compute \(SM\)|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Size|Grid Size|Warp Cycles Per Issued|Issue Slots Busy|L2 Hit|Waves Per SM" "$out/full-$k-b$b.txt" | head -20
  done
done
