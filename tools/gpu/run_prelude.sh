# Sourced at the top of a bench/experiments run script on the GPU machine (from the root of the
# tree the device tool sent): unpacks build/all.tar.xz (tools/gpu/pack_ab.sh) and the paths it
# held back, and sets
#   start  SECONDS at the start (for "N s" progress lines)
#   res    $OUT/r, packed into $OUT/results.tar.xz when the script exits, however it exits
#   bin    the bundle's binaries (LD_LIBRARY_PATH points at its libraries); var: the extra ones
# /work/iso links to the tree, so binaries built there find their CMake data root.
[[ -e /work/iso ]] || { mkdir -p /work && ln -s "$PWD" /work/iso; }
start=$SECONDS
res=$OUT/r
mkdir -p "$res"
trap 'tar -C $OUT -cJf $OUT/results.tar.xz r && rm -rf $res' EXIT
tar -C build -xJf build/all.tar.xz
[[ -d build/held ]] && cp -a --update=none build/held/. .
export LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib"
bin=build/gpu-bundle/bin
var=build/var
