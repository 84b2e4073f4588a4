#!/usr/bin/env bash
# On the GPU machine: Nsight Compute with source counters (where the warps stall, per SASS
# instruction) for one kernel launch of a benchmark case; the stall metrics land in
# $OUT/src_<name>.log and the per-instruction table in $OUT/src_<name>.csv.gz.
#   bash tools/gpu_source_profile.sh NAME KERNEL_REGEX "B M N [--backward] [--affine]"
#   bash tools/gpu_source_profile.sh save32 'forward_kernel' "32 1024 1024 --backward"
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu_logs}
mkdir -p "$OUT"
export PYTHONPATH=$ROOT/python${PYTHONPATH:+:$PYTHONPATH}
export SOFTALIGN_LIBRARY=$ROOT/build-cuda/libsoftalign.so
if [ ! -f "$SOFTALIGN_LIBRARY" ]; then
  TESTS=${TESTS:-OFF} bash tools/gpu_build.sh > "$OUT/profile_build.log" 2>&1 || exit 1
fi
name=$1 kernel=$2 case=$3
rep=/tmp/src_$name
timeout 300 ncu --clock-control none --kernel-name regex:"$kernel" --launch-skip 2 --launch-count 1 \
  --section WarpStateStats --section SourceCounters --section SpeedOfLight \
  --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
  -f -o "$rep" python3 tools/profile_case.py $case --reps 3 > "$OUT/src_$name.log" 2>&1
echo "=== $name: rc=$?"
ncu -i "$rep.ncu-rep" --print-units base >> "$OUT/src_$name.log" 2>&1
ncu -i "$rep.ncu-rep" --page source --csv --print-source sass 2> /dev/null | gzip > "$OUT/src_$name.csv.gz"
