#!/usr/bin/env bash
# Packs this machine's (Debian) Python 3.11 standard library sources, *.py only, into a
# reproducible tar.xz (sorted names, fixed mtime and owner) for the GPU call's `carry`:
#   tools/reference/nano/pack_local_stdlib.sh [.nano_data/cpython-3.11.tar.xz]
set -euo pipefail
out=$(realpath -m "${1:-.nano_data/cpython-3.11.tar.xz}")
mkdir -p "$(dirname "$out")"
list=$(mktemp)
(cd /usr/lib && find python3.11 -name '*.py' -type f \
   -not -path '*/__pycache__/*' -not -path '*/site-packages/*' -not -path '*/dist-packages/*' \
   | LC_ALL=C sort >"$list")
tar -C /usr/lib --sort=name --mtime='2000-01-01 00:00:00Z' --owner=0 --group=0 --numeric-owner \
    -cJf "$out" -T "$list"
echo "$(wc -l <"$list") files -> $out ($(du -h "$out" | cut -f1))"
rm -f "$list"
