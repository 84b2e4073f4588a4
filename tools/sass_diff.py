#!/usr/bin/env python3
"""Whether the kernels of one library compile to the same SASS as those of another: each kernel
of NEW whose (mangled) name contains PATTERN, after --rename, is looked up in OLD and its
instructions compared, addresses and encodings left out. Identical SASS means a change that
reached no instruction of those kernels (a template argument that only other kernels use, a
comment), so that OLD's GPU test runs still describe them; the CI machine can tell that without
a GPU. Reads `cuobjdump -sass` of both (tools/cuobjdump.sh).

    python3 tools/sass_diff.py build-libs/old.so build-libs/new.so backward_kernel \\
        --rename '(backward_kernel.*?)Lb0E(EEv)' '\\1\\2'
"""
import argparse
import re
import subprocess
import sys
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
sys.path.insert(0, str(TOOLS))
from sass_histogram import read_kernels  # noqa: E402


def kernels(library, pattern):
    """name -> its instructions without addresses, for the kernels whose name contains `pattern`.
    Anonymous namespaces carry hashes of the source's path (another worktree, another hash): left
    out of the names."""
    sass = subprocess.run(["bash", str(TOOLS / "cuobjdump.sh"), "-sass", library], check=True,
                          capture_output=True, text=True).stdout
    found = {}
    for name, code in read_kernels(sass.splitlines(), [""]).items():
        plain = re.sub(r"\d*(_GLOBAL__N__)[0-9a-f]{8}(_\d+_\w+?_cu_)[0-9a-f]{8}(_\d+)?", r"\1\2",
                       name)
        if pattern in plain:
            found[plain] = [(i.predicate, i.opcode, i.operands) for i in code]
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("pattern", help="kernels whose mangled name contains this")
    parser.add_argument("--rename", nargs=2, metavar=("REGEX", "REPLACEMENT"),
                        help="applied to NEW's names before looking them up in OLD")
    args = parser.parse_args()
    old, new = kernels(args.old, args.pattern), kernels(args.new, args.pattern)
    same = differ = missing = 0
    for name, code in sorted(new.items()):
        key = re.sub(args.rename[0], args.rename[1], name) if args.rename else name
        if key not in old:
            missing += 1
            continue
        if code == old[key]:
            same += 1
        else:
            differ += 1
            changed = sum(a != b for a, b in zip(code, old[key])) + abs(len(code) - len(old[key]))
            print(f"differs: {name[:100]} ({len(old[key])} -> {len(code)} instructions, "
                  f"{changed} positions)")
    print(f"{same} identical, {differ} different, {missing} of NEW's {len(new)} kernels not in OLD")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
