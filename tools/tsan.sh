#!/usr/bin/env bash
# ThreadSanitizer over the engine's threads and the server's: builds build/cpu-tsan (beamserve and
# runtime_engine_tests with -fsanitize=thread; ~20 min on 2 cores, so not in CI), runs the engine
# tests that drive threads (data parallelism, the stress, pause / sleep / weight updates) and the
# server chaos suite against the TSan binary, and prints every race report's summary. Exit 1 when
# TSan reported anything. Reports: build/cpu-tsan/reports/.
set -uo pipefail
cd "$(dirname "$0")/.."
build=build/cpu-tsan
cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS=-fsanitize=thread -fno-omit-frame-pointer" "-DCMAKE_C_FLAGS=-fsanitize=thread" \
  -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread >/dev/null || exit 2
cmake --build $build -j "$(nproc)" --target beamserve runtime_engine_tests || exit 2
reports=$build/reports
rm -rf $reports && mkdir -p $reports
export TSAN_OPTIONS="halt_on_error=0 history_size=4 log_path=$PWD/$reports/tsan"
$build/tests/runtime_engine_tests --gtest_brief=1 \
  --gtest_filter='DataParallelEngine.*:WeightUpdateTest.*:EngineTest.*:*Pause*:*Sleep*' \
  > $reports/engine_tests.txt 2>&1
echo "engine tests: rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $reports/engine_tests.txt | tr '\n' ' ')"
# A TSan report makes the server exit 66: the suite then fails on the exit code alone.
BEAMSERVE_BIN=$build/src/cli/beamserve node --test tests/server/chaos.test.mjs \
  > $reports/chaos.txt 2>&1
echo "server chaos: rc=$? $(grep -E '^# (pass|fail)' $reports/chaos.txt | tr '\n' ' ')"
if ls $reports/tsan.* >/dev/null 2>&1; then
  grep -h "^SUMMARY: ThreadSanitizer" $reports/tsan.* | sort | uniq -c
  exit 1
fi
echo "no ThreadSanitizer reports"
