#!/usr/bin/env bash
# tools/gpu/cubin_same.sh on a scratch repository with a tiny kernel: a comment-only change is
# "identical" (exit 0), an arithmetic change "differs" (exit 1), bad arguments and a compile
# error exit 2. Needs nvcc (exit 77, a skip, without it).
set -euo pipefail
script="$(cd "$(dirname "$0")" && pwd)/cubin_same.sh"
nvcc="${NVCC:-/usr/local/cuda/bin/nvcc}"
[[ -x "$nvcc" ]] || { echo "test_cubin_same.sh: no nvcc at $nvcc; skipped"; exit 77; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "test_cubin_same.sh: $1"; exit 1; }
cd "$tmp"
git init -q .
git config user.email t@example.com
git config user.name t
mkdir -p src/k
cat >src/k/scale.cuh <<'CU'
// y = a x
__device__ inline float scale(float a, float x) { return a * x; }
CU
cat >src/k/k.cu <<'CU'
#include "k/scale.cuh"
__global__ void k(float* y, const float* x, float a) { y[threadIdx.x] = scale(a, x[threadIdx.x]); }
CU
git add . && git commit -q -m init
expect() {  # expect RC ARGS...: cubin_same.sh ARGS exits RC
  local want="$1" rc=0
  shift
  "$script" "$@" >"$tmp/out" 2>&1 || rc=$?
  [[ $rc == "$want" ]] || { cat "$tmp/out"; fail "'$*' exited $rc, not $want"; }
}
sed -i 's|// y = a x|// y = a * x, one rounding|' src/k/scale.cuh
expect 0 HEAD src/k/k.cu
grep -q identical "$tmp/out" || fail "no 'identical' line"
sed -i 's|return a \* x;|return a * x + 1.0f;|' src/k/scale.cuh
expect 1 HEAD src/k/k.cu
grep -q differ "$tmp/out" || fail "no 'differ' line"
expect 2 HEAD
expect 2 nosuchrev src/k/k.cu
expect 2 HEAD src/k/missing.cu
sed -i 's|return a \* x + 1.0f;|return a * ;|' src/k/scale.cuh
expect 2 HEAD src/k/k.cu
echo "test_cubin_same.sh: ok"
