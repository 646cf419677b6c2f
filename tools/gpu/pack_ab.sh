#!/usr/bin/env bash
# Packs one GPU call's binaries into build/all.tar.xz, the single archive a `run` call carries:
# a bundle from tools/gpu/build.sh (as gpu-bundle/, optionally only some of its binaries), extra
# binaries of other builds (as var/NAME, e.g. the A side of an A/B), and optionally node with the
# SDKs of the live-server tests (as node/, for tools/gpu/run_client_tests.sh) and paths held back
# from the tree (as held/PATH, compressed here instead of sent as files). The device tool sends
# the working tree (tracked and untracked-not-ignored files) plus the carry, "64 MiB" in all, by
# its own count: summing the files' sizes, totals of 64.55 MB went and 66.33 MB were refused
# (2026-12-04), so this prints the archive's size and that sum and exits 1 above 64.55 MB,
# before a call is spent.
#
#   tools/gpu/pack_ab.sh BUNDLE_TAR [--keep BIN,BIN...] [--node] [--held PATH,PATH...] [NAME=PATH ...]
#
#   tools/gpu/pack_ab.sh ../iso/build/gpu-bundle.tar.xz --keep beamserve,kernels_cuda_tests \
#     beamserve-a=/tmp/beamserve-a
#
# On the GPU machine: `tar -C build -xJf build/all.tar.xz`, then build/gpu-bundle/bin/... and
# build/var/NAME, with LD_LIBRARY_PATH=build/gpu-bundle/lib. Each extra beamserve adds ~2.4 MB
# (xz shares the kernel images), the whole bundle ~13 MB; the tree is ~49 MB (2026-12-04).
#
# --node adds this machine's node (stripped, ~22 MB packed) and the packages the live-server
# suites import (openai, @anthropic-ai/sdk and their dependencies from tests/node/node_modules,
# without type declarations, ~1 MB). --held PATH adds build/held/PATH, a path that
# tools/gpu/hold_tree.sh holds back from the tree (beam-nano: 36.6 MB as files, ~26 MB packed);
# the device side copies build/held/. back into the tree.
set -euo pipefail
usage="usage: tools/gpu/pack_ab.sh BUNDLE_TAR [--keep BIN,BIN...] [--node] [--held PATH,PATH...]"
usage+=" [NAME=PATH ...], from the repository root"
[[ $# -ge 1 && -f "$1" && -e .git ]] || { echo "$usage" >&2; exit 2; }
bundle_tar="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
shift
keep="" node=0 held=""
while [[ $# -ge 1 && "$1" == --* ]]; do
  case "$1" in
    --keep | --held)
      [[ $# -ge 2 ]] || { echo "$usage" >&2; exit 2; }
      if [[ "$1" == --keep ]]; then keep="$2"; else held="$2"; fi
      shift 2
      ;;
    --node) node=1; shift ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
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

parts=(gpu-bundle var)
if ((node)); then
  modules=tests/node/node_modules
  [[ -d "$modules" ]] || { echo "pack_ab.sh: no $modules (cd tests/node && npm install)" >&2; exit 1; }
  node_bin="$(command -v node)" || { echo "pack_ab.sh: no node on this machine" >&2; exit 1; }
  mkdir -p "$stage/node/bin" "$stage/node/node_modules"
  cp "$node_bin" "$stage/node/bin/node"
  strip "$stage/node/bin/node"
  # The suites' SDKs and the closure of their (non-peer) dependencies.
  packages=$(cd "$modules" && "$node_bin" -e '
    const fs = require("fs");
    const queue = ["openai", "@anthropic-ai/sdk"], seen = new Set();
    while (queue.length) {
      const name = queue.pop();
      if (seen.has(name) || !fs.existsSync(name + "/package.json")) continue;
      seen.add(name);
      queue.push(...Object.keys(JSON.parse(fs.readFileSync(name + "/package.json")).dependencies ?? {}));
    }
    console.log([...seen].join("\n"));')
  # shellcheck disable=SC2086  # package names have no spaces
  tar -C "$modules" -cf - --exclude='*.d.ts' --exclude='*.d.mts' --exclude='*.d.cts' \
    --exclude='*.map' --exclude='src' $packages | tar -C "$stage/node/node_modules" -xf -
  parts+=(node)
fi
for path in ${held//,/ }; do
  [[ -e "build/held/$path" ]] ||
    { echo "pack_ab.sh: build/held/$path is not held (tools/gpu/hold_tree.sh hold $path)" >&2; exit 1; }
  mkdir -p "$stage/held/$(dirname "$path")"
  cp -a "build/held/$path" "$stage/held/$path"
done
[[ -n "$held" ]] && parts+=(held)

mkdir -p build
XZ_OPT="-9 -T2" tar -C "$stage" -cJf "$out" "${parts[@]}"
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
