#!/usr/bin/env bash
# Run 240: the grouped GEMM's long tiles on clusters of four beside clusters of two (B) against
# main's clusters of two (A); B's CUDA suites.
set -u
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
tar -C build -xJf build/all.tar.xz
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
A=build/var/beamserve-a B=build/gpu-bundle/bin/beamserve
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
AB_BATCHES=1,512,2048 AB_PREFILL_TOKENS=8192 AB_STEP_BATCHES=none tools/gpu/ab_moe.sh $A $B 3 2>&1 | grep -v "router"
for r in 1 2; do for v in A B; do
  eval bin=\$$v
  $bin bench step --device cuda --batches 1 --steps 10 --prefill-tokens 8192 --json $OUT/step-$v$r.json >/dev/null 2>&1
  python3 -c "import json,sys;p=json.load(open(sys.argv[1]))['prefill'];print(sys.argv[2],'prefill 8K',round(p['prefill_ms'],2),'ms',round(p['fraction_of_floor'],4))" $OUT/step-$v$r.json $v$r
done; done
