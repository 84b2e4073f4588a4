#!/usr/bin/env bash
# The CUDA build of every GPU script (gpu_check.sh, gpu_quick.sh, gpu_profile.sh): build-cuda/
# for Hopper (sm_90a), -Xptxas -v (every kernel's registers and spills in the build's output),
# with the GoogleTest suite when a GoogleTest is there: the system's, or the source tree the run
# carries in .gtest/ (a copy of /usr/src/googletest; the GPU machine has no package).
#   bash tools/gpu_build.sh [configure|build|all] [CMAKE_ARG...]   (default all)
# Environment: BUILD_DIR (build-cuda), TESTS (ON when a GoogleTest is found, else OFF),
# TORCH_CUDA_ARCH_LIST (9.0a), JOBS (nproc), HOST_CXX (the C++ and CUDA host compiler, e.g.
# g++-12 as on the CI machine; unset: CMake's choice, on the H200 machine its /opt/gcc g++ 13).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD_DIR=${BUILD_DIR:-build-cuda}
phase=${1:-all}
[ $# -gt 0 ] && shift

tests=()
compilers=()
if [ -n "${HOST_CXX:-}" ]; then
  compilers=(-DCMAKE_CXX_COMPILER="$HOST_CXX" -DCMAKE_CUDA_HOST_COMPILER="$HOST_CXX")
fi
if [ -d "$ROOT/.gtest" ]; then
  tests=(-DSOFTALIGN_GTEST_SOURCE_DIR="$ROOT/.gtest")
fi
if [ -z "${TESTS:-}" ]; then
  TESTS=OFF
  if [ -d "$ROOT/.gtest" ] || [ -f /usr/include/gtest/gtest.h ]; then TESTS=ON; fi
fi

export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0a}  # read at every (re)configure
if [ "$phase" = configure ] || [ "$phase" = all ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja \
    -DSOFTALIGN_WITH_CUDA=ON -DSOFTALIGN_BUILD_TESTS="$TESTS" "${tests[@]}" "${compilers[@]}" \
    "-DCMAKE_CUDA_FLAGS=-Xptxas -v" "$@" || exit
fi
if [ "$phase" = build ] || [ "$phase" = all ]; then
  cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" || exit
fi
