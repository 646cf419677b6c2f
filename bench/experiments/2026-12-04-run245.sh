#!/usr/bin/env bash
# Run 245: bench step's 8K prefill in chunks of 2048 and 4096 tokens, main before f8876f5 (A)
# against f8876f5 (B, the grouped GEMM's two-band tiles), alternating.
set -u
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
tar -C build -xJf build/all.tar.xz
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
A=build/var/beamserve-a B=build/gpu-bundle/bin/beamserve
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
for r in 1 2; do for chunk in 2048 4096; do for v in A B; do
  eval bin=\$$v
  timeout 120 $bin bench step --device cuda --batches 1 --steps 10 --prefill-tokens 8192 \
    --prefill-chunk $chunk --json $OUT/step-$v$r-c$chunk.json >/dev/null 2>&1
  python3 -c "import json,sys;p=json.load(open(sys.argv[1]))['prefill'];print(sys.argv[2],'prefill 8K in chunks of',sys.argv[3],round(p['prefill_ms'],2),'ms',round(p['fraction_of_floor'],4))" $OUT/step-$v$r-c$chunk.json $v$r $chunk
done; done; done
