#!/usr/bin/env bash
# Packs every file under a log folder into one archive in it, DIR/logs.tgz, and removes the
# files: the device machine's runner brings back only a few files of $OUT, and a run with
# more loses most of its logs. tools/gpu_check.sh and tools/gpu_ab.sh call it when PACK=1.
#   bash tools/pack_logs.sh "$OUT"        then: tar xzf logs.tgz -O summary.log
set -euo pipefail
cd "$1"
find . -type f ! -name logs.tgz -printf '%P\0' | tar czf logs.tgz --null -T -
find . -type f ! -name logs.tgz -delete
find . -mindepth 1 -type d -empty -delete
