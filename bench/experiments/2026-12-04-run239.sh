#!/usr/bin/env bash
# Run 239: can clusters of two run beside clusters of four; ab_decode.sh's step part on the GPU.
set -u
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
tar -C build -xJf build/all.tar.xz
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
build/var/mixed; build/var/mixed
AB_CONTEXTS=8200 AB_BATCHES=1 tools/gpu/ab_decode.sh build/var/beamserve-a build/var/beamserve-a 1
