#!/usr/bin/env bash
# On the CI machine: the CUDA library (sm_90a) of a git revision, optionally with extra CUDA
# flags, as build-libs/NAME.so for tools/gpu_ab.sh's LIBS (carry build-libs, or a folder of the
# libraries to compare, to the GPU machine with the working tree). Its fatbin is compressed
# (-Xfatbin=-compress-all: 4 MB instead of 17; the SASS is the same, cuobjdump reads it), so that
# a dozen libraries fit in a 64 MiB carry; COMPRESS=0 leaves it plain. Builds in a worktree of
# its own under /tmp, kept between calls so that a rebuild only compiles what changed.
#   bash tools/build_variant.sh main main
#   bash tools/build_variant.sh depth3 HEAD -DSOFTALIGN_SOME_MACRO=3
#   bash tools/build_variant.sh wip                 (the working tree as it is, uncommitted)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
name=$1
rev=${2:-}
shift $(( $# < 2 ? $# : 2 ))
mkdir -p "$ROOT/build-libs"
if [ -z "$rev" ]; then
  src=$ROOT  # the working tree
  build=build-variant-$name
else
  rev=$(git rev-parse "$rev")  # here: in the worktree, HEAD would be the worktree's own
  src=/tmp/softalign-variant-$name
  [ -d "$src" ] || git worktree add -q --detach "$src" "$rev"
  git -C "$src" checkout -q --detach "$rev"
  build=build-cuda
fi
compress=$([ "${COMPRESS:-1}" = 1 ] && echo "-Xfatbin=-compress-all")
(cd "$src" && BUILD_DIR=$build TESTS=OFF JOBS=${JOBS:-2} bash tools/gpu_build.sh all \
  "-DCMAKE_CUDA_FLAGS=-Xptxas -v $compress $*" > "$ROOT/build-libs/$name.build.log" 2>&1) || {
  tail -20 "$ROOT/build-libs/$name.build.log"; exit 1; }
cp "$src/$build/libsoftalign.so" "$ROOT/build-libs/$name.so"
echo "build-libs/$name.so from ${rev:-the working tree} $*"
