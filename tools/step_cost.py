#!/usr/bin/env python3
"""The long forwards' step time and lag: the forward without grad of items one stripe tall
(no hand-over: time / (N + skew) is the time of one step) beside the long cases, whose time is
about (N + skew + (stripes - 1) lag) steps.

    SOFTALIGN_LIBRARY=... python3 tools/step_cost.py [--affine] [--mode global]
"""
import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.append(str(Path(__file__).resolve().parents[1] / "python"))  # an installed softalign first
import softalign  # noqa: E402


def median_ms(fn, reps=20):
    """The median of reps calls' device times (CUDA events), after one warm-up call."""
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def forward_ms(B, M, N, affine, mode):
    S = torch.randn(B, M, N, device="cuda")
    gaps = dict(gap_open=-1.0, gap_extend=-0.5) if affine else dict(gap_open=-1.0)
    with torch.no_grad():
        return median_ms(lambda: softalign.smith_waterman(S, mode=mode, **gaps))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--affine", action="store_true")
    ap.add_argument("--mode", default="local", choices=["local", "global"])
    args = ap.parse_args()
    softalign.load_library()
    model = ("affine" if args.affine else "linear") + ("" if args.mode == "local" else " global")
    for B, M, N in [(128, 32, 4096), (64, 64, 4096), (1, 4096, 4096), (32, 1024, 1024)]:
        ms = forward_ms(B, M, N, args.affine, args.mode)
        print(f"{model} ({B}, {M}, {N}) fwd {ms:.4f} ms  {B * M * N / ms / 1e6:7.1f} GCUPS  "
              f"{ms * 1e6 / (N + M):.1f} ns per (N + M) step", flush=True)


if __name__ == "__main__":
    main()
