#!/usr/bin/env bash
# Packs one GPU call's binaries into build/all.tar.xz, the single archive a `run` call carries:
# a bundle from tools/gpu/build.sh (as gpu-bundle/, optionally only some of its binaries) and
# extra binaries of other builds (as var/NAME, e.g. the A side of an A/B). The device tool sends
# the working tree (tracked and untracked-not-ignored files) plus the carry, "64 MiB" in all, by
# its own count: summing the files' sizes, totals of 64.55 MB went and 66.33 MB were refused
# (2026-12-04), so this prints the archive's size and that sum and exits 1 above 64.55 MB,
# before a call is spent.
#
#   tools/gpu/pack_ab.sh BUNDLE_TAR [--keep BIN,BIN...] [NAME=PATH ...]
#
#   tools/gpu/pack_ab.sh ../iso/build/gpu-bundle.tar.xz --keep beamserve,kernels_cuda_tests \
#     beamserve-a=/tmp/beamserve-a
#
# On the GPU machine: `tar -C build -xJf build/all.tar.xz`, then build/gpu-bundle/bin/... and
# build/var/NAME, with LD_LIBRARY_PATH=build/gpu-bundle/lib. Each extra beamserve adds ~2.4 MB
# (xz shares the kernel images), the whole bundle ~13 MB; the tree is ~49 MB (2026-12-04).
set -euo pipefail
usage="usage: tools/gpu/pack_ab.sh BUNDLE_TAR [--keep BIN,BIN...] [NAME=PATH ...], from the repository root"
[[ $# -ge 1 && -f "$1" && -e .git ]] || { echo "$usage" >&2; exit 2; }
bundle_tar="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
shift
keep=""
if [[ "${1:-}" == --keep ]]; then
  [[ $# -ge 2 ]] || { echo "$usage" >&2; exit 2; }
  keep="$2"
  shift 2
fi
limit=64550000  # bytes by the sum below; the largest total measured to go
out=build/all.tar.xz
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT

tar -C "$stage" -xJf "$bundle_tar"
[[ -d "$stage/gpu-bundle/bin" ]] || { echo "pack_ab.sh: $1 holds no gpu-bundle/bin" >&2; exit 1; }
if [[ -n "$keep" ]]; then
  for exe in "$stage"/gpu-bundle/bin/*; do
    [[ ",$keep," == *",$(basename "$exe"),"* ]] || rm "$exe"
  done
  for name in ${keep//,/ }; do
    [[ -x "$stage/gpu-bundle/bin/$name" ]] || { echo "pack_ab.sh: no $name in the bundle" >&2; exit 1; }
  done
fi
mkdir -p "$stage/var"
for extra in "$@"; do
  name="${extra%%=*}" path="${extra#*=}"
  [[ "$name" != "$extra" && -n "$name" && "$name" != */* && -x "$path" ]] ||
    { echo "pack_ab.sh: '$extra' is not NAME=EXECUTABLE" >&2; exit 1; }
  cp "$path" "$stage/var/$name"
done

mkdir -p build
XZ_OPT=-9 tar -C "$stage" -cJf "$out" gpu-bundle var
archive=$(stat -c %s "$out")
tree=$({ git ls-files -z; git ls-files -z -o --exclude-standard; } | xargs -0 -r stat -c %s -- |
  awk '{s += $1} END {print s + 0}')
total=$((archive + tree))
awk -v out="$out" -v a="$archive" -v t="$tree" -v l="$limit" 'BEGIN {
  printf "%s: %.2f MB; with the working tree (%.2f MB) %.2f MB (calls of up to %.2f MB went)\n",
    out, a / 1e6, t / 1e6, (a + t) / 1e6, l / 1e6 }'
if ((total > limit)); then
  echo "pack_ab.sh: over the limit by $(((total - limit) / 1024)) KiB: keep fewer binaries, or" \
    "hold back a model the call does not need (tools/gpu/hold_tree.sh)" >&2
  exit 1
fi
