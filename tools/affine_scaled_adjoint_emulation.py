#!/usr/bin/env python3
"""The float32 emulation of ops/cuda/scaled_affine_adjoint.cuh (built in session 40 for local
ends, session 41 for global): the fused affine forward + reverse in probability space for items
one stripe tall (M, N <= 32), the design of notes/scaled-backward-plan.md, "Affine: the math and
a design (session 39)", on tools/affine_scaled_emulation.py's forward (G = 16, R = 2, kW = 8,
variant shared, its eight refusal rules) and tools/affine_scaled_backward_math.py's math.

Forward: affine_scaled_emulation.run(..., keep=) keeps every cell's A, X (and, for checking, Y
and D) in its row's scale of the chunk that computed it, E, and each row's k of each chunk.
Reverse (cell by cell, vectorised over items; the scales are the kernel's, the lane/shuffle
order is not emulated): R_A, R_X, R_Y = (Abar, Xbar, Ybar) 2^k / Z* in the forward's own row
scales, so z R is a probability; from the later cell (i', j') (chunk c') to the earlier (i, j)
(chunk c) an adjoint takes the forward's factors in reverse: the factor between the rows at c'
(factor(), clamped as the forward's), then the earlier row's own change of scale from c to c'
(2^(k_i(c) - k_i(c')), to subnormals); E R, O R and F R are formed BEFORE either factor (the
linear kernel's "er" and "gback" lessons: a factor or a 2^-e first can flush R), and every
adjoint is masked outside the item ("mask").
    diag = E(i+1, j+1) R_A(i+1, j+1);  xd = R_X(i+1, j);  yr = R_Y(i, j+1)   (each converted)
    R_A = seedA + diag + O xd + O yr;  R_X = seedD + diag + F xd + O yr;  R_Y = seedD + diag + F yr
Seeds: local soft seedA = 2^(k - K*) / z* on every cell (z* 2^K* = 1 + sum A, the lanes' totals
merged as the linear kernel merges them); local max 1 / z_A at the argmax (first row-major from
the kept A's; none where max A <= 1); global seedA = seedD = 1 / z_D(m, n).
Gradients at grad 1: d S = z_A R_A; d o = sum z_A O xd + (z_A + z_X) O yr; d e either direct
(needs Y kept: sum z_X F xd + z_Y F yr, "de_direct") or from spans without Y ("de_spans", the
design's choice: local sum (i + j) ends - (i + j - 2) starts - 2 sum dS - d o, starts = E 2^-k R_A,
ends = z_A seedA; global m + n - 2 sum dS - d o). Global boundary (row 0, column 0), as
"runs": a column-0 run ending at row i leaves by the diagonal (z_X(i, 0) diag: 1 open, i - 1
extends) or turns right (z_X(i, 0) O yr: 2 opens, i - 1 extends); a row-0 run ending at column
j - 1 is d S(1, j), j >= 2 (1 open, j - 2 extends). Sums per lane (16), merged by a tree.

Hazards the fuzz found (each with a switch that brings it back):
  dead     (--no-dead-mask) local: X and Y of row m or column n reach no A inside the item, so
           the forward never reads them and no rule bounds them; they can be inf (row 10's U
           in k 118 times the factor 2^34 to row 11 = m, its row rising 2^94 in a chunk), and
           (z_A + z_X) O yr, z_X F xd with the adjoint 0 made NaN d o, d e (21 wrong of 34,094
           taken, seed 4, plain/ordinary/gapruns/paying). Now zeroed there. Global has its own:
           z_A + z_X of the last column overflowed (3.1e38 + 1.3e38 at (16, 5), n = 5: D there
           is dead, only A(i + 1, n + 1) outside reads it) times O yr = 0 (seed 10, 1 wrong of
           46,149 taken); Y of column n above row m is dead too. So every edge's term is taken
           only where its head is inside (xd terms i < m, yr terms j < n: a select each) and
           z_A O yr + z_X O yr apart (one product more a cell than (z_A + z_X) O yr).
  tie      (--no-tie) local max: the float32 A's of two cells within their rounding of each
           other seed a different argmax than float64 (d S a 1 at the wrong cell; t = 1e30,
           generator temps, 11 wrong). Rule "tie": refuse where another cell's A is within
           2^-20 of the largest (a kernel: a second max a lane). Any float32 max has it.
  merge    local soft: two lanes' totals near 2^127.5 at top 0 summed to inf in the linear
           kernel's merge (which refuses that; the affine forward merges in log space), so every
           seed was 0 (rise, seed 12, 1 wrong of 65,978). Each lane's total is now first split
           into a mantissa in [1, 2) and its exponent (LANE_NORMALISE): z* in [1, 33).
  order    (--factor-first) the factors before E R, O R, F R (the linear kernel's "er" and
           "gback" traps): 34 wrong of 16,746 taken (seed 7); weight first: 0 of 17,083.
Fuzz (float32, every taken item's score, d S, d o, d e at 2e-4 + 2e-4 |want|, NaN a miss; the
tie rule on), the final code (all fixes above), all of affine_scaled_emulation's generators,
plain and rise unless said: seed 13 (300 s) 32,278 taken, 0 wrong; seed 12 (paying, rise,
gapruns, ordinary, 300 s) 45,587, 0; seed 14 (d e direct, 240 s) 25,468, 0; seed 15 (G 32 R 1,
240 s) 24,332, 0; seed 10 (420 s, before the merge fix) 45,591, 0. notes/scaled-backward-plan.md
has the rest.

Modes: "f64" (no float32: the float64 DP of affine_probability_math with synthetic per-row chunk
scales k = floor(log2 D) at each chunk's start, the same reverse in exact arithmetic: checks the
structure, against the math file to ~1e-12) and "f32" (the forward emulation's float32 cells and
k, the reverse in float32 with f32_intrinsics' rounding).

    SOFTALIGN_LIBRARY=build/libsoftalign.so PYTHONPATH=python python3 \\
        tools/affine_scaled_adjoint_emulation.py --check64
    SOFTALIGN_LIBRARY=build/libsoftalign.so PYTHONPATH=python python3 \\
        tools/affine_scaled_adjoint_emulation.py --seconds 300 --seed 0 [--gens ordinary,...]
"""
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import affine_scaled_emulation as fwd  # noqa: E402
from f32_intrinsics import (F, add, ex2, factor, mul, pow2_to_subnormal,  # noqa: E402
                            scale_down)

LOG2E = fwd.LOG2E
ENDS = (("local", "soft"), ("local", "max"), ("global", "max"))
# Rule "tie" (local max): another cell's A within 2^-TIE_BITS of the largest (the float32
# forward's A carry a few 2^-24 each: the argmax, and so d S, may be another cell than float64's)
TIE_RULE, TIE_BITS = True, 20
DEAD_MASK = True
# False (the kernel since session 42, 8917b97): d o's edge terms without the selects on their
# heads (i < m, j < n): the adjoints there are 0 already, z_A finite inside a taken item, and z_X
# masked where dead (local: row m and column n; global: column n, as the kernel masks it)
EDGE_SELECTS = False
LANE_NORMALISE = True  # False: the lanes' totals merged as they are (can overflow: above)
FACTOR_FIRST = False  # True: the factors before E, O, F (the linear kernel's old order; a check)


class Arith32:
    """float32, one rounding an operation (f32_intrinsics)."""
    dtype = F
    mul = staticmethod(mul)
    add = staticmethod(add)
    factor = staticmethod(factor)  # between rows at one chunk: clamped as the forward's
    back = staticmethod(pow2_to_subnormal)  # a row's own change of scale between chunks

    @staticmethod
    def div(a, b):
        with np.errstate(all="ignore"):
            return (F(a) / np.asarray(b, F)).astype(F)


class Arith64:
    """float64, exact powers of two (the structure check)."""
    dtype = np.float64
    mul = staticmethod(lambda a, b: np.asarray(a, np.float64) * b)
    add = staticmethod(lambda a, b: np.asarray(a, np.float64) + b)
    factor = staticmethod(lambda e: np.ldexp(1.0, np.asarray(e, np.int64)))
    back = factor
    div = staticmethod(lambda a, b: a / np.asarray(b, np.float64))


def chunk_of(i, j, R, kW):
    """The chunk that computes cell (i, j), i >= 1, j >= 0: lane (i - 1) // R at step j + lane."""
    return (j + (i - 1) // R) // kW


def reverse(P, krow, m, n, O, Fe, mode, seedA, seedD, ar, G, R, kW):
    """P: planes A, X, Y, E (B, MM + 1, N + 1) in each cell's scale; krow (C, B, MM + 1) each
    row's k at each chunk. Returns (dS (B, MM, N), do, de_direct, de_spans, sum dS) per item, in
    ar's dtype."""
    dt = ar.dtype
    B, MM1, N1 = P["A"].shape
    MM, N = MM1 - 1, N1 - 1
    C = krow.shape[0]
    local = mode == "local"

    def pad(x, fill):
        y = np.full((B, MM + 2, N + 2), fill, dt)
        y[:, :MM + 1, :N + 1] = x
        return y
    zA, zX, zY, E = pad(P["A"], 0), pad(P["X"], 0), pad(P["Y"], 0), pad(P["E"], 1)
    kr = np.zeros((C, B, MM + 2), np.int64)
    kr[:, :, :MM + 1] = krow
    RA, RX, RY = (np.zeros((B, MM + 2, N + 2), dt) for _ in range(3))
    dS = np.zeros((B, MM + 1, N + 1), dt)
    lanes = lambda: np.zeros((B, G), dt)  # noqa: E731
    do_l, de_l, sp_l, ds_l = lanes(), lanes(), lanes(), lanes()
    O, Fe = np.asarray(O, dt), np.asarray(Fe, dt)
    zero = np.zeros(B, dt)

    def conv(w, r, f2, f1):
        """w R (E, O or F times an adjoint) into the earlier cell's scale: the weight first, then
        the factors (FACTOR_FIRST: the traps of scaled_adjoint_emulation's "er" and "gback")."""
        if FACTOR_FIRST:
            return ar.mul(ar.mul(ar.mul(r, f2), f1), w)
        return ar.mul(ar.mul(ar.mul(w, r), f2), f1)

    def k_at(c, i):
        return kr[min(c, C - 1), :, i]

    for i in range(MM, 0, -1):
        lane = (i - 1) // R
        for j in range(N, -1, -1):
            c0 = chunk_of(i, j, R, kW)
            row_in = i <= m
            ins = row_in & (j >= 1) & (j <= n)
            # from (i + 1, j + 1): E R_A, the factor between rows at its chunk, row i's own change
            below_in = (i + 1 <= m) & (j + 1 <= n)
            if i + 1 <= MM and j + 1 <= N:
                c2 = chunk_of(i + 1, j + 1, R, kW)
                f2 = ar.factor(k_at(c2, i) - k_at(c2, i + 1))
                f1 = ar.back(k_at(c0, i) - k_at(c2, i))
                diag = conv(E[:, i + 1, j + 1], RA[:, i + 1, j + 1], f2, f1)
                diag = np.where(below_in, diag, zero)
            else:
                diag = zero
            # from (i + 1, j): R_X
            if i + 1 <= MM and j >= 1:
                c3 = chunk_of(i + 1, j, R, kW)
                f2 = ar.factor(k_at(c3, i) - k_at(c3, i + 1))
                f1 = ar.back(k_at(c0, i) - k_at(c3, i))
                xin = (i + 1 <= m) & (j <= n)
                Oxd = np.where(xin, conv(O, RX[:, i + 1, j], f2, f1), zero)
                Fxd = np.where(xin, conv(Fe, RX[:, i + 1, j], f2, f1), zero)
            else:
                Oxd = Fxd = zero
            # from (i, j + 1): R_Y, row i's own change of scale
            if j + 1 <= N:
                c4 = chunk_of(i, j + 1, R, kW)
                f1 = ar.back(k_at(c0, i) - k_at(c4, i))
                yin = row_in & (j + 1 <= n)
                Oyr = np.where(yin, conv(O, RY[:, i, j + 1], 1.0, f1), zero)
                Fyr = np.where(yin, conv(Fe, RY[:, i, j + 1], 1.0, f1), zero)
            else:
                Oyr = Fyr = zero
            if j == 0:  # column 0 (global: X(i, 0) = O F^(i - 1); local: 0): the run's ends
                if not local:
                    x0 = zX[:, i, 0]
                    p_diag = np.where(row_in, ar.mul(x0, diag), zero)
                    p_turn = np.where(row_in, ar.mul(x0, Oyr), zero)
                    do_l[:, lane] = ar.add(ar.add(do_l[:, lane], p_diag), ar.mul(p_turn, 2.0))
                    de_l[:, lane] = ar.add(de_l[:, lane],
                                           ar.mul(ar.add(p_diag, p_turn), float(i - 1)))
                continue
            sA, sD = seedA[:, i, j], seedD[:, i, j]
            ra = ar.add(ar.add(ar.add(sA, diag), Oxd), Oyr)
            rx = ar.add(ar.add(ar.add(sD, diag), Fxd), Oyr)
            ry = ar.add(ar.add(sD, diag), Fyr)
            RA[:, i, j] = np.where(ins, ra, zero)
            RX[:, i, j] = np.where(ins, rx, zero)
            RY[:, i, j] = np.where(ins, ry, zero)
            a, x, y = zA[:, i, j], zX[:, i, j], zY[:, i, j]
            if local and DEAD_MASK:  # X, Y of row m or column n reach no A inside: dead, and
                dead = (i == m) | (j == n)  # the forward may have left them inf (its U times
                x = np.where(dead, zero, x)  # a factor past float: never read in the forward)
                y = np.where(dead, zero, y)
            d = np.where(ins, ar.mul(a, RA[:, i, j]), zero)
            dS[:, i, j] = d
            if DEAD_MASK:  # an edge's term only where its head is inside (i < m, j < n), and
                # A and X times O yr apart: z_A + z_X itself may overflow (global, seed 10)
                down, right = i < m, j < n
                if EDGE_SELECTS:
                    t_o = ar.add(np.where(down, ar.mul(a, Oxd), zero),
                                 np.where(right, ar.add(ar.mul(a, Oyr), ar.mul(x, Oyr)), zero))
                else:  # z_X of column n masked, as the kernel does, and no other select
                    x_o = np.where(right, x, zero)
                    t_o = ar.add(ar.add(ar.mul(x_o, Oyr), ar.mul(a, Oyr)), ar.mul(a, Oxd))
                t_e = ar.add(np.where(down, ar.mul(x, Fxd), zero),
                             np.where(right, ar.mul(y, Fyr), zero))
            else:
                t_o = ar.add(ar.mul(a, Oxd), ar.mul(ar.add(a, x), Oyr))
                t_e = ar.add(ar.mul(x, Fxd), ar.mul(y, Fyr))
            if local:  # spans: ends z_A seedA at (i + j), starts E 2^-k R_A at (i + j - 2)
                k_ij = k_at(c0, i)
                start = ar.mul(ar.mul(E[:, i, j], RA[:, i, j]), ar.back(-k_ij))
                end = ar.mul(a, sA)
                sp = ar.add(ar.mul(end, float(i + j)), -ar.mul(start, float(i + j - 2)))
            else:  # row 0's runs: d S(1, j), j >= 2
                sp = zero
                if i == 1 and j >= 2:
                    t_o = ar.add(t_o, d)
                    t_e = ar.add(t_e, ar.mul(d, float(j - 2)))
            do_l[:, lane] = ar.add(do_l[:, lane], np.where(ins, t_o, zero))
            de_l[:, lane] = ar.add(de_l[:, lane], np.where(ins, t_e, zero))
            sp_l[:, lane] = ar.add(sp_l[:, lane], np.where(ins, sp, zero))
            ds_l[:, lane] = ar.add(ds_l[:, lane], d)

    def merge(v):
        delta = G // 2
        while delta:
            v = ar.add(v, v[:, np.arange(G) ^ delta])
            delta //= 2
        return v[:, 0]
    do, de, sp, sds = merge(do_l), merge(de_l), merge(sp_l), merge(ds_l)
    if local:
        de_spans = ar.add(ar.add(sp, ar.mul(sds, -2.0)), -do)
    else:
        de_spans = ar.add(ar.add(np.asarray(m + n, dt), ar.mul(sds, -2.0)), -do)
    return dS[:, 1:, 1:], do, de, de_spans, sds


def argmax_seed(Av, m, n):
    """local max: (i, j) of the first row-major maximum of A (values, float64) inside the item,
    or None where max A <= 1 (the empty alignment wins, ties included); and per item whether
    another cell's A is within 2^-TIE_BITS of the maximum (rule "tie")."""
    out, tie = [], np.zeros(Av.shape[0], bool)
    for b in range(Av.shape[0]):
        inner = Av[b, 1:m[b] + 1, 1:n[b] + 1]
        if inner.size == 0 or not (np.nanmax(inner) > 1.0):
            out.append(None)
            continue
        i, j = np.unravel_index(np.nanargmax(inner), inner.shape)
        out.append((i + 1, j + 1))
        rest = inner.copy()
        rest[i, j] = -np.inf
        tie[b] = np.nanmax(rest) >= inner[i, j] * (1 - 2.0 ** -TIE_BITS)
    return out, tie


def seeds(P, kc, m, n, mode, reduction, ar, zstar=None):
    """(seedA, seedD) on the (B, MM + 2, N + 2) grid; local soft needs zstar = (z*, K*)."""
    dt = ar.dtype
    B, MM1, N1 = P["A"].shape
    sA = np.zeros((B, MM1 + 1, N1 + 1), dt)
    sD = np.zeros_like(sA)
    if mode == "global":
        for b in range(B):
            if m[b] > 0 and n[b] > 0:
                sA[b, m[b], n[b]] = sD[b, m[b], n[b]] = ar.div(1.0, P["D"][b, m[b], n[b]])
    elif reduction == "soft":
        z, K = zstar
        inv = ar.div(1.0, z)
        s = ar.mul(ar.back(kc - K[:, None, None]), inv[:, None, None])
        sA[:, :MM1, :N1] = s
    else:
        with np.errstate(all="ignore"):
            Av = P["A"].astype(np.float64) * np.exp2(kc.astype(np.float64))
        where, tie = argmax_seed(Av, m, n)
        for b, ij in enumerate(where):
            if ij is not None:
                sA[b, ij[0], ij[1]] = ar.div(1.0, P["A"][b, ij[0], ij[1]])
        return sA, sD, tie
    return sA, sD, np.zeros(B, bool)


def cell_k(krow, R, kW, N):
    """(B, MM + 1, N + 1): each cell's k (its chunk's), row 0 0."""
    C, B, MM1 = krow.shape
    kc = np.zeros((B, MM1, N + 1), np.int64)
    for i in range(1, MM1):
        for j in range(N + 1):
            kc[:, i, j] = krow[min(chunk_of(i, j, R, kW), C - 1), :, i]
    return kc


# ---------------------------------------------------------------------------------------------
# float64 structure check

def forward64(S, o, e, t, m, n, mode, G=16, R=2, kW=8):
    """The float64 DP (affine_probability_math) split into each cell's row scale: k of row i at
    chunk c = floor(log2 D(i, j - 1)) at the chunk's first column j (0 where D is 0)."""
    from affine_probability_math import forward
    B, M, N = S.shape
    MM = G * R
    P = {x: np.zeros((B, MM + 1, N + 1)) for x in ("A", "X", "Y", "D")}
    P["E"] = np.ones((B, MM + 1, N + 1))
    C = (N + G - 1) // kW + 2
    krow = np.zeros((C, B, MM + 1), np.int64)
    for b in range(B):
        A, X, Y = forward(S[b, :m[b], :n[b]], o[b], e[b], t, mode == "local")
        D = A + X + Y
        for c in range(C):
            for i in range(1, m[b] + 1):
                jf = c * kW - (i - 1) // R - 1
                v = D[i, min(max(jf, 0), n[b])]
                krow[c, b, i] = int(np.floor(np.log2(v))) if v > 0 else 0
        for i in range(1, m[b] + 1):
            for j in range(0, n[b] + 1):
                k = krow[min(chunk_of(i, j, R, kW), C - 1), b, i]
                for name, v in (("A", A), ("X", X), ("Y", Y), ("D", D)):
                    P[name][b, i, j] = np.ldexp(v[i, j], -k)
                if j >= 1:
                    P["E"][b, i, j] = math.exp(S[b, i - 1, j - 1] / t)
    return P, krow


def gradients64(S, o, e, t, m, n, mode, reduction, G=16, R=2, kW=8):
    ar = Arith64
    P, krow = forward64(S, o, e, t, m, n, mode, G, R, kW)
    kc = cell_k(krow, R, kW, S.shape[2])
    zstar = None
    if mode == "local" and reduction == "soft":
        Av = P["A"] * np.exp2(kc)
        z = 1.0 + np.array([Av[b, 1:m[b] + 1, 1:n[b] + 1].sum() for b in range(len(m))])
        K = np.floor(np.log2(z)).astype(np.int64)
        zstar = (np.ldexp(z, -K), K)
    sA, sD, _ = seeds(P, kc, m, n, mode, reduction, ar, zstar)
    O, Fe = np.exp(np.asarray(o) / t), np.exp(np.asarray(e) / t)
    return reverse(P, krow, m, n, O, Fe, mode, sA, sD, ar, G, R, kW)


def check64(seed=0, problems=6):
    """The float64 structure against affine_scaled_backward_math.gradients (one item at a time)
    and the CPU backend; returns the largest relative difference."""
    import affine_scaled_backward_math as bm
    rng = np.random.default_rng(seed)
    worst = 0.0
    for p in range(problems):
        B = 6
        M, N = int(rng.integers(1, 33)), int(rng.integers(1, 33))
        t = float(rng.choice([0.25, 0.5, 1.0, 3.0]))
        S = rng.normal(0, 1.5, (B, M, N))
        o = -rng.uniform(0, 3, B)
        o[0] = 0.4  # a paying gap open
        e = -rng.uniform(0, 1.5, B)
        m, n = rng.integers(1, M + 1, B), rng.integers(1, N + 1, B)
        m[0], n[0] = M, N
        for mode, reduction in ENDS:
            dS, do, de, des, _ = gradients64(S, o, e, t, m, n, mode, reduction)
            for b in range(B):
                _, wS, wo, we, _ = bm.gradients(S[b, :m[b], :n[b]], o[b], e[b], t, mode, reduction)
                errs = [np.max(np.abs(dS[b, :m[b], :n[b]] - wS) / (1 + np.abs(wS))),
                        abs(do[b] - wo) / (1 + abs(wo)), abs(de[b] - we) / (1 + abs(we)),
                        abs(des[b] - we) / (1 + abs(we))]
                worst = max(worst, max(errs))
                if not max(errs) < 1e-11:
                    print(f"f64 MISS {mode} {reduction} t={t} m={m[b]} n={n[b]} o={o[b]:.3g} "
                          f"e={e[b]:.3g}: {errs}")
        print(f"f64 problem {p} ({M}, {N}) t={t}: worst so far {worst:.1e}", flush=True)
    return worst


# ---------------------------------------------------------------------------------------------
# float32

def gradients32(S, o, e, t, m, n, mode, reduction, G=16, R=2, kW=8, keep_y=False):
    """(score, dS, do, de (spans; keep_y: direct), refused, why, extra) in float32 (scores float64
    from the forward emulation)."""
    keep = {}
    with np.errstate(all="ignore"):
        score, refused, why = fwd.run(S, o, e, t, m, n, mode, reduction, G, R, kW, keep=keep)
    B, M, N = S.shape
    MM = G * R
    if "A" not in keep:  # no steps (every item empty or past the gap bound)
        z = np.zeros(B)
        return score, np.zeros(S.shape), z, z, refused | True, why, {}
    K = np.array(keep["k"])  # (C, R, B, G)
    C = K.shape[0]
    krow = np.zeros((C, B, MM + 1), np.int64)
    for r in range(R):
        krow[:, :, 1 + r::R] = K[:, r]
    kc = cell_k(krow, R, kW, N)
    zstar = None
    if mode == "local" and reduction == "soft":
        # the lanes' totals, each first to a mantissa in [1, 2) (its exponent bits): merged as the
        # linear kernel merges them (at the largest top, no renormalisation), two lanes of
        # 2.2e38 and 2.6e38 at top 0 summed to inf and every seed to 0 (rise, seed 12)
        total, top = keep["total"], keep["top"]
        if LANE_NORMALISE:
            fr, ex = np.frexp(total)  # (exponent bits of any finite float: normal ones exactly)
            fin = np.isfinite(total) & (total > 0)
            total = np.where(fin, (fr * 2).astype(F), total).astype(F)
            top = np.where(fin, top + ex - 1, np.where(total > 0, top, np.iinfo(np.int32).min))
        Kst = top.max(axis=1)
        Kst = np.where(Kst == np.iinfo(np.int32).min, 0, Kst)
        tz = scale_down(total, np.maximum(top - Kst[:, None], -300))
        delta = G // 2
        while delta:
            tz = add(tz, tz[:, np.arange(G) ^ delta])
            delta //= 2
        zstar = (add(tz[:, 0], pow2_to_subnormal(-Kst)), Kst)
    ar = Arith32
    with np.errstate(all="ignore"):
        sA, sD, tie = seeds(keep, kc, m, n, mode, reduction, ar, zstar)
        why = dict(why, tie=tie & (m > 0) & (n > 0) & ~refused)  # (refused by no other rule)
        if TIE_RULE:
            refused = refused | why["tie"]
        scale = F(LOG2E / t)
        o_c = (np.asarray(o, F) * scale).astype(F)
        e_c = (np.asarray(e, F) * scale).astype(F)
        gap_bad = ~(np.maximum(np.abs(o_c), np.abs(e_c)) <= F(96 // kW))
        O = ex2(np.where(gap_bad, F(0), o_c))
        Fe = ex2(np.where(gap_bad, F(0), e_c))
        P = {x: keep[x] for x in ("A", "X", "Y", "E")}
        dS, do, de, des, sds = reverse(P, krow, m, n, O, Fe, mode, sA, sD, ar, G, R, kW)
    dS = dS[:, :M, :N].astype(np.float64)
    return (score, dS, do.astype(np.float64), (de if keep_y else des).astype(np.float64),
            refused, why, dict(de_direct=de.astype(np.float64), de_spans=des.astype(np.float64)))


def cpu(S, o, e, t, m, n, mode, reduction):
    import torch
    import softalign
    St = torch.tensor(S, requires_grad=True)
    ot = torch.tensor(np.asarray(o, np.float64), requires_grad=True)
    et = torch.tensor(np.asarray(e, np.float64), requires_grad=True)
    s = softalign.smith_waterman(St, gap_open=ot, gap_extend=et, temperature=float(t), mode=mode,
                                 reduction=reduction, lengths_a=torch.tensor(m),
                                 lengths_b=torch.tensor(n))
    s.sum().backward()
    return s.detach().numpy(), St.grad.numpy(), ot.grad.numpy(), et.grad.numpy()


def miss(got, want, tol=2e-4):
    with np.errstate(all="ignore"):
        return ~(np.abs(got - want) <= tol + tol * np.abs(want))


def plain_problem(rng):
    """The brief's plain problems: N(0, 1) scale scores, o, e per item, t in {.25, .5, 1, 3}."""
    B = 32
    M, N = int(rng.integers(1, 33)), int(rng.integers(1, 33))
    t = float(rng.choice([0.25, 0.5, 1.0, 3.0]))
    S = rng.normal(0, float(rng.choice([0.5, 1, 2, 4])), (B, M, N))
    o = -rng.uniform(0, 4, B) * t
    e = -rng.uniform(0, 2, B) * t
    pay = rng.random(B) < 0.1
    o = np.where(pay, -o * 0.3, o)
    m, n = rng.integers(0, M + 1, B), rng.integers(0, N + 1, B)
    m[0], n[0] = M, N
    return S, o, e, t, m, n


def rise_problem(rng):
    """Rows that rise or fall by 2^40 .. 2^110 at a column near a chunk's start (the reverse's
    factor between rows and a row's own change of scale both large at one step), X runs from
    above (e small against o), some strong cells below a weak row."""
    B = 32
    M, N = int(rng.integers(2, 33)), int(rng.integers(2, 33))
    t = float(rng.choice([0.1, 0.25, 0.5, 1.0]))
    bits = t / LOG2E
    S = rng.normal(-2, 1, (B, M, N)) * bits
    for b in range(B):
        for _ in range(int(rng.integers(1, 5))):
            i = int(rng.integers(0, M))
            lane = i // 2
            c = int(np.clip(8 * int(rng.integers(0, 6)) - lane + int(rng.integers(-1, 2)), 0, N - 1))
            h = float(rng.uniform(40, 110)) * float(rng.choice([1, -1]))
            S[b, i, c:] += h * bits if rng.random() < 0.5 else 0
            S[b, i, c] += h * bits
    o = -rng.uniform(0, 12, B) * bits
    e = o * rng.uniform(0.01, 0.5, B)
    pay = rng.random(B) < 0.2
    o = np.where(pay, rng.uniform(0, 6, B) * bits, o)
    m, n = rng.integers(0, M + 1, B), rng.integers(0, N + 1, B)
    m[0], n[0] = M, N
    return S, o, e, t, m, n


def fuzz(seconds, seed, gens, keep_y=False, shown=8, G=16, R=2):
    rng = np.random.default_rng(seed)
    stats = {f"{md} {rd}": [0, 0, 0, 0] for md, rd in ENDS}  # taken, refused, wrong, tie
    per_gen = {g: [0, 0, 0] for g in gens}
    parts = {"score": 0, "dS": 0, "do": 0, "de": 0, "de_direct": 0}
    start = time.time()
    p = 0
    while time.time() - start < seconds:
        gen = gens[p % len(gens)]
        mode, reduction = ENDS[(p // len(gens)) % 3]
        p += 1
        if gen == "plain":
            S, o, e, t, m, n = plain_problem(rng)
        elif gen == "rise":
            S, o, e, t, m, n = rise_problem(rng)
        else:
            S, o, e, t, _, _, m, n = fwd.problem(rng, gen, 32, N_max=32)
        score, dS, do, de, refused, why, extra = gradients32(S, o, e, t, m, n, mode, reduction,
                                                             G, R, keep_y=keep_y)
        with np.errstate(all="ignore"):
            ws, wS, wo, we = cpu(S, o, e, t, m, n, mode, reduction)
        items = (m > 0) & (n > 0)
        taken = items & ~refused
        bad = {"score": miss(score, ws), "do": miss(do, wo), "de": miss(de, we),
               "dS": np.array([miss(dS[b, :m[b], :n[b]], wS[b, :m[b], :n[b]]).any()
                               for b in range(len(m))])}
        if extra:
            bad["de_direct"] = miss(extra["de_direct"], we)
        wrong = taken & (bad["score"] | bad["dS"] | bad["do"] | bad["de"])
        for q in bad:
            parts[q] += int((taken & bad[q]).sum())
        st = stats[f"{mode} {reduction}"]
        st[0] += int(taken.sum())
        st[1] += int((items & refused).sum())
        st[2] += int(wrong.sum())
        st[3] += int((items & why.get("tie", np.zeros(len(m), bool))).sum())
        per_gen[gen][0] += int(taken.sum())
        per_gen[gen][1] += int(wrong.sum())
        per_gen[gen][2] += int((items & refused).sum())
        for b in np.nonzero(wrong)[0]:
            if shown <= 0:
                break
            shown -= 1
            sb = dS[b, :m[b], :n[b]]
            wb = wS[b, :m[b], :n[b]]
            ij = np.unravel_index(np.argmax(np.abs(sb - wb)), sb.shape) if sb.size else (0, 0)
            print(f"WRONG {gen} {mode} {reduction} t={t} m={m[b]} n={n[b]} o={o[b]:.4g} "
                  f"e={e[b]:.4g}: score {score[b]:.7g}/{ws[b]:.7g} dS{ij} "
                  f"{sb[ij] if sb.size else 0:.6g}/{wb[ij] if wb.size else 0:.6g} "
                  f"do {do[b]:.6g}/{wo[b]:.6g} de {de[b]:.6g}/{we[b]:.6g} "
                  f"(direct {extra.get('de_direct', [np.nan] * len(m))[b]:.6g}) "
                  f"[{','.join(q for q in bad if bad[q][b])}]", flush=True)
    print(f"G={G} R={R} kW=8 seed {seed}, {p} problems, {seconds:.0f} s, gens {','.join(gens)}, tie bits {TIE_BITS}; d e "
          f"{'direct (Y kept)' if keep_y else 'from spans (no Y)'}")
    for k, v in stats.items():
        print(f"  {k:12}: taken {v[0]}, refused {v[1]} (by rule tie alone {v[3]}"
              f"{'' if TIE_RULE else ', off'}), wrong {v[2]}")
    print("  per generator (taken/wrong/refused): " +
          ", ".join(f"{g} {v[0]}/{v[1]}/{v[2]}" for g, v in per_gen.items()))
    print("  taken items failing each part: " + ", ".join(f"{k} {v}" for k, v in parts.items()))
    return sum(v[2] for v in stats.values())


if __name__ == "__main__":
    import argparse
    import warnings
    warnings.simplefilter("ignore")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
    ap = argparse.ArgumentParser()
    ap.add_argument("--check64", action="store_true")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gens", default="plain")
    ap.add_argument("--keep-y", action="store_true", help="d e direct (Y kept), not from spans")
    ap.add_argument("--no-tie", action="store_true", help="rule tie off")
    ap.add_argument("--G", type=int, default=16)
    ap.add_argument("--R", type=int, default=2)
    ap.add_argument("--tie-bits", type=int, default=TIE_BITS)
    ap.add_argument("--no-dead-mask", action="store_true", help="the dead-state mask off")
    ap.add_argument("--factor-first", action="store_true", help="factors before E, O, F R")
    ap.add_argument("--edge-selects", action="store_true",
                    help="d o with its edges' selects (the kernel before session 42)")
    a = ap.parse_args()
    TIE_RULE, TIE_BITS = not a.no_tie, a.tie_bits
    DEAD_MASK = not a.no_dead_mask
    FACTOR_FIRST = a.factor_first
    EDGE_SELECTS = a.edge_selects
    if a.check64:
        w = check64(a.seed)
        print(f"float64 structure: largest relative difference {w:.1e}")
        raise SystemExit(0 if w < 1e-11 else 1)
    raise SystemExit(1 if fuzz(a.seconds, a.seed, a.gens.split(","), a.keep_y, G=a.G, R=a.R)
                     else 0)
