#!/usr/bin/env bash
# On the GPU machine, one call, no build: a CUDA library built elsewhere for sm_90a
# (tools/build_variant.sh; carry build-libs/) through the tests of the kernels it changes, the
# sanitizers on those kernels' cases, and an A/B of forward + backward against other libraries
# (tools/fwd_bwd_ab.py). Each step logs to $OUT/<step>.log; $OUT/summary.log lists each step's
# exit status and seconds. Steps run in order while the call's time (BUDGET seconds, default
# 540) lasts; a step that would start with less than its own limit left is skipped (said so).
#   LIB=build-libs/new.so AB="build-libs/main.so build-libs/new.so" \
#     TESTS="test_py/test_cuda_probability_space_gradients.py" K=affine \
#     CASES="700 32 32 --affine --mode global --lengths;2000 32 32 --affine --reduction soft" \
#     bash tools/gpu_lib_check.sh
#   MORE="test_py/test_cuda_probability_space_affine.py" tests for the time left at the end (-k "$K")
#   SHARDS=1   the tests in one pytest process (default: 4 at once, tools/pytest_shards.sh)
#   BENCH=1   the benchmark table (examples/benchmark.py --device cuda) after the first tests
#   SMALL=1   where an eager (16, 32^2) fwd+bwd's host time goes (tools/profile_small.py)
#   NCU="65536 32 32 --affine" NCU_KERNEL=affine_forward_backward   Nsight Compute's speed of
#     light, occupancy, scheduler and warp stall figures of that kernel in that case's backward
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu_logs}
BUDGET=${BUDGET:-540}
mkdir -p "$OUT" build-cuda
: > "$OUT/summary.log"
cp "$LIB" build-cuda/libsoftalign.so
export PYTHONPATH=$ROOT/python:$ROOT/test_py SOFTALIGN_LIBRARY=$ROOT/build-cuda/libsoftalign.so
status=0

# step NAME LIMIT CMD...: CMD under `timeout LIMIT`, logged to $OUT/NAME.log, unless less than
# LIMIT seconds of the budget are left.
step() {
  local name=$1 limit=$2
  shift 2
  local left=$((BUDGET - SECONDS))
  if [ "$left" -lt "$limit" ]; then
    echo "=== $name: skipped ($left s left, needs $limit)" | tee -a "$OUT/summary.log"
    return 0
  fi
  echo "=== $name: $*" > "$OUT/$name.log"
  local start=$SECONDS
  timeout "$limit" "$@" >> "$OUT/$name.log" 2>&1
  local rc=$?
  echo "=== $name: rc=$rc ($((SECONDS - start)) s)" | tee -a "$OUT/$name.log" "$OUT/summary.log"
  tail -4 "$OUT/$name.log" | cut -c1-200
  [ "$rc" -eq 0 ] || status=1
}

step environment 30 bash -c 'nvidia-smi --query-gpu=name,clocks.max.sm --format=csv; python3 -c "import torch; print(torch.__version__, torch.cuda.get_device_name())"'
# In SHARDS (default 4) pytest processes at once (tools/pytest_shards.sh; each stops at its
# first failure).
step tests "${TESTS_LIMIT:-200}" env OUT="$OUT" bash tools/pytest_shards.sh -x $TESTS -k "${K:-cuda}"
[ "${BENCH:-0}" = 1 ] && step benchmark 200 python3 examples/benchmark.py --device cuda
[ "${SMALL:-0}" = 1 ] && step small 120 bash -c \
  'python3 tools/profile_small.py && python3 tools/profile_small.py --affine'
k=0
IFS=';' read -ra cases <<< "${CASES:-}"
for c in "${cases[@]}"; do
  k=$((k + 1))
  # shellcheck disable=SC2086
  step "memcheck$k" 90 compute-sanitizer --tool memcheck --error-exitcode 1 \
    python3 tools/profile_case.py $c --backward --reps 1
  # shellcheck disable=SC2086
  step "racecheck$k" 90 compute-sanitizer --tool racecheck --error-exitcode 1 \
    python3 tools/profile_case.py $c --backward --reps 1
done
[ -n "${NCU:-}" ] && step ncu 120 ncu --kernel-name "regex:${NCU_KERNEL:-.}" --launch-skip 1 \
  --launch-count 1 --section SpeedOfLight --section Occupancy --section LaunchStats \
  --section SchedulerStats --section WarpStateStats --section InstructionStats \
  python3 tools/profile_case.py $NCU --backward --reps 2
[ -n "${AB:-}" ] && step ab "${AB_LIMIT:-200}" python3 tools/fwd_bwd_ab.py $AB ${AB_ARGS:-}
[ -n "${MORE:-}" ] && step more $((BUDGET - SECONDS - 5)) python3 -m pytest -q -p no:cacheprovider \
  $MORE -k "${K:-cuda}"
echo "status $status" | tee -a "$OUT/summary.log"
exit $status
