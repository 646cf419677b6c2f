#!/usr/bin/env bash
# Runs the CUDA test suite on the GPU machine from prebuilt binaries: every CUDA gtest binary
# present (kernels_cuda_tests, model_beam_cuda_tests) and the golden CLI check
# (`beamserve forward --device cuda` against models/tiny-beam/golden, with fp32 and with bf16
# attention probabilities), and the HTTP server on the GPU
# (tools/gpu/server_smoke.py). Run from the repo root:
#
#   tools/gpu/run_tests.sh [BIN_DIR]        # BIN_DIR: $BEAMSERVE_GPU_BIN, else build/gpu-bundle/bin
#
# With $OUT set, each gtest binary writes $OUT/<name>.json (--gtest_output) and the golden check
# its log to $OUT/golden_cli.log. Prints "N passed, M failed" and exits 1 on any failure (2 when
# nothing could be run). Each gtest binary is one check; one with skipped tests (they skip without a
# usable GPU) counts as failed, except suites named NoGpu*, which skip when a GPU is present.
set -u -o pipefail

bin_dir="${1:-${BEAMSERVE_GPU_BIN:-build/gpu-bundle/bin}}"
# tools/gpu/build.sh carries the bundle as an archive.
if [[ ! -d "$bin_dir" && "$bin_dir" == build/gpu-bundle/bin && -f build/gpu-bundle.tar.xz ]]; then
  tar -C build -xJf build/gpu-bundle.tar.xz
fi
if [[ ! -d models/tiny-beam/golden ]]; then
  echo "run_tests.sh: run from the repository root (models/tiny-beam/golden not found)" >&2
  exit 2
fi
if [[ ! -d "$bin_dir" ]]; then
  echo "run_tests.sh: no binary folder '$bin_dir' (argument or BEAMSERVE_GPU_BIN)" >&2
  exit 2
fi
# The bundle's shared libraries (tools/gpu/build.sh) come first.
[[ -d "$bin_dir/../lib" ]] && export LD_LIBRARY_PATH="$(cd "$bin_dir/../lib" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
out_dir="${OUT:-}"
[[ -n "$out_dir" ]] && mkdir -p "$out_dir"
json_dir="${out_dir:-$(mktemp -d)}"

passed=0
failed=0
failures=()

record() {  # record NAME STATUS
  if [[ "$2" -eq 0 ]]; then
    passed=$((passed + 1))
    echo "== $1: ok"
  else
    failed=$((failed + 1))
    failures+=("$1")
    echo "== $1: FAILED (exit $2)"
  fi
}

skipped_tests() {  # skipped_tests FILE.json: prints skipped tests other than NoGpu* suites; true if any
  python3 - "$1" <<'PY'
import json, sys
skipped = [f'{s["name"]}.{t["name"]}' for s in json.load(open(sys.argv[1]))["testsuites"]
           for t in s["testsuite"] if t.get("result") == "SKIPPED" and not s["name"].startswith("NoGpu")]
print("skipped: " + " ".join(skipped)) if skipped else None
sys.exit(0 if skipped else 1)
PY
}

ran_any=0
for name in kernels_cuda_tests model_beam_cuda_tests runtime_sampling_cuda_tests; do
  exe="$bin_dir/$name"
  if [[ ! -x "$exe" ]]; then
    echo "== $name: not in $bin_dir, skipped"
    continue
  fi
  ran_any=1
  echo "== $name"
  "$exe" "--gtest_output=json:$json_dir/$name.json"
  status=$?
  # GPU tests skip only without a usable GPU, which on the GPU machine is a failure (suites named
  # NoGpu* are the exception: they check the behaviour without a GPU and skip when there is one).
  if [[ "$status" -eq 0 ]] && skipped_tests "$json_dir/$name.json"; then
    echo "$name: tests skipped on the GPU machine (no usable GPU, or binaries built without CUDA)"
    status=3
  fi
  record "$name" "$status"
done

if [[ -x "$bin_dir/beamserve" ]]; then
  ran_any=1
  echo "== golden_cli (beamserve forward --device cuda)"
  log="${out_dir:+$out_dir/golden_cli.log}"
  python3 tools/reference/compare_logits.py --golden-dir models/tiny-beam/golden \
    --engine "$bin_dir/beamserve" --engine-args="--device cuda" 2>&1 | tee ${log:+"$log"}
  record golden_cli $?
  # The same goldens with P rounded to bf16 in the prefill kernel (--attention-probs bf16): still
  # within each golden's tolerance. Its log follows in the same file.
  echo "== golden_cli_bf16_probs (beamserve forward --device cuda --attention-probs bf16)"
  python3 tools/reference/compare_logits.py --golden-dir models/tiny-beam/golden \
    --engine "$bin_dir/beamserve" --engine-args="--device cuda --attention-probs bf16" 2>&1 |
    tee ${log:+-a "$log"}
  record golden_cli_bf16_probs $?
else
  echo "== golden_cli: no beamserve in $bin_dir, skipped"
fi

if [[ -x "$bin_dir/beamserve" ]]; then
  echo "== server_smoke (beamserve serve --device cuda, raw HTTP)"
  python3 tools/gpu/server_smoke.py "$bin_dir" cuda 2>&1 | tee ${out_dir:+"$out_dir/server_smoke.log"}
  record server_smoke $?
fi

if [[ "$ran_any" -eq 0 ]]; then
  echo "run_tests.sh: nothing to run in $bin_dir" >&2
  exit 2
fi
[[ "$failed" -gt 0 ]] && echo "failed: ${failures[*]}"
echo "$passed passed, $failed failed"
[[ "$failed" -eq 0 ]]
