#!/usr/bin/env python3
"""Where a long pair's stripes spend their time: the long linear forward (t = 1, gap -1) of a
library built with per-stripe printfs (notes/scaled-long-ring-stats.patch, on top of
notes/scaled-long-stacked.patch, both for `git apply` on e5a3815): item 0's stripes print their
start and end %globaltimer and their RingStream's takes, stale takes (prefetched entries not
yet tagged), reloads and clock64 cycles spent in take(). Prints, per case, in probability space
and (SOFTALIGN_CUDA_LOG_SPACE=1) in log space: the lag between consecutive stripes' ends, the
stale takes, the time waiting, and a few stripes' figures (session 25's call 4).

    SOFTALIGN_LIBRARY=build-libs/stats.so PYTHONPATH=python python3 tools/ring_stats.py
"""
import os
import re
import statistics
import subprocess
import sys

CASES = [(1, 4096, 4096), (32, 1024, 1024)]
code = """
import sys, torch
sys.path.insert(0, 'python')
import softalign
softalign.load_library()
B, M, N = {shape}
S = torch.randn(B, M, N, device='cuda')
for _ in range(2):
    softalign.smith_waterman(S, gap_open=-1.0)
    torch.cuda.synchronize()
print('MARK', flush=True)
softalign.smith_waterman(S, gap_open=-1.0)
torch.cuda.synchronize()
"""
pat = re.compile(r"RING (\w+) stripe (\d+) start (\d+) end (\d+) takes (\d+) stale (\d+) reloads (\d+) wait (-?\d+) n (\d+)")
for log_space in (False, True):
    for shape in CASES:
        env = dict(os.environ)
        if log_space:
            env["SOFTALIGN_CUDA_LOG_SPACE"] = "1"
        out = subprocess.run([sys.executable, "-c", code.format(shape=shape)], env=env,
                             capture_output=True, text=True).stdout
        out = out.split("MARK", 1)[1]
        rows = sorted((int(m[1]), m) for m in pat.findall(out))
        if not rows:
            print(shape, "no rows"); continue
        ms = [m for _, m in rows]
        starts = [int(m[2]) for m in ms]
        ends = [int(m[3]) for m in ms]
        t0 = min(starts)
        lags = [b - a for a, b in zip(ends, ends[1:])]
        busy = [e - s for s, e in zip(starts, ends)]
        takes = sum(int(m[4]) for m in ms)
        stale = sum(int(m[5]) for m in ms)
        reloads = sum(int(m[6]) for m in ms)
        wait = sum(int(m[7]) for m in ms) / 1.98  # cycles -> ns at 1.98 GHz
        n = int(ms[0][8])
        print(f"{ms[0][0]:6} {str(shape):18} stripes {len(ms)}  median end-to-end lag "
              f"{statistics.median(lags)/1e3:.2f} us  total {(ends[-1]-t0)/1e3:.1f} us  "
              f"stripe 0 {busy[0]/1e3:.1f} us for {n + 32} steps")
        print(f"       takes {takes} stale {stale} ({100*stale/max(takes,1):.0f}%) reloads {reloads} "
              f"({reloads/max(stale,1):.2f} per stale take)  waiting {wait/1e3:.1f} us summed "
              f"({100*wait/sum(busy):.0f}% of the stripes' time)")
        for s in sorted({0, 1, 2, len(ms)//2, len(ms)-1}):
            m = ms[s]
            print(f"       stripe {m[1]}: start {(int(m[2])-t0)/1e3:.1f} end {(int(m[3])-t0)/1e3:.1f} us "
                  f"takes {m[4]} stale {m[5]} reloads {m[6]} wait {int(m[7])/1.98/1e3:.1f} us")
