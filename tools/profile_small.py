#!/usr/bin/env python3
"""Where the time of one small call goes (host and device): per-call wall times (the forward
and backward apart, and PyTorch's own floor for any differentiable op), then torch.profiler over
a few forward + backward calls of a (B, M, N) case.

    python3 tools/profile_small.py [B M N] [--affine]
"""
import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.append(str(Path(__file__).resolve().parents[1] / "python"))  # an installed softalign first
import softalign  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("shape", type=int, nargs="*", default=[16, 32, 32])
parser.add_argument("--affine", action="store_true")
args = parser.parse_args()
S = torch.randn(*args.shape, device="cuda", requires_grad=True)
gaps = dict(gap_open=-1.0, gap_extend=-0.5) if args.affine else dict(gap_open=-1.0)
for _ in range(5):
    softalign.smith_waterman(S, **gaps).sum().backward()
torch.cuda.synchronize()


def per_call(fn, reps=200):
    """Wall time per call in microseconds, the device drained at the end."""
    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / reps * 1e6


D = S.detach()
score = softalign.smith_waterman(S, **gaps)
print(f"forward, no grad:            {per_call(lambda: softalign.smith_waterman(D, **gaps)):8.1f} us")
print(f"forward, grad:               {per_call(lambda: softalign.smith_waterman(S, **gaps)):8.1f} us")
pens = [torch.tensor(-1.0, device="cuda")] + ([torch.tensor(-0.5, device="cuda")] if args.affine else [None])
print(f"forward-backward op:         "
      f"{per_call(lambda: torch.ops.softalign._smith_waterman_forward_backward(D, *pens, 1.0, None, None, 'local', 'max')):8.1f} us")
print(f"alignment op:                {per_call(lambda: softalign.smith_waterman_alignment(D, **gaps)):8.1f} us")
def fwd_bwd():
    S.grad = None
    softalign.smith_waterman(S, **gaps).sum().backward()
print(f"forward + backward:          {per_call(fwd_bwd):8.1f} us")


def split(reps=200):
    """The medians of one eager forward + backward's parts, in microseconds: the forward, the
    sum, the backward's host time, then the wait for the device."""
    parts = []
    for _ in range(reps):
        S.grad = None
        t0 = time.perf_counter()
        score = softalign.smith_waterman(S, **gaps)
        t1 = time.perf_counter()
        total = score.sum()
        t2 = time.perf_counter()
        total.backward()
        t3 = time.perf_counter()
        torch.cuda.synchronize()
        parts.append((t1 - t0, t2 - t1, t3 - t2, time.perf_counter() - t3))
    return [sorted(p[k] for p in parts)[reps // 2] * 1e6 for k in range(4)]


print("  its parts (medians): forward {:.1f}, sum {:.1f}, backward (host) {:.1f}, "
      "synchronize {:.1f} us".format(*split()))
# PyTorch's own floor for a forward + backward through autograd on this machine: one elementwise
# op, its sum, and backward (the engine runs CUDA backward work on a thread of its own).
X = torch.randn(*args.shape, device="cuda", requires_grad=True)


def torch_floor():
    X.grad = None
    X.exp().sum().backward()


print(f"torch floor (exp, sum, backward): {per_call(torch_floor):8.1f} us")
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                        torch.profiler.ProfilerActivity.CUDA]) as prof:
    for _ in range(10):
        S.grad = None
        softalign.smith_waterman(S, **gaps).sum().backward()
    torch.cuda.synchronize()
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
print(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=12))
