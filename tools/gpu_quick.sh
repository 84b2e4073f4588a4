#!/usr/bin/env bash
# On the GPU machine, between full checks: build, CUDA-vs-CPU smoke, quick benchmark, a host
# profile of the seed-size call and Nsight Compute figures of the striped kernels; logs in $OUT.
set -o pipefail
export PYTHONPATH=$PWD/python SOFTALIGN_LIBRARY=$PWD/build-cuda/libsoftalign.so
TESTS=${TESTS:-OFF} bash tools/gpu_build.sh > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
grep -A2 "stripes" $OUT/build.log | grep -E "registers|spill" | sort | uniq -c | head -30
timeout 240 python3 tools/cuda_smoke.py 2>&1 | tee $OUT/smoke.log | grep -v "^PASS" | head -30
timeout 150 python3 examples/benchmark.py --device cuda --quick 2>&1 | tee $OUT/bench.log | grep softalign
timeout 90 python3 tools/profile_small.py > $OUT/profile_small.log 2>&1; head -6 $OUT/profile_small.log
timeout 100 ncu --clock-control none --kernel-name regex:"forward_kernel|backward_kernel" --launch-skip 2 --launch-count 3 --section SpeedOfLight --section Occupancy --section WarpStateStats --section InstructionStats --section LaunchStats python3 tools/profile_case.py 65536 32 32 --backward > $OUT/ncu_bwd.log 2>&1
grep -E "forward_kernel|backward_kernel|Duration|Registers Per|Achieved Active Warps|Executed Instructions  |Warp Cycles Per Issued|Issued Ipc" $OUT/ncu_bwd.log | cut -c1-150
cuobjdump -sass build-cuda/libsoftalign.so | python3 tools/sass_histogram.py forward_kernelILb0ELi8ELi4ELb0E backward_kernelILb0ELi8ELi4E forward_kernelILb0ELi32ELi1ELb0E | tee $OUT/sass.log
