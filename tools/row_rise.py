#!/usr/bin/env python3
"""How far a row of the linear DP rises within a chunk of kW columns, in powers of two of
Z = exp(H / t): the headroom the scaled forward (ops/cuda/scaled.cuh) needs between two
renormalisations (each row's z starts a chunk in [1, 2) and overflows at 2^128, refusing its
item). Prints, per temperature, mode and chunk length, the largest rise and fall of
(H[i][j + kW] - H[i][j]) log2(e) / t over a random item (N(0, 1) scores, plus --shift).

    python3 tools/row_rise.py [--M 256] [--N 1024] [--gap -1] [--shift 0 0.3] [--t 0.5 1 2]
"""
import argparse
import math

import numpy as np


def linear_dp(S, gap, t, local):
    """H of SPEC's linear model (float64, anti-diagonal by anti-diagonal), (M + 1) x (N + 1)."""
    M, N = S.shape
    H = np.zeros((M + 1, N + 1))
    if not local:
        H[:, 0] = gap * np.arange(M + 1)
        H[0, :] = gap * np.arange(N + 1)
    for d in range(2, M + N + 1):
        i = np.arange(max(1, d - N), min(M, d - 1) + 1)
        j = d - i
        terms = [H[i - 1, j - 1] + S[i - 1, j - 1], H[i - 1, j] + gap, H[i, j - 1] + gap]
        if local:
            terms.append(np.zeros(len(i)))
        x = np.stack(terms)
        top = x.max(0)
        H[i, j] = top + t * np.log(np.exp((x - top) / t).sum(0))
    return H


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--M", type=int, default=256)
    ap.add_argument("--N", type=int, default=1024)
    ap.add_argument("--gap", type=float, default=-1.0)
    ap.add_argument("--shift", type=float, nargs="+", default=[0.0, 0.3])
    ap.add_argument("--t", type=float, nargs="+", default=[0.5, 1.0, 2.0])
    ap.add_argument("--chunks", type=int, nargs="+", default=[16, 32])
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    for t in args.t:
        for mode in ["local", "global"]:
            for shift in args.shift:
                S = rng.standard_normal((args.M, args.N)) + shift
                H = linear_dp(S, args.gap, t, mode == "local")
                cells = []
                for kW in args.chunks:
                    rise = (H[:, kW:] - H[:, :-kW]) * math.log2(math.e) / t
                    cells.append(f"kW {kW}: rise {rise.max():6.1f}, fall {rise.min():7.1f}")
                print(f"t {t:<4} {mode:6} shift {shift:<4} " + "; ".join(cells), flush=True)


if __name__ == "__main__":
    main()
