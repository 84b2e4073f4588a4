#!/usr/bin/env python3
"""Where an eager small call's host time goes (PERF.md's (16, 32^2) fwd+bwd row): the split of
one `score.sum().backward()` into forward, sum and backward by wall clock, then torch.profiler's
host ops and device kernels over many calls.

    python3 tools/small_call_profile.py [--shape 16 32 32] [--affine] [--calls 200]
"""
import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
import softalign  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", type=int, nargs=3, default=[16, 32, 32])
    ap.add_argument("--affine", action="store_true")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    gaps = dict(gap_open=-1.0, gap_extend=-0.5) if a.affine else dict(gap_open=-1.0)
    x = torch.randn(*a.shape, device=a.device, requires_grad=True)
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)

    def parts():
        x.grad = None
        t0 = time.perf_counter()
        score = softalign.smith_waterman(x, **gaps)
        t1 = time.perf_counter()
        total = score.sum()
        t2 = time.perf_counter()
        total.backward()
        t3 = time.perf_counter()
        sync()
        t4 = time.perf_counter()
        return t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0

    for _ in range(50):
        parts()
    rows = sorted(parts() for _ in range(a.calls))
    med = [sorted(r[k] for r in rows)[len(rows) // 2] * 1e6 for k in range(5)]
    print(f"{tuple(a.shape)} {'affine' if a.affine else 'linear'} on {a.device}, medians over "
          f"{a.calls} calls, us: forward {med[0]:.1f}, sum {med[1]:.1f}, backward (host) "
          f"{med[2]:.1f}, then synchronize {med[3]:.1f}; whole {med[4]:.1f}")

    def call():
        x.grad = None
        softalign.smith_waterman(x, **gaps).sum().backward()

    def floor():  # any differentiable op's eager call: an elementwise one's
        x.grad = None
        (x * 2.0).sum().backward()

    for name, fn in (("softalign", call), ("x * 2 (the autograd floor)", floor)):
        for _ in range(20):
            fn()
        sync()
        start = time.perf_counter()
        for _ in range(a.calls):
            fn()
        sync()
        print(f"back to back, {name}: {(time.perf_counter() - start) / a.calls * 1e6:.1f} us a call")

    from torch.profiler import ProfilerActivity, profile
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if a.device == "cuda" else [])
    with profile(activities=activities) as prof:
        for _ in range(a.calls):
            call()
        sync()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=40,
                                    max_name_column_width=70))


if __name__ == "__main__":
    main()
