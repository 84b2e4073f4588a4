#!/usr/bin/env python3
"""Where a long pair's stripes spend their time: the long linear forward (t = 1, gap -1) of a
library built with per-stripe printfs (notes/scaled-long-ring-stats.patch, on top of
`git show 5974dc8:notes/scaled-long-stacked.patch`, both for `git apply` on e5a3815): item 0's
stripes print their start and end %globaltimer and their RingStream's takes, stale takes
(prefetched entries not yet tagged), reloads and clock64 cycles spent in take(). Prints, per
case, in probability space and (SOFTALIGN_CUDA_LOG_SPACE=1) in log space: the lag between
consecutive stripes' ends, the stale takes, the time waiting, and a few stripes' figures
(session 25's call 4; session 26's call 2 with the chunk-end write).

    SOFTALIGN_LIBRARY=build-libs/stats.so PYTHONPATH=python python3 tools/ring_stats.py
"""
import os
import re
import statistics
import subprocess
import sys

CASES = [(1, 4096, 4096), (32, 1024, 1024)]
CYCLES_PER_NS = 1.98  # the H200's SM clock
# One forward of `shape` after two warm-up calls; only its printfs follow MARK.
CALL = """
import sys, torch
sys.path.insert(0, 'python')
import softalign
softalign.load_library()
S = torch.randn(*{shape}, device='cuda')
for _ in range(2):
    softalign.smith_waterman(S, gap_open=-1.0)
    torch.cuda.synchronize()
print('MARK', flush=True)
softalign.smith_waterman(S, gap_open=-1.0)
torch.cuda.synchronize()
"""
LINE = re.compile(r"RING (\w+) stripe (\d+) start (\d+) end (\d+) takes (\d+) stale (\d+) "
                  r"reloads (\d+) wait (-?\d+) n (\d+)")


def stripes_of(shape, log_space):
    """Item 0's stripes, in order: (kind, stripe, start, end, takes, stale, reloads, wait, n)."""
    env = dict(os.environ)
    if log_space:
        env["SOFTALIGN_CUDA_LOG_SPACE"] = "1"
    out = subprocess.run([sys.executable, "-c", CALL.format(shape=shape)], env=env,
                         capture_output=True, text=True).stdout
    rows = [(m[0], *map(int, m[1:])) for m in LINE.findall(out.split("MARK", 1)[-1])]
    return sorted(rows, key=lambda r: r[1])


def summarize(shape, rows):
    starts = [r[2] for r in rows]
    ends = [r[3] for r in rows]
    t0 = min(starts)
    lags = [b - a for a, b in zip(ends, ends[1:])]
    busy = sum(e - s for s, e in zip(starts, ends))
    takes, stale, reloads = (sum(r[k] for r in rows) for k in (4, 5, 6))
    wait_ns = sum(r[7] for r in rows) / CYCLES_PER_NS
    print(f"{rows[0][0]:6} {str(shape):18} stripes {len(rows)}  median lag between ends "
          f"{statistics.median(lags) / 1e3:.2f} us  total {(ends[-1] - t0) / 1e3:.1f} us  "
          f"stripe 0 {(ends[0] - starts[0]) / 1e3:.1f} us for {rows[0][8] + 32} steps")
    print(f"       takes {takes} stale {stale} ({100 * stale / max(takes, 1):.0f}%) reloads "
          f"{reloads} ({reloads / max(stale, 1):.2f} per stale take)  waiting "
          f"{wait_ns / 1e3:.1f} us summed ({100 * wait_ns / busy:.0f}% of the stripes' time)")
    for s in sorted({0, 1, 2, len(rows) // 2, len(rows) - 1}):
        _, stripe, start, end, takes, stale, reloads, wait, _ = rows[s]
        print(f"       stripe {stripe}: start {(start - t0) / 1e3:.1f} end {(end - t0) / 1e3:.1f} "
              f"us takes {takes} stale {stale} reloads {reloads} "
              f"wait {wait / CYCLES_PER_NS / 1e3:.1f} us")


def main():
    for log_space in (False, True):
        for shape in CASES:
            rows = stripes_of(shape, log_space)
            if rows:
                summarize(shape, rows)
            else:
                print(shape, "no RING lines: a library without the printfs?")


if __name__ == "__main__":
    main()
