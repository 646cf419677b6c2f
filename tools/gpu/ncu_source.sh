#!/usr/bin/env bash
# Where a kernel's warps spend their time, instruction by instruction: Nsight Compute's full set
# (warp-stall sampling per SASS instruction) for the first COUNT launches matching KERNEL_REGEX of
# one beamserve command, exported as the source view and summarised by tools/gpu/sass_profile.py.
# On the GPU machine, from the repository root:
#
#   OUT=dir tools/gpu/ncu_source.sh KERNEL_REGEX COUNT BEAMSERVE_ARGS...
#   e.g. OUT=$OUT tools/gpu/ncu_source.sh prefill 1 bench kernels --device cuda --batches 1 --reps 1
#
# Writes $OUT/sass.csv.xz (the source view; summarise it again here with
# `xz -dc sass.csv.xz > sass.csv; tools/gpu/sass_profile.py sass.csv [--launch N] [--range A B]`),
# $OUT/details.txt (every section of each launch) and prints the summary of launch 0. Clocks and
# caches are left alone (--clock-control none). SKIP=n skips the first n matching launches (e.g.
# SKIP=4 with `bench kernels --reps 1`, whose cases each launch 4 times (two warm-ups, one timed,
# one queued): the fp32-P full-causal prefill after the sliding one).
set -u -o pipefail
if [[ $# -lt 3 ]]; then
  echo "usage: OUT=dir tools/gpu/ncu_source.sh KERNEL_REGEX COUNT BEAMSERVE_ARGS..." >&2
  exit 2
fi
regex="$1" count="$2"
shift 2
bin="${BEAMSERVE_GPU_BIN:-build/gpu-bundle/bin}"
if [[ -d "$bin/../lib" ]]; then
  lib="$(cd "$bin/../lib" && pwd)"
  export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
out="${OUT:-ncu-out}"
mkdir -p "$out"
report="$(mktemp -d)/source"
ncu --set full --import-source no --clock-control none -k "regex:$regex" --launch-skip "${SKIP:-0}" \
  --launch-count "$count" \
  -o "$report" "$bin/beamserve" "$@" >"$out/ncu.log" 2>&1 ||
  { echo "ncu failed:"; tail -5 "$out/ncu.log"; exit 1; }
ncu -i "$report.ncu-rep" --page details >"$out/details.txt" 2>&1
ncu -i "$report.ncu-rep" --page source --csv --print-source sass >"$out/sass.csv" 2>"$out/sass.err" ||
  { echo "source export failed:"; tail -5 "$out/sass.err"; exit 1; }
python3 "$(dirname "$0")/sass_profile.py" "$out/sass.csv"
xz -f -T0 "$out/sass.csv"
rm -rf "$(dirname "$report")" "$out/sass.err"
