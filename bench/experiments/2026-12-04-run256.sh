#!/usr/bin/env bash
# Run 256: main 53b93cb: ncu kernel times of an 8,192-token prefill step (as run 249 at 2,048).
set -u
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
tar -C build -xJf build/all.tar.xz
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 250 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --print-units base \
  build/gpu-bundle/bin/beamserve bench step --device cuda --batches 1 --context 16 --warmup 0 --steps 1 \
  --prefill-tokens 8192 --prefill-reps 1 > $OUT/ncu-prefill8192.csv 2> /tmp/ncu.err
echo "rc=$?"; tail -2 /tmp/ncu.err; xz -9 $OUT/ncu-prefill8192.csv; ls -la $OUT
