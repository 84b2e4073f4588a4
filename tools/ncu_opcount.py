#!/usr/bin/env python3
"""Where one kernel's executed instructions and stalls go, from the per-instruction table that
`tools/gpu_profile.sh --source NAME ...` leaves ($OUT/src_NAME.csv.gz): warp instructions per
DP cell by opcode (x 32 lanes / cells), the same by code region (SASS offset blocks: the step
loop against the chunk work around it), and the instructions with the most stall samples.

    python3 tools/ncu_opcount.py src_fwd8.csv.gz --cells $((65536 * 32 * 32))
    python3 tools/ncu_opcount.py src_bwd8.csv.gz --cells 67108864 --block 0x800 --top 20
"""
import argparse
import collections
import csv
import gzip

parser = argparse.ArgumentParser()
parser.add_argument("table", help="src_NAME.csv.gz from gpu_profile.sh --source")
parser.add_argument("--cells", type=float, required=True, help="DP cells of the profiled launch")
parser.add_argument("--block", type=lambda s: int(s, 0), default=0x400, help="region size, bytes")
parser.add_argument("--top", type=int, default=12, help="most stalled instructions to list")
args = parser.parse_args()

rows = list(csv.reader(gzip.open(args.table, "rt")))
header = rows[1]  # rows[0] names the kernel
at = {name: header.index(name) for name in
      ("Address", "Source", "Instructions Executed", "Warp Stall Sampling (All Samples)")}
stall_columns = [(name, header.index(name)) for name in header
                 if name.startswith("stall_") and "Not Issued" not in name]

instructions = []  # (offset, opcode, source, executed, samples, {reason: samples})
base = None
for row in rows[2:]:
    if len(row) <= at["Instructions Executed"] or not row[at["Source"]].strip():
        continue
    address = int(row[at["Address"]], 16)
    base = address if base is None else base
    source = row[at["Source"]].strip()
    words = source.split()
    opcode = (words[1] if words[0].startswith("@") else words[0]).split(".")[0]
    reasons = {name[len("stall_"):]: int(row[i] or 0) for name, i in stall_columns}
    instructions.append((address - base, opcode, source, int(row[at["Instructions Executed"]]),
                         int(row[at["Warp Stall Sampling (All Samples)"]]), reasons))

per_cell = 32 / args.cells
total = sum(i[3] for i in instructions)
samples = sum(i[4] for i in instructions) or 1
print(f"{rows[0][1][:120]}\n{total / 1e6:.1f} M warp instructions: {total * per_cell:.2f} a cell")

by_opcode = collections.Counter()
stalls_by_opcode = collections.Counter()
for _, opcode, _, executed, stalled, _ in instructions:
    by_opcode[opcode] += executed
    stalls_by_opcode[opcode] += stalled
print("\nby opcode: instructions a cell, share of stall samples")
for opcode, executed in by_opcode.most_common(20):
    print(f"  {opcode:10s} {executed * per_cell:7.2f}  {100 * stalls_by_opcode[opcode] / samples:5.1f}%")

by_region = collections.OrderedDict()
for offset, _, _, executed, stalled, _ in instructions:
    block = offset // args.block * args.block
    count, stall = by_region.get(block, (0, 0))
    by_region[block] = (count + executed, stall + stalled)
print(f"\nby region (blocks of {args.block:#x} bytes, over 0.1 a cell)")
for block, (executed, stalled) in by_region.items():
    if executed * per_cell > 0.1:
        print(f"  {block:6x} {executed * per_cell:7.2f}  {100 * stalled / samples:5.1f}%")

print("\nmost stalled instructions: offset, share of samples, executions, main reasons")
for offset, _, source, executed, stalled, reasons in sorted(instructions, key=lambda i: -i[4])[:args.top]:
    main = ", ".join(f"{k} {v}" for k, v in sorted(reasons.items(), key=lambda kv: -kv[1])[:2] if v)
    print(f"  {offset:6x} {100 * stalled / samples:5.1f}% {executed:9d}  {source[:56]:56s} {main}")
