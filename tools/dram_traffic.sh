#!/usr/bin/env bash
# On the GPU machine: how many bytes the kernels of a forward + backward move to and from DRAM
# and L2 (Nsight Compute metrics), per library, beside their times; for a kernel that waits on
# memory, against what it must move (session 16: the short pairs' adjoint read 1.11 GB for 0.6 GB
# of scores and saved slabs).
#   LIBS="build-ab/a.so build-ab/b.so" bash tools/dram_traffic.sh ["65536 32 32 --backward" ...]
# (cases: tools/profile_case.py's arguments; default the short pairs' forward + backward)
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/python
METRICS=dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum
METRICS+=,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum
cases=("$@")
[ ${#cases[@]} -eq 0 ] && cases=("65536 32 32 --backward")
for lib in ${LIBS:-build-cuda/libsoftalign.so}; do
  export SOFTALIGN_LIBRARY=$(realpath "$lib")
  for c in "${cases[@]}"; do
    echo "=== $(basename "$lib" .so) $c"
    # The fourth to sixth launches: forward, adjoint and scaling of the second repetition.
    timeout 200 ncu --clock-control none --kernel-name regex:'forward_kernel|backward_kernel|scale_by_item' \
      --launch-skip 3 --launch-count 3 --metrics "$METRICS" python3 tools/profile_case.py $c --reps 3 2>&1 |
      grep -E "  void|dram__|gpu__time|lts__" | sed -e 's/(ProblemView.*//' -e 's/(const T1.*//'
  done
done
