#!/usr/bin/env bash
# pytest in SHARDS processes at once (default 4), each taking a SHARDS-th of the selected tests
# by a hash of their ids (test_py/conftest.py's SOFTALIGN_TEST_SHARD), each with nproc / SHARDS
# threads for the host's references. On the GPU machine much of a CUDA test's time is its
# float64 reference on the host (16 cores), so shards share one GPU well: the CUDA suite in 166 s
# in 4 shards on an H100, about 480 s in one process. Each shard logs to
# $OUT/pytest_shard<k>.log; the summary and every failure's line come to stdout. Exits non-zero
# when any shard failed (a shard with no test selected counts as passed). A TERM or INT
# (timeout's) stops every shard.
#   OUT=gpu_logs SHARDS=4 bash tools/pytest_shards.sh test_py -k cuda
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu_logs}
SHARDS=${SHARDS:-4}
mkdir -p "$OUT"
threads=$(( $(nproc) / SHARDS ))
[ "$threads" -ge 1 ] || threads=1
pids=()
stop() { kill "${pids[@]}" 2> /dev/null; exit 124; }
trap stop TERM INT
for ((k = 0; k < SHARDS; ++k)); do
  SOFTALIGN_TEST_SHARD=$k/$SHARDS OMP_NUM_THREADS=$threads \
    python3 -m pytest -q -p no:cacheprovider "$@" > "$OUT/pytest_shard$k.log" 2>&1 &
  pids+=($!)
done
status=0
for ((k = 0; k < SHARDS; ++k)); do
  wait "${pids[$k]}"
  rc=$?
  log=$OUT/pytest_shard$k.log
  echo "shard $k/$SHARDS rc=$rc: $(grep -E ' in [0-9.]+s( \(.*\))?$' "$log" | tail -1)"
  grep -E '^(FAILED|ERROR) ' "$log"
  [ "$rc" -eq 0 ] || [ "$rc" -eq 5 ] || status=1
done
exit "$status"
