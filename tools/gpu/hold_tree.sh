#!/usr/bin/env bash
# Lightens the working tree a `run` call sends to the GPU machine: the device tool copies every
# tracked file (~49 MB, of which models/beam-nano is 35 MB) plus the carry, 64.55 MB at most
# (tools/gpu/pack_ab.sh checks), so a call that needs two bundles' binaries and a test binary
# but no beam-nano can hold that model back for the call:
#
#   tools/gpu/hold_tree.sh hold models/beam-nano     # untracked in the index, moved to build/held/
#   tools/gpu/pack_ab.sh ...                          # now counts the lighter tree
#   ... the run call ...
#   tools/gpu/hold_tree.sh restore                    # moved back, the index as before
#
# hold refuses a path with changes against HEAD (restore takes its index entries from HEAD) and a
# second hold before a restore; commit nothing while holding (the paths' deletions are staged).
# From the repository root.
set -euo pipefail
usage="usage: tools/gpu/hold_tree.sh hold PATH... | restore, from the repository root"
[[ $# -ge 1 && -e .git ]] || { echo "$usage" >&2; exit 2; }
held=build/held
list="$held/PATHS"

case "$1" in
  hold)
    shift
    [[ $# -ge 1 ]] || { echo "$usage" >&2; exit 2; }
    if [[ -e "$list" ]]; then
      echo "hold_tree.sh: already holding $(tr '\n' ' ' <"$list")" >&2
      exit 1
    fi
    for path in "$@"; do
      [[ -e "$path" && -n "$(git ls-files -- "$path")" ]] ||
        { echo "hold_tree.sh: $path is not a tracked path" >&2; exit 1; }
      git diff --quiet HEAD -- "$path" ||
        { echo "hold_tree.sh: $path has changes against HEAD; commit or drop them" >&2; exit 1; }
    done
    mkdir -p "$held"
    for path in "$@"; do
      mkdir -p "$held/$(dirname "$path")"
      git rm -r -q --cached -- "$path"
      mv "$path" "$held/$path"
      echo "$path" >>"$list"
    done
    echo "hold_tree.sh: holding $* (restore with tools/gpu/hold_tree.sh restore)"
    ;;
  restore)
    [[ -e "$list" ]] || { echo "hold_tree.sh: nothing held" >&2; exit 1; }
    while read -r path; do
      if [[ -e "$held/$path" ]]; then  # (else restored by an earlier, interrupted restore)
        [[ ! -e "$path" ]] ||
          { echo "hold_tree.sh: $path exists again; not overwriting it" >&2; exit 1; }
        mkdir -p "$(dirname "$path")"
        mv "$held/$path" "$path"
      fi
      git reset -q -- "$path"
    done <"$list"
    echo "hold_tree.sh: restored $(tr '\n' ' ' <"$list")"
    rm -rf "$held"
    ;;
  *)
    echo "$usage" >&2
    exit 2
    ;;
esac
