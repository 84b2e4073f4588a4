#!/usr/bin/env bash
# On the GPU machine: build the CUDA backend (as gpu_check.sh does) and profile the kernels of a
# few benchmark cases with Nsight Compute; each case's report lands in $OUT/ncu_<case>.log, with
# why the warps stalled (cycles per issued instruction, by reason).
#   bash tools/gpu_profile.sh                 the default cases
#   bash tools/gpu_profile.sh "65536 32 32"   the cases given (profile_case.py's arguments)
#   bash tools/gpu_profile.sh --source NAME KERNEL_REGEX "32 1024 1024 --backward"
#       one launch of one kernel with source counters: where its warps stall and how often each
#       SASS instruction ran (a diverged warp runs its code twice), in $OUT/src_NAME.log and the
#       per-instruction table $OUT/src_NAME.csv.gz
#   SOFTALIGN_LIBRARY=build-libs/x.so bash tools/gpu_profile.sh ...   a library built elsewhere
#       (tools/build_variant.sh; carry it) instead of building one here
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu_logs}
mkdir -p "$OUT"
export PYTHONPATH=$ROOT/python${PYTHONPATH:+:$PYTHONPATH}
if [ -n "${SOFTALIGN_LIBRARY:-}" ]; then  # carried: it must be there
  export SOFTALIGN_LIBRARY=$(realpath -m "$SOFTALIGN_LIBRARY")
  [ -f "$SOFTALIGN_LIBRARY" ] || { echo "no library at $SOFTALIGN_LIBRARY" >&2; exit 1; }
else
  export SOFTALIGN_LIBRARY=$ROOT/build-cuda/libsoftalign.so
  if [ ! -f "$SOFTALIGN_LIBRARY" ]; then
    TESTS=${TESTS:-OFF} bash tools/gpu_build.sh > "$OUT/profile_build.log" 2>&1 || exit 1
  fi
fi
if [ "${1:-}" = "--source" ]; then
  name=$2 kernel=$3 case=$4
  rep=/tmp/src_$name
  timeout 300 ncu --clock-control none --kernel-name regex:"$kernel" --launch-skip 2 --launch-count 1 \
    --section WarpStateStats --section SourceCounters --section SpeedOfLight --section Occupancy \
    --section SchedulerStats --section ComputeWorkloadAnalysis --section InstructionStats \
    --section MemoryWorkloadAnalysis \
    --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
    -f -o "$rep" python3 tools/profile_case.py $case --reps 3 > "$OUT/src_$name.log" 2>&1
  echo "=== $name: rc=$?"
  ncu -i "$rep.ncu-rep" --print-units base >> "$OUT/src_$name.log" 2>&1
  ncu -i "$rep.ncu-rep" --page source --csv --print-source sass 2> /dev/null | gzip > "$OUT/src_$name.csv.gz"
  exit 0
fi
cases=("$@")
[ ${#cases[@]} -eq 0 ] && cases=("65536 32 32" "65536 32 32 --backward" "32 1024 1024" "32 1024 1024 --backward" "1 4096 4096")
SECTIONS=(--section SpeedOfLight --section Occupancy --section LaunchStats
  --section WarpStateStats --section SchedulerStats --section InstructionStats
  --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis
  --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio')
for c in "${cases[@]}"; do
  name=$(echo "$c" | tr -c 'a-zA-Z0-9\n' '_')
  # Three launches after the first two (which warm up): the forward, or forward and adjoint.
  timeout 240 ncu --clock-control none --kernel-name regex:'forward_kernel|backward_kernel' --launch-skip 2 \
    --launch-count 3 "${SECTIONS[@]}" python3 tools/profile_case.py $c --reps 3 \
    > "$OUT/ncu_$name.log" 2>&1
  echo "=== $c: rc=$?"
done
