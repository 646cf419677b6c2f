#!/usr/bin/env bash
# Runs the live-server suites of tests/server (the official openai and @anthropic-ai/sdk clients,
# the raw-HTTP protocol checks, the 512-client load test, beam-nano's and the README's) with
# every server they start on the GPU (BEAMSERVE_DEVICE, default cuda), on the GPU machine, which
# has no node: it takes node and the SDKs from the call's archive (tools/gpu/pack_ab.sh --node)
# and the paths held back from the tree from its held/ (pack_ab.sh --held). From the repository
# root, after `tar -C build -xJf build/all.tar.xz`:
#
#   tools/gpu/run_client_tests.sh [SUITE...]   # default: every suite whose model is in the tree
#
# SUITE is a tests/server/SUITE.test.mjs name (openai_sdk, anthropic_sdk, protocol, load, chaos,
# nano, readme). With $OUT set, each suite's output goes to $OUT/client_SUITE.log. Prints "N passed, M
# failed" and exits 1 on any failure (2 when nothing could be run).
set -u -o pipefail

[[ -d tests/server ]] || { echo "run_client_tests.sh: run from the repository root" >&2; exit 2; }
[[ -x build/node/bin/node ]] ||
  { echo "run_client_tests.sh: no build/node (pack the call with pack_ab.sh --node)" >&2; exit 2; }
binary=build/gpu-bundle/bin/beamserve
[[ -x "$binary" ]] || { echo "run_client_tests.sh: no $binary" >&2; exit 2; }

# Held paths back into the tree, node and its packages where the suites look for them.
[[ -d build/held ]] && cp -a -n build/held/. .
[[ -e tests/node/node_modules ]] || ln -sfn ../../build/node/node_modules tests/node/node_modules
export PATH="$PWD/build/node/bin:$PATH"
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export BEAMSERVE_BIN="$PWD/$binary" BEAMSERVE_DEVICE="${BEAMSERVE_DEVICE:-cuda}"

suites=("$@")
if [[ ${#suites[@]} -eq 0 ]]; then
  [[ -f models/tiny-beam/config.json ]] && suites+=(openai_sdk anthropic_sdk protocol load chaos)
  [[ -f models/beam-nano/config.json ]] && suites+=(nano readme)
  [[ ${#suites[@]} -gt 0 ]] || { echo "run_client_tests.sh: no tiny-beam or beam-nano" >&2; exit 2; }
fi
out_dir="${OUT:-}"
[[ -n "$out_dir" ]] && mkdir -p "$out_dir"

passed=0
failed=0
failures=()
for suite in "${suites[@]}"; do
  file="tests/server/$suite.test.mjs"
  [[ -f "$file" ]] || { echo "run_client_tests.sh: no $file" >&2; exit 2; }
  log="${out_dir:+$out_dir/client_$suite.log}"
  log="${log:-/dev/null}"
  start=$SECONDS
  node --test --test-reporter=spec "$file" 2>&1 | tee "$log" | grep -E '^(ℹ|✖)'
  status=${PIPESTATUS[0]}  # node's (the summary's grep may match nothing)
  if [[ $status -eq 0 ]]; then
    passed=$((passed + 1))
    echo "== client $suite: ok ($((SECONDS - start)) s)"
  else
    failed=$((failed + 1))
    failures+=("$suite")
    echo "== client $suite: FAILED (exit $status, $((SECONDS - start)) s)"
  fi
done
echo "$passed passed, $failed failed${failures[*]:+: ${failures[*]}}"
[[ $failed -eq 0 ]]
