#!/usr/bin/env bash
# tools/gpu/hold_tree.sh in a scratch git repository: a held path leaves the index and the tree
# (nothing untracked-but-not-ignored appears), restore brings back the same bytes and index, and
# the refusals (a second hold, a changed or untracked path, nothing held: exit 1; usage: exit 2).
set -euo pipefail
script="$(cd "$(dirname "$0")" && pwd)/hold_tree.sh"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "test_hold_tree.sh: $1"; exit 1; }
cd "$tmp"
git init -q .
git config user.email t@example.com
git config user.name t
mkdir -p models/big/sub src
head -c 5000 /dev/urandom >models/big/weights.bin
echo config >models/big/sub/config.json
echo code >src/main.cpp
echo build/ >.gitignore
git add . && git commit -q -m init
sum() { find models src -type f -print0 | sort -z | xargs -0 sha256sum; }
before="$(sum)"

"$script" hold models/big >/dev/null
[[ -z "$(git ls-files models/big)" ]] || fail "held path still in the index"
[[ ! -e models/big && -f build/held/models/big/weights.bin ]] || fail "held path not moved"
[[ -z "$(git ls-files -o --exclude-standard)" ]] || fail "held files would be sent as untracked"
[[ "$(git ls-files)" == "$(printf '.gitignore\nsrc/main.cpp')" ]] || fail "other paths touched"
if "$script" hold src >/dev/null 2>&1; then fail "second hold accepted"; else rc=$?; fi
[[ $rc == 1 ]] || fail "second hold exited $rc"

"$script" restore >/dev/null
[[ "$(sum)" == "$before" ]] || fail "restored bytes differ"
[[ -z "$(git status --porcelain)" ]] ||
  fail "index or tree not as before: $(git status --porcelain)"
[[ ! -e build/held ]] || fail "build/held left behind"

echo changed >>src/main.cpp
for bad in "hold src" "hold models/none" "restore"; do
  # shellcheck disable=SC2086
  if "$script" $bad >/dev/null 2>&1; then fail "accepted '$bad'"; else rc=$?; fi
  [[ $rc == 1 ]] || fail "'$bad' exited $rc, not 1"
done
git checkout -q -- src/main.cpp
echo new >untracked.txt
if "$script" hold untracked.txt >/dev/null 2>&1; then fail "held an untracked file"; fi
for bad in "" "hold" "drop"; do
  # shellcheck disable=SC2086
  if "$script" $bad >/dev/null 2>&1; then fail "accepted '$bad'"; else rc=$?; fi
  [[ $rc == 2 ]] || fail "'$bad' exited $rc, not 2"
done
echo "test_hold_tree.sh: ok"
