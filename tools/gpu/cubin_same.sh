#!/usr/bin/env bash
# Whether a source change leaves a CUDA file's machine code unchanged: compiles FILE.cu as of REV
# and as in the working tree to sm_90a cubins (the CUDA build's flags, without -lineinfo, both from
# the same scratch path, since the path changes a few header bytes) and compares them byte for
# byte. A pure clean-up of kernel code (renames, restructured constexpr branches, shared helpers)
# that passes needs no device time; anything else does. No GPU needed; nvcc from /usr/local/cuda.
#
#   tools/gpu/cubin_same.sh REV src/kernels/cuda/FILE.cu   # from the repository root
#
# Exit 0 and "identical" when the cubins match, 1 and "differ" when not, 2 on bad arguments or a
# failed compile. NVCC overrides the compiler.
set -euo pipefail
usage="usage: tools/gpu/cubin_same.sh REV FILE.cu, from the repository root"
[[ $# -eq 2 && -e .git && "$2" == *.cu && -f "$2" ]] || { echo "$usage" >&2; exit 2; }
rev="$1" file="$2"
git rev-parse -q --verify "$rev^{commit}" >/dev/null ||
  { echo "cubin_same.sh: no commit $rev" >&2; exit 2; }
nvcc="${NVCC:-/usr/local/cuda/bin/nvcc}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
flags=(-DBEAMSERVE_CUDA=1 -O3 -DNDEBUG -arch=sm_90a --expt-relaxed-constexpr -std=c++20
  -I"$tmp/tree/src")

# Compiles the tree staged at $tmp/tree into $1.
compile() {
  if ! "$nvcc" "${flags[@]}" --cubin -o "$1" "$tmp/tree/$file" >"$tmp/log" 2>&1; then
    echo "cubin_same.sh: nvcc failed:" >&2
    tail -20 "$tmp/log" >&2
    exit 2
  fi
}
mkdir "$tmp/tree"
git archive "$rev" src | tar -x -C "$tmp/tree"
[[ -f "$tmp/tree/$file" ]] || { echo "cubin_same.sh: $file is not in $rev" >&2; exit 2; }
compile "$tmp/before.cubin"
rm -rf "$tmp/tree" && mkdir "$tmp/tree" && cp -r src "$tmp/tree/"
compile "$tmp/after.cubin"
if cmp -s "$tmp/before.cubin" "$tmp/after.cubin"; then
  echo "cubin_same.sh: $file: identical to $rev"
else
  bytes=$( (cmp -l "$tmp/before.cubin" "$tmp/after.cubin" 2>/dev/null || true) | wc -l)
  echo "cubin_same.sh: $file: differ from $rev ($bytes bytes, or sizes differ)"
  exit 1
fi
