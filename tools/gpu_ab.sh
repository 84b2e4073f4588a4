#!/usr/bin/env bash
# On the GPU machine: A/B of compile-time variants. Builds build-cuda (as is) and one tree per
# variant (VARIANTS: CUDA flags per tree, trees separated by ';', e.g. "-DX=1;-DX=2 -DY") in parallel,
# then runs the CUDA-vs-CPU smoke test and the quick GPU benchmark against each; logs and a
# summary in $OUT (bench_<tree>.log, smoke_<tree>.log).
#   VARIANTS="-DSOFTALIGN_SMAX_VARIANT=1" bash tools/gpu_ab.sh
#   EXTRA=tools/stripe_cost.py VARIANTS=... bash tools/gpu_ab.sh   one more script per tree
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu_logs}
mkdir -p "$OUT"
export PYTHONPATH=$ROOT/python${PYTHONPATH:+:$PYTHONPATH}
trees=(build-cuda)
TESTS=OFF bash tools/gpu_build.sh > "$OUT/build_build-cuda.log" 2>&1 &
k=0
IFS=';' read -ra variants <<< "${VARIANTS:-}"
for flags in "${variants[@]}"; do
  k=$((k + 1))
  trees+=("build-v$k")
  echo "build-v$k: $flags" | tee -a "$OUT/ab_summary.log"
  BUILD_DIR=build-v$k TESTS=OFF bash tools/gpu_build.sh all "-DCMAKE_CUDA_FLAGS=-Xptxas -v $flags" \
    > "$OUT/build_build-v$k.log" 2>&1 &
done
wait
for t in "${trees[@]}"; do
  lib=$ROOT/$t/libsoftalign.so
  [ -f "$lib" ] || { echo "$t: no library" | tee -a "$OUT/ab_summary.log"; continue; }
  SOFTALIGN_LIBRARY=$lib timeout 200 python3 tools/cuda_smoke.py > "$OUT/smoke_$t.log" 2>&1
  echo "$t smoke rc=$? $(tail -1 "$OUT/smoke_$t.log")" | tee -a "$OUT/ab_summary.log"
  SOFTALIGN_LIBRARY=$lib timeout 200 python3 examples/benchmark.py --device cuda --quick \
    > "$OUT/bench_$t.log" 2>&1
  grep softalign "$OUT/bench_$t.log" | sed "s/^/$t /" | tee -a "$OUT/ab_summary.log"
  if [ -n "${EXTRA:-}" ]; then  # one more script per tree, e.g. EXTRA=tools/stripe_cost.py
    SOFTALIGN_LIBRARY=$lib timeout 200 python3 $EXTRA > "$OUT/extra_$t.log" 2>&1
    sed "s/^/$t /" "$OUT/extra_$t.log" >> "$OUT/ab_summary.log"
  fi
done
