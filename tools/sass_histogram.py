#!/usr/bin/env python3
"""Opcode histogram of the kernels whose (mangled) name contains each pattern, from
`cuobjdump -sass` on stdin: where a kernel's instructions go (MUFU, FP32, address math, ...).

    cuobjdump -sass build-cuda/libsoftalign.so | python3 tools/sass_histogram.py PATTERN...
"""
import collections
import re
import sys

patterns = sys.argv[1:]
kernels = collections.defaultdict(collections.Counter)
name = None
for line in sys.stdin:
    m = re.search(r"Function : (\S+)", line)
    if m:
        name = m.group(1)
        continue
    m = re.search(r"/\*[0-9a-f]{4}\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
    if m and name and any(p in name for p in patterns):
        kernels[name][m.group(2).split(".")[0]] += 1
for name, counts in kernels.items():
    total = sum(counts.values())
    top = ", ".join(f"{op} {n}" for op, n in counts.most_common(22))
    print(f"{name[:110]}\n  {total} instructions: {top}")
