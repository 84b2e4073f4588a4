#!/usr/bin/env bash
# On the GPU machine: build the CUDA backend, run the CUDA tests (pytest and GoogleTest), the
# sanitizers and the benchmark. Every step logs to $OUT/<step>.log (OUT defaults to
# ./gpu_logs); $OUT/summary.log lists each step's exit status. Exits non-zero when any step
# failed. Carry .gtest/ (a googletest source tree) for the GoogleTest step.
#   bash tools/gpu_check.sh            everything
#   bash tools/gpu_check.sh --no-bench  everything but the benchmark
#   BENCH_ARGS=--quick bash tools/gpu_check.sh   a short benchmark
#   GENERAL=0 bash tools/gpu_check.sh   without the runs that force the thread-per-item path
#   PACK=1 bash tools/gpu_check.sh      the logs packed into $OUT/logs.tgz (tools/pack_logs.sh)
#   STEPS="configure build pytest" bash tools/gpu_check.sh   only those steps (a call's 600 s)
#   PYTEST_ARGS="-rf --durations=20" bash tools/gpu_check.sh  more arguments for the pytest step
#   SHARDS=1 bash tools/gpu_check.sh   the pytest step in one process (default: 4 at once)
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu_logs}
mkdir -p "$OUT"
: > "$OUT/summary.log"
export PYTHONPATH=$ROOT/python${PYTHONPATH:+:$PYTHONPATH}
export SOFTALIGN_LIBRARY=$ROOT/build-cuda/libsoftalign.so
BENCH=1
[ "${1:-}" = "--no-bench" ] && BENCH=0
status=0

# selected NAME: whether STEPS (when set) lists the step.
selected() { [ -z "${STEPS:-}" ] || [[ " $STEPS " == *" $1 "* ]]; }

# step NAME CMD...: runs CMD, tees its output to $OUT/NAME.log, records the exit status.
step() {
  local name=$1
  shift
  selected "$name" || return 0
  echo "=== $name: $*" | tee "$OUT/$name.log"
  local start=$SECONDS
  "$@" 2>&1 | tee -a "$OUT/$name.log"
  local rc=${PIPESTATUS[0]}
  echo "=== $name: rc=$rc ($((SECONDS - start)) s)" | tee -a "$OUT/$name.log" "$OUT/summary.log"
  [ "$rc" -eq 0 ] || status=1
  return "$rc"
}

step environment bash -c 'nvidia-smi; nvcc --version; python3 -c "import torch; print(torch.__version__, torch.cuda.get_device_name())"'

# tools/gpu_build.sh: -Xptxas -v (registers and spills of every kernel land in build.log) and
# the GoogleTest suite (GoogleTest built from .gtest/ when the machine has none).
step configure bash tools/gpu_build.sh configure
step build bash tools/gpu_build.sh build
if [ ! -f "$SOFTALIGN_LIBRARY" ]; then
  echo "no $SOFTALIGN_LIBRARY: stopping" | tee -a "$OUT/summary.log"
  exit 1
fi

# How many exp2/log2 (MUFU) each kernel issues, whether anything went to local memory, and how
# many shuffles and votes the compiler emulated (WARPSYNC.COLLECTIVE: code it could not prove
# the whole warp runs together, as a polling loop inside a branch does).
sass_counts() {
  cuobjdump --dump-sass "$SOFTALIGN_LIBRARY" | awk '
    function report() {
      if (name != "") printf "%-12s %6d %4d %4d %4d %4d %5d  %s\n", "", n, ex2, lg2, ldl, stl, coll, name
      if (coll > 0) emulated++
    }
    BEGIN { print "             instr  EX2  LG2  LDL  STL  COLL  kernel" }
    /Function :/ { report(); name = $3; n = ex2 = lg2 = ldl = stl = coll = 0; next }
    /\/\*[0-9a-f]+\*\// { n++ }
    /MUFU\.EX2/ { ex2++ }
    /MUFU\.LG2/ { lg2++ }
    /LDL/ { ldl++ }
    /STL/ { stl++ }
    /WARPSYNC\.COLLECTIVE/ { coll++ }
    END { report(); printf "kernels with emulated warp-wide instructions (COLL > 0): %d\n", emulated }'
}
if command -v cuobjdump > /dev/null; then
  step sass sass_counts
fi

# CUDA vs CPU: the fast forward (default), then the general forward (thread per item).
step smoke python3 tools/cuda_smoke.py
[ "${GENERAL:-1}" = 1 ] && step smoke_general env SOFTALIGN_CUDA_GENERAL=1 python3 tools/cuda_smoke.py

# In SHARDS (default 4) processes at once (tools/pytest_shards.sh; SHARDS=1: one pytest): on an
# H100 the CUDA suite (1153 cases) takes 122-166 s in 4 shards, about 480 s in one process; this
# whole script, PACK=1 GENERAL=0, takes about 400 s.
step pytest timeout 420 env OUT="$OUT" bash tools/pytest_shards.sh test_py -k cuda ${PYTEST_ARGS:-}
# The bad-input tests (mostly CPU tensors, outside -k cuda): their messages are formatted by the
# library built here, with this machine's toolchain (whose static libstdc++ once crashed them:
# CMakeLists.txt links the shared one).
step errors timeout 120 python3 -m pytest -q test_py/test_errors.py

# test_cpp through ctest: its CUDA cases (test_cuda.cpp) compare the backends from pure C++.
if [ -f build-cuda/CTestTestfile.cmake ] && grep -q test_cpp build-cuda/CTestTestfile.cmake; then
  step ctest_cuda timeout 300 ctest --test-dir build-cuda --output-on-failure -j "$(nproc)" --timeout 120
elif selected ctest_cuda; then
  echo "=== ctest_cuda: no GoogleTest suite in build-cuda (no .gtest/ carried?)" | tee -a "$OUT/summary.log"
  status=1
fi

# Sanitizers over a few small cases of each model (forward + backward); no caching allocator,
# so that memcheck sees every allocation's bounds.
step memcheck timeout 150 env PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool memcheck \
  --error-exitcode 1 python3 tools/cuda_smoke.py --tiny
[ "${GENERAL:-1}" = 1 ] && step memcheck_general env PYTORCH_NO_CUDA_MEMORY_CACHING=1 SOFTALIGN_CUDA_GENERAL=1 \
  compute-sanitizer --tool memcheck --error-exitcode 1 python3 tools/cuda_smoke.py --tiny
step racecheck timeout 200 compute-sanitizer --tool racecheck --error-exitcode 1 \
  python3 tools/cuda_smoke.py --tiny
step synccheck timeout 120 compute-sanitizer --tool synccheck --error-exitcode 1 \
  python3 tools/cuda_smoke.py --tiny
# Reads of memory nothing wrote, but for PyTorch's own sum's (tools/initcheck.sh says why).
step initcheck timeout 150 bash tools/initcheck.sh "$OUT/initcheck_full.log"

if [ "$BENCH" -eq 1 ]; then
  step benchmark timeout 200 python3 examples/benchmark.py --device cuda ${BENCH_ARGS:-}
fi

echo "=== summary"
cat "$OUT/summary.log"
[ "${PACK:-0}" = 1 ] && bash tools/pack_logs.sh "$OUT"
exit "$status"
