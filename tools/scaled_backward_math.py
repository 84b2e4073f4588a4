#!/usr/bin/env python3
"""notes/scaled-backward-plan.md's math, in float64 numpy, against the CPU backend's gradients:
the forward Z, the reverse B = dZtot / dZ, the posterior Z(i-1, j-1) E B / Ztot as d score / d S
and the expected gaps as d score / d g (linear, soft, local and global). No scaling: the values
stay small. Needs SOFTALIGN_LIBRARY (a CPU build).

    SOFTALIGN_LIBRARY=build/libsoftalign.so python3 tools/scaled_backward_math.py
"""
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
import softalign  # noqa: E402

def check(mode, M=7, N=9, t=0.7, g=-0.8, seed=0):
    rng = np.random.default_rng(seed)
    s = rng.normal(size=(M, N))
    E, G = np.exp(s / t), np.exp(g / t)
    local = mode == "local"
    Z = np.zeros((M + 1, N + 1))
    Z[0, :] = 1 if local else G ** np.arange(N + 1)
    Z[:, 0] = 1 if local else G ** np.arange(M + 1)
    for i in range(1, M + 1):
        for j in range(1, N + 1):
            Z[i, j] = (1 if local else 0) + E[i-1, j-1] * Z[i-1, j-1] + G * (Z[i-1, j] + Z[i, j-1])
    Ztot = 1 + Z[1:, 1:].sum() if local else Z[M, N]
    # B(i, j) = dZtot / dZ(i, j); global: row 0 and column 0 too (their values are gaps).
    B = np.zeros((M + 2, N + 2))
    for i in range(M, -1, -1):
        for j in range(N, -1, -1):
            if i == 0 or j == 0:  # local: constants (no B); global: cells reached by gaps
                if local:
                    continue
                one = 0.0
            else:  # the end's 1: every cell (local) or (m, n) (global)
                one = 1.0 if local else float((i, j) == (M, N))
            diag = E[i, j] * B[i+1, j+1] if i < M and j < N else 0.0
            B[i, j] = one + G * (B[i+1, j] + B[i, j+1]) + diag
    P = Z[:M, :N] * E * B[1:M+1, 1:N+1] / Ztot
    Zp = np.pad(Z, ((1, 0), (1, 0)))  # Zp[i+1, j+1] = Z(i, j), zero at index -1
    into = G * (Zp[:-1, 1:] + Zp[1:, :-1])  # gap moves into (i, j): from above and from the left
    into[0, 0] = 0
    if local:
        into[0, :] = into[:, 0] = 0
    dg = (into * B[:M+1, :N+1]).sum() / Ztot
    S = torch.tensor(s, requires_grad=True)
    gap = torch.tensor(g, dtype=torch.float64, requires_grad=True)
    score = softalign.smith_waterman(S[None], gap_open=gap, mode=mode, reduction="soft",
                                     temperature=t)
    score.sum().backward()
    errors = (abs(float(score.detach()) - t * np.log(Ztot)), np.abs(S.grad.numpy() - P).max(),
              abs(float(gap.grad) - dg))
    print(f"{mode:6} ({M}, {N}) t={t} g={g}: |score| {errors[0]:.1e}, |dS| {errors[1]:.1e}, "
          f"|dg| {errors[2]:.1e}")
    assert max(errors) < 1e-9, errors


for seed, (M, N, t, g) in enumerate([(7, 9, 0.7, -0.8), (1, 5, 1.0, -0.3), (12, 3, 0.25, -1.5)]):
    for mode in ("local", "global"):
        check(mode, M, N, t, g, seed)
