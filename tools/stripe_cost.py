#!/usr/bin/env python3
"""What the hand-over between stripes costs the long pairs: each long case beside a case of the
same cells and warps whose items are one stripe each (M = 32, the same one-row-per-lane kernel),
so the difference is the pipeline (its fill and the ring). Then the kernels of each case's
forward + backward, from torch.profiler.

    SOFTALIGN_LIBRARY=build-cuda/libsoftalign.so python3 tools/stripe_cost.py [--affine | --models linear,affine]
        [--only 65536,32,32 [--only 1,4096,4096 ...]]
"""
import argparse
import itertools
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import warnings

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
import softalign  # noqa: E402

PAIRS = [((32, 1024, 1024), (1024, 32, 1024)), ((1, 4096, 4096), (128, 32, 4096)),
         ((65536, 32, 32),), ((1024, 32, 32),)]  # the last two: the short pairs' kernels, for
# their times (65536: the fused kernel at t > 0; 1024: the log-space pair, B <= 1024)


def median_ms(fn, reps=20):
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


def kernels_us(fn):
    """Device time per kernel name (summed over one call), in microseconds."""
    fn()
    torch.cuda.synchronize()
    warnings.filterwarnings("ignore", message=".*Profiler clears events.*")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    out = defaultdict(float)
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            out[ev.name[:60]] += ev.time_range.elapsed_us()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--affine", action="store_true", help="the affine model (as --models affine)")
    ap.add_argument("--models", default="linear", help="gap models, comma-separated")
    ap.add_argument("--only", action="append", help="only the cases of these shapes, e.g. 65536,32,32")
    args = ap.parse_args()
    models = ["affine"] if args.affine else args.models.split(",")
    for model, pair in itertools.product(models, PAIRS):
        gaps = dict(gap_open=-1.0, gap_extend=-0.5) if model == "affine" else dict(gap_open=-1.0)
        for shape in pair:
            if args.only and ",".join(map(str, shape)) not in args.only:
                continue
            S = torch.randn(*shape, device="cuda")
            Sg = S.clone().requires_grad_(True)
            cells = S.numel()
            fwd = median_ms(lambda: softalign.smith_waterman(S, **gaps))

            def forward_backward():  # as benchmark.py: no gradient accumulation timed
                Sg.grad = None
                softalign.smith_waterman(Sg, **gaps).sum().backward()

            both = median_ms(forward_backward)
            print(f"{model:6} {str(shape):18} fwd {fwd:8.3f} ms {cells / fwd / 1e6:7.1f} GCUPS   "
                  f"fwd+bwd {both:8.3f} ms {cells / both / 1e6:7.1f} GCUPS", flush=True)
            for name, us in sorted(kernels_us(forward_backward).items(), key=lambda kv: -kv[1]):
                print(f"    {us:9.1f} us  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
