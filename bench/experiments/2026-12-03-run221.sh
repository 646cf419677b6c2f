#!/usr/bin/env bash
# Run 221: A (b1f32bb) against D (A + the three decode patches) directly, three rounds; the static
# SASS diff A/D; then tools/gpu/run_tests.sh on D's bundle (b1f32bb's grouped-GEMM launch's first
# GPU check too: the patches touch only the decode attention).
set -u -o pipefail
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
tar -C build -xJf build/all.tar.xz
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
t0=$SECONDS
k=decode_kernelILi128ELNS1_12DecodeLayoutE2ELb0E
python3 tools/gpu/sass_counts.py build/var/beamserve-main build/gpu-bundle/bin/beamserve --kernel $k --top 20 > "$OUT/sass-a-d.txt" 2>&1
python3 tools/gpu/sass_counts.py build/var/beamserve-main build/var/beamserve-b --kernel $k --top 20 > "$OUT/sass-a-b.txt" 2>&1
cat "$OUT/sass-a-d.txt"
AB_BATCHES=1,4,32,128 AB_CONTEXTS="512 8200 32768" timeout 200 tools/gpu/ab_decode.sh \
  build/var/beamserve-main build/gpu-bundle/bin/beamserve 3 > "$OUT/ab-a-d.txt" 2>&1
echo "ab a-d rc=$? s=$((SECONDS - t0))"
timeout 330 tools/gpu/run_tests.sh > "$OUT/run_tests.txt" 2>&1
echo "run_tests rc=$? s=$((SECONDS - t0))"; tail -15 "$OUT/run_tests.txt"
