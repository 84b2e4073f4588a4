#!/usr/bin/env python3
"""One benchmark case, run a few times, for a profiler (ncu, nsys) to look at.

    python3 tools/profile_case.py B M N [--affine] [--backward] [--reps 3]
        [--mode global] [--reduction soft] [--lengths]   (random lengths in 0 .. M, 0 .. N)
"""
import argparse
import sys
from pathlib import Path

import torch

sys.path.append(str(Path(__file__).resolve().parents[1] / "python"))  # an installed softalign first
import softalign  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("shape", type=int, nargs=3)
parser.add_argument("--affine", action="store_true")
parser.add_argument("--backward", action="store_true")
parser.add_argument("--reps", type=int, default=3)
parser.add_argument("--mode", default="local", choices=["local", "global"])
parser.add_argument("--reduction", default="max", choices=["max", "soft"])
parser.add_argument("--lengths", action="store_true")
args = parser.parse_args()

S = torch.randn(*args.shape, device="cuda", requires_grad=args.backward)
gaps = dict(gap_open=-1.0, gap_extend=-0.5) if args.affine else dict(gap_open=-1.0)
kwargs = dict(mode=args.mode, reduction=args.reduction, **gaps)
if args.lengths:
    B, M, N = args.shape
    kwargs.update(lengths_a=torch.randint(0, M + 1, (B,), device="cuda"),
                  lengths_b=torch.randint(0, N + 1, (B,), device="cuda"))
for _ in range(args.reps):
    score = softalign.smith_waterman(S, **kwargs)
    if args.backward:
        score.sum().backward()
torch.cuda.synchronize()
print("ok", tuple(args.shape), "affine" if args.affine else "linear",
      "fwd+bwd" if args.backward else "fwd", float(score.sum()))
