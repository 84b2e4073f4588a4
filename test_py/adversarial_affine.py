"""Adversarial problems for the affine probability-space forward (docs/design.md, "Refusal
rules"): each generator aims at one way a chunked, per-row-scaled sweep can lose an item's value
without refusing it. 32 items a problem, random lengths, mode, reduction and temperature.

    ordinary  N(0, sigma) scores, a planted diagonal, gaps within the gap rule's bound or past it
    negrows   rows of very negative scores (E tiny or flushed to 0: a row's only way in)
    vchain    a vertical-gap chain whose X stays ~2^-130 of the row's D (rule vgap)
    gapruns   diagonals joined by long gaps, extend much cheaper than open
    paying    penalties that pay (o > 0 or e > 0): values rise along every row
    temps     extreme temperatures (0.01 .. 1e30) and score scales
    range     s log2(e) / t near exp2's limits (-135 .. 135)
    special   -inf, +inf and NaN scores and penalties
    ringjump  (items of several stripes) a stripe's first row far above the row over it
"""
import numpy as np

LOG2E = 1.4426950408889634


GENERATORS = ("ordinary", "negrows", "vchain", "gapruns", "paying", "temps", "range", "special")
# Items of several stripes also take "ringjump": a stripe's first row far above the row over it
# (the last of the stripe above), which only the ring's rule loses sees where m is that row.
STACKED_GENERATORS = GENERATORS + ("ringjump",)


def _diag(rng, S, t, lo=1, hi=30):
    B, M, N = S.shape
    for b in range(B):
        if rng.random() < 0.5:
            L = int(rng.integers(1, min(M, N) + 1))
            i0, j0 = int(rng.integers(0, M - L + 1)), int(rng.integers(0, N - L + 1))
            S[b, np.arange(i0, i0 + L), np.arange(j0, j0 + L)] = float(rng.uniform(lo, hi)) * t


def _gaps(rng, B, t, gb):
    """o, e per item with |o|, |e| log2(e) / t mostly within gb (some past it)."""
    o = -rng.uniform(0, 1.1, B) * gb * t / LOG2E
    e = o * rng.choice([0.02, 0.1, 0.5, 1.0, 1.5], B)
    return o, e


def problem(rng, gen, rows, N_max=120, rows_min=1, gap_scale=1.0):
    """(S, o, e, t, mode, reduction, m, n) for generator `gen`, rows_min <= M <= rows (stacked
    items: rows_min 33 and rows up to ~200). gap_scale: the gaps' bound gb (3, 12, 24: a quarter,
    once and twice gap_bound(8) = 12) times this (0.5 for kW = 16's bound 6)."""
    B = 32
    M, N = int(rng.integers(rows_min, rows + 1)), int(rng.integers(1, N_max + 1))
    mode, reduction = str(rng.choice(["local", "global"])), str(rng.choice(["max", "soft"]))
    if mode == "global":
        reduction = "max"  # the only reduction of a global alignment (one end cell)
    t = float(rng.choice([0.1, 0.25, 0.5, 1.0, 3.0]))
    gb = float(rng.choice([3, 12, 24])) * gap_scale
    o, e = _gaps(rng, B, t, gb)
    S = rng.normal(0, float(rng.choice([0.5, 1, 3])), (B, M, N)) + float(rng.choice([-2, 0, 0.5]))
    if gen == "ordinary":
        _diag(rng, S, t)
    elif gen == "negrows":  # rows of very negative scores (E tiny or flushed)
        _diag(rng, S, t)
        x = rng.uniform(-135, -30, (B, M, 1)) * t / LOG2E
        pick = rng.random((B, M, 1)) < 0.5
        S = np.where(pick, x + rng.normal(0, 0.01, (B, M, N)) * t, S)
        if rng.random() < 0.5:
            t = 0.1
            S = np.where(pick, -10.0, S)
            o = np.full(B, -float(rng.choice([1.0, 0.5, 0.8]))) + 0 * o
    elif gen == "vchain":  # Y leads a row, its U is ~2^-130 of it, the rows below let only X down
        S[:] = rng.uniform(-125, -100, (B, M, N)) * t / LOG2E
        for b in range(B):
            if M < 3 or N < 4:
                continue
            i0 = int(rng.integers(0, M - 2))
            j1 = int(rng.integers(0, N - 3))
            jd = int(rng.integers(j1 + 1, N - 1))  # the column the X chain takes
            i1 = int(rng.integers(i0 + 2, M))
            if i0 > 0:
                S[b, i0 - 1, j1 - 1 if j1 > 0 else 0] = float(rng.uniform(20, 60)) * t / LOG2E
            S[b, i0, j1] = float(rng.uniform(40, 90)) * t / LOG2E
            S[b, i0, jd] = float(rng.uniform(-70, 0)) * t / LOG2E
            S[b, i1, min(jd + 1, N - 1)] = float(rng.uniform(60, 110)) * t / LOG2E
        o = -rng.uniform(1, 8, B) * t / LOG2E
        e = -rng.uniform(0.05, 1, B) * t / LOG2E
    elif gen == "gapruns":  # diagonals joined by long gaps, e much less negative than o
        S = rng.normal(-1, 0.5, (B, M, N)) * t
        for b in range(B):
            for _ in range(int(rng.integers(1, 4))):
                L = int(rng.integers(1, max(2, min(M, N) // 2) + 1))
                L = min(L, M, N)
                i0, j0 = int(rng.integers(0, M - L + 1)), int(rng.integers(0, N - L + 1))
                S[b, np.arange(i0, i0 + L), np.arange(j0, j0 + L)] = float(rng.uniform(2, 20)) * t
        o = -rng.uniform(0.5, 1.0, B) * gb * t / LOG2E
        e = o * rng.uniform(0.001, 0.1, B)
    elif gen == "paying":  # o > 0 or e > 0
        _diag(rng, S, t)
        o = rng.uniform(-1, 1, B) * gb * t / LOG2E
        e = rng.uniform(-1, 1, B) * gb * t / LOG2E
        if rng.random() < 0.3:
            S = S - float(rng.uniform(5, 80)) * t
    elif gen == "temps":
        t = float(rng.choice([0.01, 0.02, 0.05, 10.0, 30.0, 100.0, 1e4, 1e30]))
        S = S * float(rng.choice([0.01, 1, 10, 100]))
        _diag(rng, S, t)
        o, e = _gaps(rng, B, t, gb)
        if rng.random() < 0.5:
            o, e = o * 0 - 1.0, e * 0 - 0.5
    elif gen == "range":  # s log2(e) / t near exp2's limits
        x = np.where(rng.random((B, M, N)) < 0.5, rng.uniform(-135, -110, (B, M, N)),
                     rng.uniform(-20, 20, (B, M, N)))
        hot = rng.random((B, M, N)) < float(rng.choice([0.0, 0.02, 0.1]))
        x = np.where(hot, rng.uniform(60, 135, (B, M, N)), x)
        S = x * t / LOG2E
    elif gen == "ringjump":  # row i0 + 1 (a stripe's first) 2^40 .. 2^125 above row i0 (the ring)
        bound = 12 * gap_scale  # gap_bound(kW)
        o = -rng.uniform(0.7, 1.0, B) * bound * t / LOG2E
        e = o * rng.uniform(0.7, 1.0, B)
        S = rng.normal(0, 1, (B, M, N)) * t
        first_rows = np.zeros(B, int)
        for b in range(B):
            if M <= 32:
                continue
            i0 = 32 * int(rng.integers(1, (M - 1) // 32 + 1))
            first_rows[b] = i0 + 1
            if rng.random() < 0.5:  # row i0 low, row i0 + 1 rising at some columns
                S[b, i0 - 1, :] = float(rng.uniform(-120, -40)) * t / LOG2E
                cols = rng.integers(0, N, int(rng.integers(1, 5)))
            else:  # rows 1 .. i0 falling by min(O, F) a column from column c on, row i0 + 1
                c = int(rng.integers(0, N))  # rising before c and after (the ring's D subnormal)
                S[b, :i0, c:] = rng.uniform(-40, -15, (i0, N - c)) * t / LOG2E
                cols = np.concatenate([[max(0, c - int(rng.integers(1, 9)))],
                                       c + rng.integers(0, 20, int(rng.integers(1, 4)))])
                cols = np.minimum(cols, N - 1)
            S[b, i0, cols] = rng.uniform(40, 125, len(cols)) * t / LOG2E
    elif gen == "special":
        _diag(rng, S, t)
        for val in (-np.inf, np.inf, np.nan):
            S = np.where(rng.random((B, M, N)) < float(rng.choice([0.0, 0.01, 0.1])), val, S)
        for arr in (o, e):
            arr[rng.random(B) < 0.1] = rng.choice([-np.inf, np.inf, np.nan])
    m, n = rng.integers(0, M + 1, B), rng.integers(0, N + 1, B)
    if gen == "ringjump":  # half the items end at the jumping row: only lane 0 of its stripe
        m = np.where((first_rows > 0) & (rng.random(B) < 0.5), first_rows, m)
    m[0], n[0] = M, N
    return S, o, e, t, mode, reduction, m, n
