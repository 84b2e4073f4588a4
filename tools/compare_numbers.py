"""Compares two files of "<name> <index> <value>" lines (as the deployment examples print them).

    python3 tools/compare_numbers.py EXPECTED GOT [--tol 1e-6]

Lines starting with '#' are comments. Both files must name the same (name, index) pairs, and
every value must agree within --tol (absolute, or relative to |expected| when that is > 1).
Exits 1 on any difference, printing each.
"""
import argparse
import math
import sys


def read(path):
    values = {}
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split()
            if len(parts) != 3:
                sys.exit(f"{path}:{number}: expected '<name> <index> <value>', got {line!r}")
            values[(parts[0], int(parts[1]))] = float(parts[2])
    if not values:
        sys.exit(f"{path}: no numbers")
    return values


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("expected")
    parser.add_argument("got")
    parser.add_argument("--tol", type=float, default=1e-6)
    args = parser.parse_args()
    expected, got = read(args.expected), read(args.got)
    bad = []
    for key in sorted(expected.keys() | got.keys()):
        if key not in got or key not in expected:
            bad.append(f"{key[0]}[{key[1]}]: only in {'expected' if key in expected else 'got'}")
            continue
        e, g = expected[key], got[key]
        if not (math.isfinite(e) and math.isfinite(g)):
            ok = e == g or (math.isnan(e) and math.isnan(g))
        else:
            ok = abs(e - g) <= args.tol * max(1.0, abs(e))
        if not ok:
            bad.append(f"{key[0]}[{key[1]}]: expected {e!r}, got {g!r} (diff {abs(e - g):.3g})")
    worst = max((abs(expected[k] - got[k]) for k in expected.keys() & got.keys()
                 if math.isfinite(expected[k]) and math.isfinite(got[k])), default=0.0)
    if bad:
        print(f"MISMATCH {args.got} vs {args.expected}:", *bad, sep="\n  ")
        sys.exit(1)
    print(f"ok: {len(expected)} numbers agree within {args.tol:g} (largest difference {worst:.3g})")


if __name__ == "__main__":
    main()
