#!/usr/bin/env bash
# On the GPU machine: compute-sanitizer's initcheck (reads of device memory nothing wrote) over
# the tiny smoke set. Fails on any report but those of PyTorch's own multi-block sum
# (at::native::reduce_kernel): torch.zeros(34000, 5, 16, device="cuda").sum(0) alone, with no
# softalign op in the program, gets 12768 of them; the smoke set reaches it where it
# sums per-position penalty gradients over 34000 items. Leaving that kernel out of the tool
# (--kernel-name-exclude) does not do: its writes then go untracked, and every later read of its
# results is reported instead.
#   bash tools/initcheck.sh [LOG]    (LOG: the sanitizer's whole output, default /tmp/initcheck.log)
set -uo pipefail
cd "$(dirname "$0")/.."
log=${1:-/tmp/initcheck.log}
PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool initcheck --print-limit 100000000 \
  python3 tools/cuda_smoke.py --tiny > "$log" 2>&1
smoke_rc=$?
grep -E "passed|ERROR SUMMARY" "$log" | tail -2
python3 - "$log" "$smoke_rc" <<'PY'
import re
import sys
from collections import Counter

log, smoke_rc = sys.argv[1], int(sys.argv[2])
reports = []  # (header, the kernel of its first "at" line, or None for host-side reports)
for line in open(log, errors="replace"):
    if re.match(r"^========= \S", line) and not re.match(
            r"^========= (COMPUTE-SANITIZER|ERROR SUMMARY|Target application)", line):
        reports.append([line[10:].strip(), None])
    elif reports and reports[-1][1] is None and line.startswith("=========     at "):
        reports[-1][1] = line[17:].strip()
ours = Counter(re.sub(r"0x[0-9a-f]+", "0x...", f"{h} at {k}") for h, k in reports
               if not (k and "at::native::reduce_kernel" in k))
print(f"initcheck: {len(reports)} reports, {len(reports) - sum(ours.values())} in PyTorch's "
      f"reduce_kernel (left out), {sum(ours.values())} elsewhere; the smoke set's exit status "
      f"{smoke_rc}")
for what, n in ours.most_common(10):
    print(f"  {n} x {what[:300]}")
sys.exit(1 if ours or smoke_rc else 0)
PY
