#!/usr/bin/env python3
"""The affine model's backward in probability space (notes/scaled-backward-plan.md, "Affine"),
in float64 numpy, against the CPU backend's gradients: the forward A, X, Y of
tools/affine_probability_math.py, the reverse (adjoints of the three states), the posterior
A Abar / Z* as d score / d S and the expected gap opens and extends as d score / d o and d e, for
local soft, local max and global. No scaling: the values stay small. Session 39; nothing in the
library uses it yet. Needs SOFTALIGN_LIBRARY (a CPU build).

With E = exp(s / t), O = exp(o / t), F = exp(e / t) and D = A + X + Y (the forward's cells):
    A(i, j) = E(i, j) (1 [local] + D(i-1, j-1))
    X(i, j) = O A(i-1, j) + F X(i-1, j)
    Y(i, j) = O (A(i, j-1) + X(i, j-1)) + F Y(i, j-1)
the adjoints Abar = dZ* / dA (and Xbar, Ybar), from (m, n) backwards, zero past the item:
    diag(i, j) = E(i+1, j+1) Abar(i+1, j+1)            (D(i, j) feeds A(i+1, j+1) alone)
    Abar(i, j) = endA + diag + O Xbar(i+1, j) + O Ybar(i, j+1)
    Xbar(i, j) = endD + diag + F Xbar(i+1, j) + O Ybar(i, j+1)
    Ybar(i, j) = endD + diag + F Ybar(i, j+1)
with the end's seeds endA, endD: local soft endA = 1 at every cell of the item, Z* = 1 + sum A;
local max endA = 1 at the argmax cell (ties: the first in row-major order, the empty alignment
first: no seed when max A <= 1), Z* = max A; global endA = endD = 1 at (m, n), Z* = D(m, n).
Then, every term a probability (at most 1):
    d score / d s(i, j) = A(i, j) Abar(i, j) / Z*
    d score / d o = sum O (A(i, j) Xbar(i+1, j) + (A + X)(i, j) Ybar(i, j+1)) / Z*
    d score / d e = sum F (X(i, j) Xbar(i+1, j) + Y(i, j) Ybar(i, j+1)) / Z*
the sums over every cell, row 0 and column 0 included (global: A(0, 0) = 1 opens column 0's X
and row 0's Y, which the same recurrences extend; local: every boundary state is 0). A lane of
the reverse would carry Abar, Xbar, Ybar of its row, take diag and Xbar from the row below (two
values, as the forward hands D and U down) and keep Ybar: two FMAs a state.

    SOFTALIGN_LIBRARY=build/libsoftalign.so python3 tools/affine_scaled_backward_math.py
"""
import math
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
import softalign  # noqa: E402
from affine_probability_math import forward  # noqa: E402  (the forward, checked there)


def end_seeds(A, X, Y, mode, reduction):
    """(Z*, endA, endD): the end's value and its seeds into the reverse, on the (M+1, N+1) grid."""
    endA, endD = np.zeros_like(A), np.zeros_like(A)
    if mode == "global":
        endA[-1, -1] = endD[-1, -1] = 1.0
        return A[-1, -1] + X[-1, -1] + Y[-1, -1], endA, endD
    inner = A[1:, 1:]
    if reduction == "soft":
        endA[1:, 1:] = 1.0
        return 1.0 + inner.sum(), endA, endD
    if inner.size == 0 or inner.max() <= 1.0:  # the empty alignment wins (ties included)
        return 1.0, endA, endD
    i, j = np.unravel_index(np.argmax(inner), inner.shape)  # the first maximum, row-major
    endA[i + 1, j + 1] = 1.0
    return inner[i, j], endA, endD


def reverse(s, A, X, Y, o, e, t, endA, endD):
    """The adjoints Abar, Xbar, Ybar on the (M+1, N+1) grid."""
    M, N = s.shape
    E, O, F = np.exp(s / t), math.exp(o / t), math.exp(e / t)
    Ab, Xb, Yb = (np.zeros((M + 2, N + 2)) for _ in range(3))
    for i in range(M, -1, -1):
        for j in range(N, -1, -1):
            diag = E[i, j] * Ab[i + 1, j + 1] if i < M and j < N else 0.0
            Ab[i, j] = endA[i, j] + diag + O * (Xb[i + 1, j] + Yb[i, j + 1])
            Xb[i, j] = endD[i, j] + diag + F * Xb[i + 1, j] + O * Yb[i, j + 1]
            Yb[i, j] = endD[i, j] + diag + F * Yb[i, j + 1]
    return Ab, Xb, Yb


def gradients(s, o, e, t, mode, reduction):
    """score, d score / d S, d o, d e from the probability-space forward and reverse."""
    A, X, Y = forward(s, o, e, t, mode == "local")
    Zs, endA, endD = end_seeds(A, X, Y, mode, reduction)
    Ab, Xb, Yb = reverse(s, A, X, Y, o, e, t, endA, endD)
    O, F = math.exp(o / t), math.exp(e / t)
    dS = A[1:, 1:] * Ab[1:-1, 1:-1] / Zs
    below, right = Xb[1:, :-1], Yb[:-1, 1:]  # Xbar(i+1, j), Ybar(i, j+1) on the (M+1, N+1) grid
    do = (O * (A * below + (A + X) * right)).sum() / Zs
    de = (F * (X * below + Y * right)).sum() / Zs
    return t * math.log(Zs), dS, do, de, de_from_spans(s, A, Ab, endA, Zs, dS, do, t, mode)


def de_from_spans(s, A, Ab, endA, Zs, dS, do, t, mode):
    """d score / d e without Y: the expected gap cells (X + Y) less the expected opens. Global: an
    alignment's gap cells are m + n - 2 #A. Local: rows and columns spanned less 2 #A, the span
    from where it starts (A's 1: E Abar / Z*) to where it ends (the end's seed: endA A / Z*)."""
    M, N = s.shape
    matches = dS.sum()
    if mode == "global":
        return M + N - 2 * matches - do
    i, j = np.meshgrid(np.arange(M + 1), np.arange(N + 1), indexing="ij")
    ends = endA * A / Zs
    starts = np.zeros_like(A)
    starts[1:, 1:] = np.exp(s / t) * Ab[1:-1, 1:-1] / Zs
    spans = ((i + j) * ends).sum() - ((i + j - 2) * starts).sum()
    return spans - 2 * matches - do


def check(mode, reduction, M, N, t, o, e, seed):
    rng = np.random.default_rng(seed)
    s = rng.normal(size=(M, N)) * 1.5
    score, dS, do, de, de_spans = gradients(s, o, e, t, mode, reduction)
    S = torch.tensor(s, requires_grad=True)
    op = torch.tensor(o, dtype=torch.float64, requires_grad=True)
    ex = torch.tensor(e, dtype=torch.float64, requires_grad=True)
    want = softalign.smith_waterman(S[None], op, gap_extend=ex, temperature=t, mode=mode, reduction=reduction)
    want.sum().backward()
    errors = (abs(float(want.detach()) - score), np.abs(S.grad.numpy() - dS).max(),
              abs(float(op.grad) - do), abs(float(ex.grad) - de), abs(float(ex.grad) - de_spans))
    assert dS.min() >= 0 and dS.max() <= 1 + 1e-12, (dS.min(), dS.max())
    return errors


def main():
    cases = [(7, 9, 0.7, -1.0, -0.5), (1, 5, 1.0, -0.3, -0.2), (12, 3, 0.25, -1.5, -0.4),
             (6, 6, 2.0, -0.2, -1.5), (9, 11, 0.5, 0.3, -0.1)]  # the last: a paying gap open
    worst = 0.0
    count = 0
    for seed, (M, N, t, o, e) in enumerate(cases):
        for mode, reduction in (("local", "soft"), ("local", "max"), ("global", "max")):
            errors = check(mode, reduction, M, N, t, o, e, seed)
            print(f"{mode:6} {reduction:4} ({M}, {N}) t={t} o={o} e={e}: |score| {errors[0]:.1e}, "
                  f"|dS| {errors[1]:.1e}, |do| {errors[2]:.1e}, |de| {errors[3]:.1e} "
                  f"(from spans {errors[4]:.1e})")
            assert max(errors) < 1e-9, errors
            worst = max(worst, max(errors))
            count += 1
    print(f"{count} items: the probability-space reverse gives the CPU backend's score and "
          f"gradients (float64), largest difference {worst:.1e}")


if __name__ == "__main__":
    main()
