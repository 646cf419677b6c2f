#!/usr/bin/env bash
# Run 246: bench step's prefill of one 2,048-token chunk, A = e53ac42 against B = f8876f5 (the
# grouped GEMM's two-band tiles), alternating; then every op of B at T = 2048 (bench kernels).
set -u
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
tar -C build -xJf build/all.tar.xz
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
A=build/var/beamserve-a B=build/gpu-bundle/bin/beamserve
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
for r in 1 2 3; do for v in A B; do
  eval bin=\$$v
  timeout 120 $bin bench step --device cuda --batches 1 --steps 10 --prefill-tokens 2048 \
    --json $OUT/step-$v$r.json >/dev/null 2>&1
  python3 -c "import json,sys;p=json.load(open(sys.argv[1]))['prefill'];print(sys.argv[2],'prefill',p['tokens'],'tokens',round(p['prefill_ms'],3),'ms',round(p['fraction_of_floor'],4))" $OUT/step-$v$r.json $v$r
done; done
timeout 200 $B bench kernels --device cuda --batches 2048 --prefill-tokens 0 --json $OUT/kernels-b2048.json > $OUT/kernels-b2048.txt 2>&1
python3 - $OUT/kernels-b2048.json <<'PY'
import json, sys
for op in json.load(open(sys.argv[1]))["ops"]:
    ms, ratio = op.get("graph_ms", op["ms"]), op.get("graph_ratio", op["ratio"])
    print(f"{op['op']:<52} eager {op['ms']:.4f} ms graph {ms:.4f} ms ratio {ratio:.3f}")
PY
