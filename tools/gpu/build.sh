#!/usr/bin/env bash
# Builds the CUDA binaries on the development machine and packs them for the GPU machine, which
# has the CUDA runtime but none of Debian's -dev libraries (docs/gpu.md):
#
#   tools/gpu/build.sh     # -> build/gpu-bundle.tar.xz (carry it; about 15 MB of the 64 MiB limit)
#
# bin/: beamserve, the CUDA gtest binaries and cuda_kernels_bench (stripped). The tests read models/
# and tests/ data relative to the directory they run in (the repo root; tools/gpu/run_tests.sh).
# lib/: the non-system shared libraries they need. On the GPU machine tools/gpu/run_tests.sh
# unpacks the archive and sets LD_LIBRARY_PATH to its lib/.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build/gpu
bundle=build/gpu-bundle
targets=(beamserve kernels_cuda_tests model_beam_cuda_tests runtime_sampling_cuda_tests cuda_kernels_bench)

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBEAMSERVE_CUDA=ON \
  -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DBEAMSERVE_TEST_DATA_ROOT=. >/dev/null
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"

rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib"
for t in "${targets[@]}"; do
  exe=$(find "$build" -type f -name "$t" -perm -u+x | head -1)
  [[ -n "$exe" ]] || { echo "build.sh: $t was not built" >&2; exit 1; }
  strip -o "$bundle/bin/$t" "$exe"
done
# Shared libraries that are neither glibc/libstdc++ (newer on the GPU machine) nor CUDA's (present).
for exe in "$bundle"/bin/*; do
  ldd "$exe" | awk '/=> \//{print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libstdc++.so*|libgcc_s.so*|ld-linux*) ;;
    libcuda*|libcublas*|libcudart*|libnvrtc*|libnccl*) ;;
    *) cp -L "$lib" "$bundle/lib/" ;;
  esac
done
# -9: a 64 MiB dictionary spans all binaries, which share the same kernel images (half the size).
XZ_OPT=-9 tar -C build -cJf "$bundle.tar.xz" gpu-bundle
du -sh "$bundle" "$bundle.tar.xz"
