#!/usr/bin/env python3
"""The affine model in probability space (notes/scaled-forward-plan.md, "Affine"), checked against
the CPU backend, and the range fact a chunked kernel would rest on. Session 33; nothing in the
library uses it yet.

With Z = exp(V / t), E = exp(s / t), O = exp(o / t), F = exp(e / t), SPEC's affine cells are
    A = E (1 [local] + D_diag)      D = A + X + Y       (the sum the row below takes diagonally)
    X = U_up                        U = O A + F X       (what the row below takes from above)
    Y = L_left                      L = O (A + X) + F Y (what the next column takes)
so a lane would hand two values down (D, U) and keep one (L): one exp2 a cell (E) and a few
FMAs, where the log-space cell takes six exp2s and three log2s. Boundaries: local, every state
of row 0 and column 0 is 0 (exp(-inf)); global, A(0, 0) = 1, X(i, 0) = O F^(i-1), Y(0, j) =
O F^(j-1), the rest 0, and A drops the 1. Ends: local max t ln max(1, A), soft t ln(1 + sum A);
global t ln(A + X + Y) at (m, n).

Range: Y(j + 1) = O (A(j) + X(j)) + F Y(j) >= min(O, F) (A + X + Y)(j), so a row's largest state
falls by at most min(O, F) a column, as a linear row falls by at most G: scaled.cuh's gap_bound
would hold for max(|o|, |e|) log2(e) / t. This script checks that on random items (float64,
every row, every column) and prints the largest fall against the bound.

    SOFTALIGN_LIBRARY=build/libsoftalign.so python3 tools/affine_probability_math.py
"""
import math
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
import softalign  # noqa: E402


def forward(s, o, e, t, local):
    """Z tables A, X, Y of shape (M + 1, N + 1), float64."""
    M, N = s.shape
    E, O, F = np.exp(s / t), math.exp(o / t), math.exp(e / t)
    A, X, Y = (np.zeros((M + 1, N + 1)) for _ in range(3))
    if not local:
        A[0, 0] = 1.0
        X[1:, 0] = O * F ** np.arange(M)
        Y[0, 1:] = O * F ** np.arange(N)
    for i in range(1, M + 1):
        for j in range(1, N + 1):
            D = A[i - 1, j - 1] + X[i - 1, j - 1] + Y[i - 1, j - 1]
            A[i, j] = E[i - 1, j - 1] * ((1.0 if local else 0.0) + D)
            X[i, j] = O * A[i - 1, j] + F * X[i - 1, j]
            Y[i, j] = O * (A[i, j - 1] + X[i, j - 1]) + F * Y[i, j - 1]
    return A, X, Y


def score(A, X, Y, t, mode, reduction):
    if mode == "global":
        return t * math.log(A[-1, -1] + X[-1, -1] + Y[-1, -1])
    inner = A[1:, 1:]
    if reduction == "max":
        return t * math.log(max(1.0, inner.max()))
    return t * math.log(1.0 + inner.sum())


def largest_fall(A, X, Y, local):
    """The largest factor by which a row's largest state falls from one column to the next, in
    log2 (rows 1.., columns 1..; global rows from column 0)."""
    top = np.maximum(np.maximum(A, X), Y)[1:, (0 if not local else 1):]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.log2(top[:, 1:] / top[:, :-1])
    ratio = ratio[np.isfinite(ratio)]
    return -ratio.min() if ratio.size else 0.0


def main():
    rng = np.random.default_rng(0)
    worst = 0.0
    cases = 0
    for mode in ("local", "global"):
        for reduction in ("max", "soft") if mode == "local" else ("max",):
            for t in (0.25, 1.0, 4.0):
                for o, e in ((-1.0, -0.5), (-3.0, -0.2), (-0.3, -1.5)):
                    M, N = rng.integers(1, 12, size=2)
                    s = rng.normal(size=(M, N)) * 2
                    A, X, Y = forward(s, o, e, t, mode == "local")
                    got = score(A, X, Y, t, mode, reduction)
                    want = softalign.smith_waterman(
                        torch.tensor(s)[None], o, gap_extend=e, temperature=t, mode=mode,
                        reduction=reduction).item()
                    assert abs(got - want) <= 1e-9 * max(1.0, abs(want)), (mode, reduction, t, o, e, got, want)
                    bound = max(abs(o), abs(e)) * math.log2(math.e) / t
                    fall = largest_fall(A, X, Y, mode == "local")
                    assert fall <= bound + 1e-9, (mode, t, o, e, fall, bound)
                    worst = max(worst, fall / bound)
                    cases += 1
    print(f"{cases} items: probability-space scores equal the CPU backend's (float64, 1e-9); a row's "
          f"largest state fell by at most {worst:.3f} of max(|o|, |e|) log2(e) / t a column")


if __name__ == "__main__":
    main()
