#!/usr/bin/env python3
"""Opcode histogram of the kernels whose (mangled) name contains each pattern, from
`cuobjdump -sass` on stdin: where a kernel's instructions go (MUFU, FP32, address math, ...).
With --loops, the same for each loop of a kernel that issues exp2 (a backward branch over at
least --min-ex2 MUFU.EX2): the unrolled step loops, whose length per cell is what the sweep
issues (e.g. 772 instructions for 4 steps x 4 rows of the short linear forward: 48 a cell), and
the register moves at each loop's back edge (e.g. the long adjoint's slabs in flight, moved
there, the first move waiting for its load). The CI machine has no cuobjdump; PyPI's
nvidia-cuda-cuobjdump wheel holds one (tools/cuobjdump.sh fetches it).

    cuobjdump -sass build-cuda/libsoftalign.so | python3 tools/sass_histogram.py PATTERN...
    cuobjdump -sass build-cuda/libsoftalign.so | python3 tools/sass_histogram.py --loops PATTERN...
"""
import argparse
import collections
import re
import sys

# One SASS instruction of `cuobjdump -sass`: its address, predicate ("" or "@!P0" ...), opcode and
# operands.
Instruction = collections.namedtuple("Instruction", "address predicate opcode operands")


def read_kernels(lines, patterns):
    """name -> [Instruction] for the kernels whose mangled name contains one of `patterns`."""
    kernels = collections.defaultdict(list)
    name = None
    for line in lines:
        m = re.search(r"Function : (\S+)", line)
        if m:
            name = m.group(1)
            continue
        m = re.search(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*)", line)
        if m and name and any(p in name for p in patterns):
            kernels[name].append(Instruction(int(m.group(1), 16), (m.group(2) or "").strip(),
                                             m.group(3), m.group(4).strip()))
    return kernels


def histogram(instructions):
    counts = collections.Counter(i.opcode.split(".")[0] for i in instructions)
    return ", ".join(f"{op} {n}" for op, n in counts.most_common(22))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("patterns", nargs="+")
    parser.add_argument("--loops", action="store_true", help="each exp2-issuing loop on its own")
    parser.add_argument("--min-ex2", type=int, default=8)
    args = parser.parse_args()
    for name, instructions in read_kernels(sys.stdin, args.patterns).items():
        print(f"{name[:110]}\n  {len(instructions)} instructions: {histogram(instructions)}")
        if not args.loops:
            continue
        for branch in instructions:
            target = re.search(r"0x([0-9a-f]+)", branch.operands) if branch.opcode.startswith("BRA") else None
            if target is None or int(target.group(1), 16) >= branch.address:
                continue  # not a backward branch
            body = [i for i in instructions if int(target.group(1), 16) <= i.address <= branch.address]
            ex2 = sum(i.opcode == "MUFU.EX2" for i in body)
            if ex2 < args.min_ex2:
                continue
            print(f"    loop {target.group(1)}..{branch.address:x}: {len(body)} instructions, {ex2} EX2: "
                  f"{histogram(body)}")
            # Its tail, after the last join or branch: register moves there are values the
            # unrolled steps hand on at the back edge (a move of a loaded value waits for its load).
            last_join = max((k for k, i in enumerate(body[:-1]) if i.opcode.startswith(("BSYNC", "BRA"))),
                            default=-1)
            tail = body[last_join + 1:-1]
            moves = [i for i in tail if i.opcode == "MOV" or i.opcode.startswith("IMAD.MOV")]
            print(f"      {len(moves)} register moves in its last {len(tail)} instructions (back edge)")


if __name__ == "__main__":
    main()
