#!/usr/bin/env bash
# Run 257: main (prefill host enqueue time): why an 8,192-token prefill step takes 85 ms when its
# kernels sum to 72.9 ms under ncu (run 256): the host's enqueue time and the SM clock during it.
set -u
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
tar -C build -xJf build/all.tar.xz
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader -lms 20 > $OUT/clocks.csv &
smi=$!
for T in 2048 8192; do
  timeout 150 build/gpu-bundle/bin/beamserve bench step --device cuda --batches 1 --steps 1 --context 16 \
    --prefill-tokens $T --prefill-reps 20 --json $OUT/prefill-$T.json > /dev/null 2>&1
  python3 -c "import json;p=json.load(open('$OUT/prefill-$T.json'))['prefill'];print($T,'prefill_ms',round(p['prefill_ms'],2),'host_enqueue_ms',round(p['host_enqueue_ms'],2))"
done
kill $smi
sort -t, -k2 -n $OUT/clocks.csv | awk -F, '{print $2}' | uniq -c | sort -k2 -n | tail -12
