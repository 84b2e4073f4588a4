#!/usr/bin/env python3
"""The long pairs' forward without grad (linear, or --affine): the device time of its kernels per
call (the median of --reps profiled calls, each call's kernels summed), per shape, for the library
that SOFTALIGN_LIBRARY names. Run it once as is and once with SOFTALIGN_CUDA_LOG_SPACE=1 to set
the scaled forward against log space (striped_launch.cuh's choice); run it for two libraries to
compare them. A shape's warps (items x stripes of 32 rows) are printed beside it.

    SOFTALIGN_LIBRARY=build-cuda/libsoftalign.so python3 tools/long_forward_kernels.py \
        [--t 1.0] [--affine] [--reps 5] [B,M,N ...]
"""
import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
import softalign  # noqa: E402
from stripe_cost import kernels_us  # noqa: E402

SHAPES = ["1,4096,4096", "2,4096,4096", "4,4096,4096", "64,64,4096", "8,1024,1024",
          "16,1024,1024", "24,1024,1024", "32,1024,1024", "64,512,512", "32,256,1024",
          "8,8192,8192"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shapes", nargs="*", default=SHAPES)
    ap.add_argument("--t", type=float, default=1.0, help="temperature")
    ap.add_argument("--affine", action="store_true", help="affine gaps (open -1, extend -0.5)")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    softalign.load_library()
    for text in args.shapes:
        shape = tuple(int(x) for x in text.split(","))
        torch.manual_seed(0)
        S = torch.randn(*shape, device="cuda")
        gaps = dict(gap_open=-1.0, gap_extend=-0.5 if args.affine else None)
        call = lambda: softalign.smith_waterman(S, **gaps, temperature=args.t)  # noqa: E731
        us = statistics.median(sum(kernels_us(call).values()) for _ in range(args.reps))
        warps = shape[0] * -(-shape[1] // 32)
        print(f"{str(shape):18} warps {warps:5}  kernels {us:9.1f} us  "
              f"{S.numel() / us / 1e3:6.1f} GCUPS", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
