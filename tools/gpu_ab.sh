#!/usr/bin/env bash
# On the GPU machine: A/B of library variants, interleaved so that drift hits each alike. The
# variants are either built here, build-cuda (as is) and one tree per VARIANTS entry (CUDA
# flags, trees separated by ';'), or libraries built elsewhere for sm_90a and carried (LIBS:
# their paths; tools/build_variant.sh makes them on the CI machine, which spares the device a
# build of about a minute each). Per variant: the CUDA-vs-CPU smoke test, then the quick GPU
# benchmark ROUNDS times (default 2); logs and a summary in $OUT (smoke_<name>.log,
# bench_<name>_r<round>.log, ab_summary.log).
#   VARIANTS="-DSOFTALIGN_SMAX_VARIANT=1" bash tools/gpu_ab.sh
#   LIBS="build-libs/main.so build-libs/new.so" bash tools/gpu_ab.sh   (carry build-libs)
#   EXTRA=tools/step_cost.py ... bash tools/gpu_ab.sh    more scripts per variant (';' between)
#   ROUNDS=0 ... bash tools/gpu_ab.sh   no benchmark: the smoke test and the EXTRA scripts only
#   PACK=1 ... bash tools/gpu_ab.sh   the logs packed into $OUT/logs.tgz (tools/pack_logs.sh) at
#     the end: anything written into $OUT after that (and a second pack) replaces the archive
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu_logs}
mkdir -p "$OUT"
export PYTHONPATH=$ROOT/python${PYTHONPATH:+:$PYTHONPATH}
names=() libs=()
if [ -n "${LIBS:-}" ]; then
  for lib in $LIBS; do
    names+=("$(basename "$lib" .so)")
    libs+=("$ROOT/$lib")
  done
else
  names+=(build-cuda)
  libs+=("$ROOT/build-cuda/libsoftalign.so")
  TESTS=OFF bash tools/gpu_build.sh > "$OUT/build_build-cuda.log" 2>&1 &
  k=0
  IFS=';' read -ra variants <<< "${VARIANTS:-}"
  for flags in "${variants[@]}"; do
    k=$((k + 1))
    names+=("build-v$k")
    libs+=("$ROOT/build-v$k/libsoftalign.so")
    echo "build-v$k: $flags" | tee -a "$OUT/ab_summary.log"
    BUILD_DIR=build-v$k TESTS=OFF bash tools/gpu_build.sh all "-DCMAKE_CUDA_FLAGS=-Xptxas -v $flags" \
      > "$OUT/build_build-v$k.log" 2>&1 &
  done
  wait
fi
for i in "${!libs[@]}"; do
  [ -f "${libs[$i]}" ] || { echo "${names[$i]}: no library" | tee -a "$OUT/ab_summary.log"; continue; }
  SOFTALIGN_LIBRARY=${libs[$i]} timeout 200 python3 tools/cuda_smoke.py > "$OUT/smoke_${names[$i]}.log" 2>&1
  echo "${names[$i]} smoke rc=$? $(tail -1 "$OUT/smoke_${names[$i]}.log")" | tee -a "$OUT/ab_summary.log"
done
for round in $(seq "${ROUNDS:-2}"); do
  for i in "${!libs[@]}"; do
    [ -f "${libs[$i]}" ] || continue
    log=$OUT/bench_${names[$i]}_r$round.log
    SOFTALIGN_LIBRARY=${libs[$i]} timeout 200 python3 examples/benchmark.py --device cuda --quick \
      > "$log" 2>&1
    grep softalign "$log" | sed "s/^/${names[$i]} r$round /" | tee -a "$OUT/ab_summary.log"
  done
done
# More scripts per variant, separated by ';', each with its arguments: EXTRA=tools/step_cost.py
# or EXTRA="tools/step_cost.py; tools/step_cost.py --affine". Their lines join the summary,
# prefixed with the variant and the script's number.
IFS=';' read -ra extras <<< "${EXTRA:-}"
for k in "${!extras[@]}"; do
  script=${extras[$k]}
  [ -n "${script// /}" ] || continue
  for i in "${!libs[@]}"; do
    [ -f "${libs[$i]}" ] || continue
    log=$OUT/extra${k}_${names[$i]}.log
    SOFTALIGN_LIBRARY=${libs[$i]} timeout 200 python3 $script > "$log" 2>&1
    sed "s/^/${names[$i]} x$k /" "$log" >> "$OUT/ab_summary.log"
  done
done
[ "${PACK:-0}" = 1 ] && bash tools/pack_logs.sh "$OUT"
exit 0
