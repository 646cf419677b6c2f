#!/usr/bin/env bash
# Run 236: full-attention decode rows on the two-warp tensor-core CTAs (three an SM, 2-stage rings,
# six warps an SM) instead of the four-warp ones below 64 rows: since 02d6bed's TMA tiles the
# four-warp kernel at batch 1 is bound by one warp a scheduler (run 228). One binary F = main +
# the env switch BEAM_EXP_TWO_WARP_FULL (2026-12-04-two-warp-full-rows-run236.patch; not for
# landing): A = F, B = F with the switch (var/beamserve-2w). F's AttentionCuda tests with the
# switch, then `AB_BATCHES=1,4,16,32 AB_CONTEXTS="8200 32768 131072" tools/gpu/ab_decode.sh` two
# rounds.
# all.tar.xz: F's bundle (gpu-bundle/: beamserve, kernels_cuda_tests), var/beamserve-2w.
set -u -o pipefail
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
tar -C build -xJf build/all.tar.xz
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
t0=$SECONDS
BEAM_EXP_TWO_WARP_FULL=1 timeout 150 build/gpu-bundle/bin/kernels_cuda_tests \
  --gtest_filter='AttentionCuda*' > "$OUT/attention-tests-2w.txt" 2>&1
echo "2w attention tests rc=$? s=$((SECONDS - t0))"
grep -E "^\[  (PASSED|FAILED) |FAILED" "$OUT/attention-tests-2w.txt" | head -8
AB_BATCHES=1,4,16,32 AB_CONTEXTS="8200 32768 131072" timeout 300 tools/gpu/ab_decode.sh \
  build/gpu-bundle/bin/beamserve build/var/beamserve-2w 2 > "$OUT/ab-2w.txt" 2>&1
echo "ab rc=$? s=$((SECONDS - t0))"
grep -vE " sliding " "$OUT/ab-2w.txt"
