"""A float32 emulation of the affine forward without grad at t > 0 in probability space (variant
"shared": ops/cuda/scaled_affine.cuh, session 37, line by line; the kernel ran on GPUs in sessions
38, items of one stripe, and 39, stacked), with the data flow of ops/cuda/scaled.cuh's
forward_kernel: G lanes an item, R rows a lane, chunks of kW steps, an int exponent k per row, the
factors 2^(k_above - k) between rows constant through a chunk, every row renormalised at each
chunk's start, local ends with an exponent of their own; written in the style of
tools/scaled_emulation.py with tools/f32_intrinsics.py's arithmetic. run(...) returns (score,
refused, why) per item; refused items' scores are the scaled sweep's (a kernel would redo them in
log space). The design, its refusal rules and the fuzz figures: notes/scaled-forward-plan.md,
"Affine scaled forward: emulation (session 37)".

The cell (affine_probability_math.py), in a row's scale 2^k (z = value / 2^k):
    A = E (1 [local] + D_diag)   X = U_up   Y = L_left
    D = A + X + Y                U = O A + F X           L = O (A + X) + F Y
E = exp2(s log2(e) / t), O = exp2(o_c), F = exp2(e_c), o_c = o log2(e) / t, e_c likewise.
A row keeps two floats between steps: y (its L at the last column: the next column's Y) and dd
(its D at the last column: the next row's diagonal); a lane hands down U and D of its last row
(two shuffles a step). `variant`:
  "shared": A, X, Y of a row share its k, renormalised on D at each chunk's start.
  "split":  as "shared", but X and U carry an exponent of their own (kx, renormalised on the
            last U of the chunk before), handed down by a third shuffle once a chunk.
Refusal rules (names as in `why`; `off` switches any of them off, to show it is needed):
  gap     max(|o_c|, |e_c|) beyond 96 / kW, or NaN (the row's D falls by at most min(O, F) a
          column: no D of a chunk below 2^-96 of its start, [1, 2))
  score   some score inside the item with s log2(e) / t < -126 (E would flush: ex2.ftz), -inf
          included (NaN is left to the end): one FMNMX a cell (scale-free), tested at the end
  vgap    some U(i, j), 1 <= i < m, 1 <= j <= n, below 2^theta_u in its row's (variant split:
          its kx) scale: one FMNMX a cell, tested once a chunk. U is the only value a row hands
          on that has no lower bound against the row's top (Y is never followed by X)
  loses   at a chunk's start, neighbouring rows' k so far apart that the factor would be clamped
          (> 120; local: k_above - k < -126), or (global) the row above's D could leave float's
          normal range in this row's scale within the chunk (k_above - k < -(126 - kW gb));
          split: also |k - kx| > 102
  diag    global: the first step's diagonal (row above at j0 - 1) not normal after the chunk's
          rescale (unless 0)
  one     local, some row inside with k > 120: A = E (2^-k + d) drops the 1 past k = 126 and
          takes d's subnormal rounding; refused unless 2^(xmax + 20 + max(0, kmax - 149)) is
          within 2^-24 of the end (xmax: the largest s log2(e) / t inside, one FMNMX a cell)
  end     local: the sum or max not finite, or a row's k (rows inside, any chunk) more than 100
          above log2 of the item's end (gaps that pay: A far below its row's D); global:
          D(m, n) not in [2^-100, inf) (NaN too)
  near    the end's value (local max: the largest A, unclamped; local soft: 1 + sum A; global:
          D(m, n)) within 2^(+-1/4) of 1: its score t ln(value), below t ln(2) / 4 in size,
          would carry the value's rounding, t 2^-24 or more, whole (at t = 1e4, 6e-4 against
          a score near 0; at t = 1e38 a (1, 1) item's 0.5 came out 0: E rounds to 1)
The split variant has a hole the fuzz did not find (notes): A's subnormal rounding in the row's
scale, times O 2^(k - kx), is not bounded by its U test.

Stacked items (run_stacked; the design: notes/scaled-forward-plan.md, "Affine stacked scaled
forward: design (session 38)"): items of any height in stripes of 32 rows (G = 32, R = 1, kW =
16: rule gap at 6), stripe s holding rows i0 + 1 .. i0 + 32, i0 = 32 s, swept one after another
by the same sweep_stripe() that run() calls (absolute row numbers: global column 0, m). Lane
G - 1 leaves the "ring": its row's D and U at each column j = 0 .. n as H = t ln2 (lg2(z) + k)
(float32, z in the k of the chunk that computed the column; -inf where z = 0). Lane 0 of stripe
s > 0 reads it at each chunk's start after the renormalisation, the chunk's columns j = kk kW + w
converted to its row's k0 as 2^fma(H, scale, -k0) down to subnormals (scaled.cuh's
ex2_to_subnormal, as a lane's factor keeps them; -inf 0; past n 0), and takes them as a lane takes the lane above's D (its next diagonal) and U (its X).
Rules at the ring:
  ring    rule loses for lane 0 against the row above: q = floor(hD(kk kW) scale) stands for
          k_above (clamped to +-1e6 as the linear stacked kernel does, NaN to -1e6; skipped
          where hD is -inf); lane 0 does not take DP row 0's loses test
  diag    (global) on the first diagonal carried over from the chunk before, as for lanes > 0
  vgap    the stripe above tests its last row's U (row i0 < m); nothing more
Ends: local, every stripe's lanes' ends (total 2^top) merged as the lanes of one item (max;
soft: log-sum-exp, the empty alignment's 1 counted once); rules end and one per stripe against
the stripe's own end (conservative); global, t ln D(m, n) from the stripe with row m (end
there). Rule near on the item's merged score: |score| / (t ln 2) < 1/4 (local max: the clamped
score, so items scoring 0 are refused). An item is refused if any stripe refuses it.
A flush of lane 0's ring values below 2^-126 of its row (lanes > 0 keep a subnormal, 2^-149)
would cost a local A up to 2^(k - 126) of itself, 2^-6 at k = 120 where rule one starts: the
conversion keeps subnormals instead (ex2_to_subnormal; with exact exp2, 0 of 8,003 taken items
of m > 32 changed score, seeds 4 and 5).
Global rows far below the diagonal (i >> j) rise by about (|e| + the best s) log2(e) / t a
column (each column saves a gap): N(0, 1) scores, o = -1, e = -0.5, t = 0.5, a float64 DP has
row 256's D rise 2^123 .. 2^131 (3 items) above D(256, 0) within columns 1 .. 16, past float's
range within one chunk of 16. Such items are refused (loses, end; none wrong): `--rates` 256 x
256 global 21 of 32 at t = 0.5; 1024 x 128 global (32 items) 31 at t = 1, 32 at t = 0.5; with
kW = 8 none of these (t = 0.5, 0.75, 1; 64 .. 1024 rows): the stacked kernel takes chunks of 8
for global items (stacked_steps).

    SOFTALIGN_LIBRARY=build/libsoftalign.so python3 tools/affine_scaled_emulation.py --seconds 300
    SOFTALIGN_LIBRARY=build/libsoftalign.so python3 tools/affine_scaled_emulation.py --stacked
        --seconds 120 --seed 1 [--rows-max 200] [--off ring] [--rates]   (one line)
"""
import math
from dataclasses import dataclass

import numpy as np

from f32_intrinsics import (F, KFAC, KTINY, LN2, add, ex2, factor, fma, follow_k, lg2, local_score,
                            mul, pow2, rows_total, shfl_up, unit_mantissa)

LOG2E = 1.4426950408889634
RULES = ("gap", "score", "vgap", "loses", "ring", "diag", "one", "end", "near")
K_END = 100  # rule "end": a row's k at most this above log2 of the local end
K_NEAR = 0.25  # rule "near": |log2 of the end's value| at least this


@dataclass
class StripeSweep:
    """What sweep_stripe leaves of one stripe (rows i0 + 1 .. i0 + G R) of each item.
    score:      (B,) float64: local, the stripe's own end (its lanes' ends merged as
                local_score does); global, t ln D(m, n) where the stripe has row m, else 0
    why:        rule -> (B,) bool, the rules checked by the stripe (all but near), for the items
                with rows in it
    total, top: local, the lanes' ends total 2^top, (B, G) (None global)
    ring_below: (hD, hU), (B, N + 1) float32: the stripe's last row's D and U at columns 0 .. n
                as H = t ln2 (lg2(z) + k), z in the row's k at the chunk that computed the column
                (-inf where z is 0); what lane 0 of the stripe below reads"""
    score: np.ndarray
    why: dict
    total: object
    top: object
    ring_below: tuple


def log_space(z, k, t):
    """scaled.cuh's log_space: t ln2 (lg2(z) + k) in float32, as (t kLn2) (lg2(z) + k)."""
    return mul(mul(F(t), LN2), add(lg2(z), np.asarray(k).astype(F)))


def ring_row_above(ring_above, kk, kW, k0, scale, n):
    """Lane 0's row above at chunk kk's columns j = kk kW + w (w < kW) from the ring's H, in the
    scale of lane 0's row k0 (B,): (D, U), each (B, kW), 2^fma(h, scale, -k0) down to subnormals
    (ex2_to_subnormal; -inf 0), 0 past n (not read)."""
    hD, hU = ring_above
    cols = kk * kW + np.arange(kW)
    at = np.minimum(cols, hD.shape[1] - 1)
    read = cols[None, :] <= n[:, None]
    minus_k0 = -k0.astype(F)[:, None]

    def to_row(h):
        return np.where(read, ex2_to_subnormal(fma(h[:, at], scale, minus_k0)), F(0)).astype(F)
    return to_row(hD), to_row(hU)


def ex2_to_subnormal(y):
    """scaled.cuh's ex2_to_subnormal: 2^y down to 2^-149, where ex2.ftz flushes below 2^-126
    (y < -126: ex2(y + 64) 2^-64, one rounding more)."""
    with np.errstate(**{"invalid": "ignore", "over": "ignore", "under": "ignore"}):
        low = y < F(-126)
        return np.where(low, mul(ex2(add(np.where(low, y, F(0)), F(64))), F(2.0 ** -64)),
                        ex2(np.where(low, F(0), y))).astype(F)


def sweep_stripe(S, o, e, t, m, n, mode="local", reduction="soft", G=16, R=2, kW=8,
                 variant="shared", theta_u=-100, i0=0, ring_above=None, keep=None):
    """One stripe of each item: rows i0 + 1 .. i0 + G R of S (B, M, N) float64 (absolute row
    numbers: global column 0, m); ring_above: None (the first stripe: lane 0's row above is DP
    row 0) or the stripe above's ring_below. Returns a StripeSweep."""
    S = S[:, i0:i0 + G * R]
    local = mode == "local"
    soft = local and reduction == "soft"
    split = variant == "split"
    reads_ring = ring_above is not None
    assert not (reads_ring and split), "the ring carries no kx"
    B, M, N = S.shape
    scale = F(LOG2E / t)
    l = np.arange(G)[None, :]
    one_g = np.ones((1, G), F)
    with np.errstate(all="ignore"):
        o_c = (np.asarray(o, F) * scale).astype(F)[:, None] * one_g
        e_c = (np.asarray(e, F) * scale).astype(F)[:, None] * one_g
    bad = {r: np.zeros((B, G), bool) for r in RULES}
    gbf = np.maximum(np.abs(o_c), np.abs(e_c))
    bad["gap"] = ~(gbf <= F(96 // kW))
    o_c = np.where(bad["gap"], F(0), o_c).astype(F)
    e_c = np.where(bad["gap"], F(0), e_c).astype(F)
    gbf = np.where(bad["gap"], F(0), gbf)
    O, Fe = ex2(o_c), ex2(e_c)
    gbi = np.ceil(gbf).astype(np.int64)
    below_global = 126 - kW * gbi
    mm = m[:, None] * np.ones((1, G), int)
    nn = n[:, None] * np.ones((1, G), int)
    valid = (mm > 0) & (nn > 0)
    in_stripe = valid & (mm > i0)
    first_row = i0 + l * R + 1  # absolute row number of the lane's first row
    rows_inside = np.clip(mm - i0 - l * R, 0, R)
    # scores: x = s scale at (i, j) inside the item, 0 elsewhere (E = 1); Sp's row i - i0
    Sp = np.zeros((B, G * R + 1, N + 1 + kW * 4 + G), F)
    ii = i0 + np.arange(1, M + 1)[None, :, None]
    jj = np.arange(1, N + 1)[None, None, :]
    inside_ij = (ii <= m[:, None, None]) & (jj <= n[:, None, None])
    Sp[:, 1:M + 1, 1:N + 1] = np.where(inside_ij, S, 0).astype(F)
    X_all = mul(Sp, scale)
    E_all = ex2(X_all)
    bi = np.arange(B)[:, None]
    ring_d = np.full((B, N + 1), -np.inf, F)  # the last row's D and U as H, columns 0 .. N
    ring_u = np.full((B, N + 1), -np.inf, F)

    zeros = lambda: np.zeros((R, B, G), F)  # noqa: E731
    k = np.zeros((R, B, G), np.int64)
    dd, y = zeros(), zeros()  # the row's D and L at its last column
    czD, czL, czU = zeros(), zeros(), zeros()  # column 0 (and before), in the row's scale
    if not local:
        for r in range(R):
            c = fma(F(1) * (first_row + r - 1).astype(F), e_c, o_c)  # log2 X(i, 0)
            k[r] = np.floor(c).astype(np.int64)
            czD[r] = np.minimum(ex2(add(c, -k[r].astype(F))), F(1.9999999))
            czL[r] = mul(O, czD[r])  # Y(i, 1) = O X(i, 0)
            czU[r] = mul(Fe, czD[r])  # X(i + 1, 0) (the row below takes its own boundary)
            dd[r], y[r] = czD[r], czL[r]
    kx = k.copy()  # split: X and U's exponent
    ka = k.copy()
    kmax = np.where(np.arange(R)[:, None, None] < rows_inside[None], k, -(1 << 40))
    one = np.ones((R, B, G), F)
    to_acc = np.ones((R, B, G), F)
    acc = zeros()
    uu = czU.copy()  # each row's U at its last column
    diag = np.zeros((B, G), F)

    def set_factors():
        fa, fx, ox, xk = (np.ones((R, B, G), F) for _ in range(4))
        for r in range(R):
            if r > 0:
                fa[r] = factor(k[r - 1] - k[r])
                fx[r] = factor(kx[r - 1] - kx[r])
            if split:  # O 2^(k - kx) (A into U's scale), 2^(kx - k) (X into the row's)
                ox[r] = mul(O, factor(k[r] - kx[r]))
                xk[r] = factor(kx[r] - k[r])
        return fa, fx, ox, xk

    fa, fx, ox, xk = set_factors()
    final_value = np.zeros((B, G), np.float64)
    has_final = np.zeros((B, G), bool)
    alive = valid[:, 0] & ~bad["gap"][:, 0] & (m > i0)
    steps = int(np.max(np.where(alive, n + G, 0), initial=0))

    def loses(dk, kk_):
        # local: only a clamped factor (what a subnormal d or a dropped 1 costs A is bounded at
        # the end, rule "one"; a factor clamped at 2^-126 for 2^-130 made A 8.5x too large: the
        # session 38 review's example, row 3 of k = 60 under row 2 of k = -70)
        below = np.where(local, 126, below_global)
        return (dk > KFAC) | (dk < -below)

    def kx_apart(r):  # split: the row's two exponents so far apart that O 2^(k - kx) or 2^(kx - k)
        d = k[r] - kx[r]  # would be clamped, or U's A part could leave the normal range
        return (d > 126 - 24) | (d < -(126 - 24))

    xmin = np.full((B, G), np.inf, F)  # over the sweep: x = s scale of the cells inside
    xmax = np.full((B, G), -np.inf, F)
    kk = 0
    while kk * kW < steps:
        j0 = kk * kW - l
        cells_ahead = (rows_inside > 0) & (j0 + kW - 1 >= 1) & (j0 <= nn) & valid
        ends_open = j0 <= nn
        if kk > 0:
            k0 = k[0].copy()
            for r in range(R):
                dd[r], ex = unit_mantissa(dd[r])
                y[r] = mul(y[r], pow2(-ex))
                k[r] += ex
                if split:  # U on its own: kx to its last U's exponent
                    uu[r], exx = unit_mantissa(uu[r])
                    kx[r] += exx
                elif r == R - 1:  # as the kernel (scaled_affine.cuh): only the last row's U
                    uu[r] = mul(uu[r], pow2(-ex))  # outlives a step (the lane below's X)
                ins_r = cells_ahead & (r < rows_inside)
                kmax[r] = np.where(ins_r, np.maximum(kmax[r], k[r]), kmax[r])
                if local:
                    one[r], acc[r], ka[r], to_acc[r] = follow_k(k[r], acc[r], ka[r],
                                                                ends_open & (r < rows_inside))
            # A row of the item whose D reached 2^127 keeps its k (unit_mantissa leaves it, as
            # Rows::renormalize does): the factors from it to the rows below would be clamped
            # (seed 31: row 8's D at 2^161 in k = 34, row 9's factor 2^-126 for 2^-128, A 4x).
            for r in range(R):
                bad["loses"] |= valid & (r < rows_inside) & (j0 <= nn + 1) & ~(dd[r] < F(2.0 ** 127))
            diag_before = diag
            diag = mul(diag, pow2(k0 - k[0]))
            fa, fx, ox, xk = set_factors()
            for r in range(1, R):
                bad["loses"] |= cells_ahead & (r < rows_inside) & loses(k[r - 1] - k[r], k[r])
            if not local:  # (local: rule "one")
                ok = (diag >= F(2.0 ** -126)) | (diag_before == 0)
                bad["diag"] |= cells_ahead & (j0 >= 1) & ~ok
        if split:
            for r in range(R):
                bad["loses"] |= cells_ahead & (r < rows_inside) & kx_apart(r)
        up_u = shfl_up(uu[R - 1])
        up_d = shfl_up(dd[R - 1])
        k_above = shfl_up(k[R - 1])
        kx_above = shfl_up(kx[R - 1])
        fla = factor(k_above - k[0])
        flx = factor(kx_above - kx[0])
        if local:  # lane 0's row above is DP row 0, all 0: A = E 2^-k, the 1 dropped past k = 126
            bad["loses"] |= cells_ahead & (l > 0) & loses(k_above - k[0], k[0])
        else:
            c_row0 = np.where(j0 - 1 >= 1, fma((j0 - 2).astype(F), e_c, o_c), F(0))
            k_row0 = np.floor(c_row0).astype(np.int64)
            bad["loses"] |= cells_ahead & ((l > 0) | (not reads_ring)) & loses(
                np.where(l == 0, k_row0, k_above) - k[0], k[0])
            o_k0 = add(o_c, -k[0].astype(F))  # once a chunk: row 0's O F^(j - 1) in row 1's scale
        if reads_ring:
            # Lane 0's row above (row i0) from the ring, this chunk's columns in its row's k; rule
            # loses on the row above's exponent at the chunk's first column, q = floor(hD scale)
            # (clamped as the linear stacked kernel clamps it; NaN to -1e6; -inf, D = 0: none)
            ring_above_d, ring_above_u = ring_row_above(ring_above, kk, kW, k[0][:, 0], scale, n)
            h_first = ring_above[0][:, min(kk * kW, N)][:, None]
            q_minus_k0 = add(np.floor(mul(h_first, scale)), -k[0].astype(F))
            dk = np.fmin(np.fmax(q_minus_k0, F(-1e6)), F(1e6)).astype(np.int64)
            bad["ring"] |= cells_ahead & (l == 0) & ~(h_first == -np.inf) & loses(dk, k[0])
        if keep is not None:  # (tools/affine_scaled_adjoint_emulation.py) each chunk's k
            keep["k"].append(k.copy())
        umin = np.full((B, G), np.inf, F)
        for w in range(kW):
            j = j0 + w
            if local:
                row0_d = np.zeros((B, G), F)
            else:
                row0_d = ex2(np.where(j >= 1, fma((j - 1).astype(F), e_c, o_k0), -k[0].astype(F)))
            row0_u = F(0)
            if reads_ring:
                row0_d, row0_u = ring_above_d[:, w:w + 1], ring_above_u[:, w:w + 1]
            u = np.where(l == 0, row0_u, mul(up_u, flx if split else fla)).astype(F)
            d = diag
            diag = np.where(l == 0, row0_d, mul(up_d, fla)).astype(F)
            column_inside = (j >= 1) & (j <= nn)
            jc = np.clip(j, 0, Sp.shape[2] - 1)
            for r in range(R):
                i = first_row + r
                ib = np.broadcast_to(i - i0, (B, G))
                E = E_all[bi, ib, jc]
                xs = X_all[bi, ib, jc]
                ins = column_inside & (r < rows_inside)
                E = np.where(ins, E, F(1))
                a = mul(E, add(one[r], d)) if local else mul(E, d)
                if split:
                    xr = mul(u, xk[r])  # X in the row's scale
                    ax = add(a, xr)
                    U = fma(ox[r], a, mul(Fe, u))
                else:
                    ax = add(a, u)
                    U = fma(O, a, mul(Fe, u))
                Dn = add(ax, y[r])
                L = fma(O, ax, mul(Fe, y[r]))
                at0 = j <= 0
                Dn = np.where(at0, czD[r], Dn).astype(F)
                L = np.where(at0, czL[r], L).astype(F)
                U = np.where(at0, mul(czU[r], factor(k[r] - kx[r])) if split else czU[r], U).astype(F)
                xmin = np.where(ins, np.fmin(xmin, xs), xmin)
                xmax = np.where(ins, np.fmax(xmax, xs), xmax)
                umin = np.where(ins & (i < mm), np.fmin(umin, U), umin)
                if local:
                    mine = mul(a, to_acc[r])
                    addv = np.where(ins, mine, F(0))
                    if soft:
                        acc[r] = add(acc[r], addv)
                    else:
                        acc[r] = np.where(np.isnan(acc[r]) | np.isnan(addv), np.nan,
                                          np.maximum(acc[r], addv)).astype(F)
                if keep is not None:  # every cell's A, X, Y, D in its row's scale, and E
                    _keep_cell(keep, i - i0, j, N, at0, Dn, a, u, y[r], E)
                old = dd[r].copy()
                dd[r], y[r], uu[r] = Dn, L, U
                if r + 1 < R:
                    u = mul(U, fx[r + 1] if split else fa[r + 1])
                    d = mul(old, fa[r + 1])
            if not local:
                hit = (j == nn) & (mm > i0 + l * R) & (mm <= i0 + l * R + R)
                for r in range(R):
                    h = hit & (first_row + r == mm)
                    zr = dd[r]
                    bad["end"] |= h & ~((zr >= KTINY) & (zr < np.inf))
                    with np.errstate(divide="ignore", invalid="ignore"):
                        fv = np.float64(t) * LN2 * (np.log2(zr.astype(np.float64)) + k[r])
                    final_value = np.where(h, fv, final_value)
                has_final |= hit
            # the ring for the stripe below: lane G - 1's last row at its column
            j_last = kk * kW - (G - 1) + w
            if 0 <= j_last <= N:
                ring_d[:, j_last] = log_space(dd[R - 1][:, G - 1], k[R - 1][:, G - 1], t)
                ring_u[:, j_last] = log_space(uu[R - 1][:, G - 1], k[R - 1][:, G - 1], t)
            up_u = shfl_up(uu[R - 1])
            up_d = shfl_up(dd[R - 1])
        bad["vgap"] |= ~(umin >= F(2.0 ** theta_u))
        kk += 1

    bad["score"] |= ~(xmin >= F(-126))
    total = top = None
    if local:
        total, top = rows_total(acc, ka, soft)
        bad["end"] |= ~(total < np.inf)
        score = local_score(total, top, t, soft)
        with np.errstate(all="ignore"):
            # rule "end" against the stripe's own end (in stacked items a lower bound of the
            # item's: conservative)
            kmax_item = kmax.max(axis=(0, 2))
            far = ~(kmax_item - score / (t * math.log(2)) <= K_END)
            bad["end"] |= far[:, None] & valid
            # rule "one": A = E (2^-k + d) drops the 1 past k = 126 and takes d's rounding
            # (2^-149 where subnormal): at most cells 2^xmax (1 + 2^(k - 149)) in all, which must
            # be 2^-24 of the end
            xmax_item = np.where(np.isnan(xmax), np.inf, xmax).max(axis=1).astype(np.float64)
            lost = xmax_item + 20 + np.maximum(0, kmax_item - 149)
            bad["one"] |= ((kmax_item > 120) & ~(lost <= score / (t * math.log(2)) - 24))[:, None] & valid
    else:
        score = np.sum(np.where(has_final, final_value, 0), axis=1).astype(np.float64)
    why = {r: (bad[r].any(axis=1) & in_stripe[:, 0]) for r in RULES}
    return StripeSweep(score, why, total, top, (ring_d, ring_u))


def _keep_cell(keep, i, j, N, at0, Dn, a, u, y, E):
    """Record one step's cells (B, G) of rows i (B, G) at columns j (G,) into keep's (B, G R + 1,
    N + 1) planes, columns 0 .. N (column 0: the boundary, X = D)."""
    if "A" not in keep:
        B = Dn.shape[0]
        for name in ("A", "X", "Y", "D"):
            keep[name] = np.zeros((B, keep["rows"] + 1, N + 1), F)
        keep["E"] = np.ones((B, keep["rows"] + 1, N + 1), F)
    B, G = Dn.shape
    jj = np.broadcast_to(j, (B, G))
    ok = (jj >= 0) & (jj <= N)
    b = np.broadcast_to(np.arange(B)[:, None], (B, G))[ok]
    ii, jk = np.broadcast_to(i, (B, G))[ok], jj[ok]
    zero = np.zeros((B, G), F)
    keep["A"][b, ii, jk] = np.where(at0, zero, a)[ok]
    keep["X"][b, ii, jk] = np.where(at0, Dn, u)[ok]
    keep["Y"][b, ii, jk] = np.where(at0, zero, y)[ok]
    keep["D"][b, ii, jk] = Dn[ok]
    keep["E"][b, ii, jk] = np.where(at0, F(1), E)[ok]


def refusals(why, off):
    """An item is refused where a rule not in `off` says so; a gap past its bound always (the
    sweep took gap 0: not a result)."""
    refused = np.zeros(len(why["gap"]), bool)
    for r in RULES:
        if r not in off:
            refused |= why[r]
    if "gap" in off:
        refused |= why["gap"]
    return refused


def run(S, o, e, t, m, n, mode="local", reduction="soft", G=16, R=2, kW=8, variant="shared",
        off=(), theta_u=-100, stats=None, keep=None):
    """Items one stripe tall. S: (B, M, N) float64 (M <= G R); o, e: (B,) penalties; m, n: (B,)
    lengths. Returns (score, refused, why). keep: a dict to fill with the forward's cells (A, X,
    Y, D, E planes, each chunk's k, the stripe's local total and top: _keep_cell)."""
    assert S.shape[1] <= G * R
    local = mode == "local"
    soft = local and reduction == "soft"
    if keep is not None:
        keep.update(k=[], rows=G * R)
    stripe = sweep_stripe(S, o, e, t, m, n, mode, reduction, G, R, kW, variant, theta_u,
                          keep=keep)
    if keep is not None:
        keep.update(total=stripe.total, top=stripe.top)
    score, why = stripe.score, dict(stripe.why)
    # rule "near": local max, the largest A unclamped (the lanes' max, -inf where none)
    with np.errstate(all="ignore"):
        log2_value = score / (t * math.log(2)) if soft or not local else np.max(
            np.log2(stripe.total.astype(np.float64)) + stripe.top, axis=1)
    why["near"] = (np.abs(log2_value) < K_NEAR) & (m > 0) & (n > 0)
    return score, refusals(why, off), why


def stacked_steps(mode):
    """Steps a chunk of the stacked kernel (scaled_affine.cuh): 16 local, 8 global (global rows
    far below the diagonal rise past float's range within 16 columns; the docstring)."""
    return 16 if mode == "local" else 8


def run_stacked(S, o, e, t, m, n, mode="local", reduction="soft", kW=None, variant="shared",
                off=(), theta_u=-100):
    """Items of any height, stripes of 32 rows (G = 32, R = 1), swept one after another, lane 0
    of each stripe below the first reading the stripe above's last row from the ring (the
    design: notes/scaled-forward-plan.md, "Affine stacked scaled forward"). Local ends merged
    over the stripes (max; soft: log-sum-exp with the empty alignment's 1 once), global t ln
    D(m, n) from the stripe with row m; rule near on the item's score (local max: the clamped
    score, so an item scoring 0 is refused); an item is refused if any stripe refuses it.
    Returns (score, refused, why) as run()."""
    G, R = 32, 1
    kW = stacked_steps(mode) if kW is None else kW
    local = mode == "local"
    soft = local and reduction == "soft"
    B, M, N = S.shape
    why = {r: np.zeros(B, bool) for r in RULES}
    totals, tops = [], []
    global_score = np.zeros(B)
    ring = None
    for i0 in range(0, M, G * R):
        stripe = sweep_stripe(S, o, e, t, m, n, mode, reduction, G, R, kW, variant, theta_u,
                              i0=i0, ring_above=ring)
        ring = stripe.ring_below
        for r in RULES:
            why[r] |= stripe.why[r]
        if local:
            totals.append(stripe.total)
            tops.append(stripe.top)
        else:
            global_score += stripe.score
    if local:  # every stripe's lanes as lanes of one item
        score = local_score(np.concatenate(totals, axis=1), np.concatenate(tops, axis=1), t, soft)
    else:
        score = global_score
    with np.errstate(all="ignore"):
        why["near"] = (np.abs(score / (t * math.log(2))) < K_NEAR) & (m > 0) & (n > 0)
    return score, refusals(why, off), why


# ---------------------------------------------------------------------------------------------
# The fuzz: problems from generators (ordinary and adversarial), the items the emulation takes
# against the CPU backend in float64, a miss as in tools/scaled_emulation.py (|got - want| >
# 2e-4 + 2e-4 |want|; NaN is a miss).

GENERATORS = ("ordinary", "negrows", "vchain", "gapruns", "paying", "temps", "range", "special")
# Stacked items (--stacked) also take "ringjump": a stripe's first row far above the row over it
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


def reference(S, o, e, t, mode, reduction, m, n):
    import torch
    import softalign
    with torch.no_grad():
        return softalign.smith_waterman(
            torch.tensor(S), gap_open=torch.tensor(o), gap_extend=torch.tensor(e), temperature=t,
            mode=mode, reduction=reduction, lengths_a=torch.tensor(m),
            lengths_b=torch.tensor(n)).numpy()


def _setup():
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))


def sweep(S, o, e, t, m, n, mode, reduction, G, R, kW, stacked, variant, off, theta_u):
    """run(), or run_stacked() (G, R ignored) where `stacked`."""
    with np.errstate(all="ignore"):
        if stacked:
            return run_stacked(S, o, e, t, m, n, mode, reduction, kW, variant, off, theta_u)
        return run(S, o, e, t, m, n, mode, reduction, G, R, kW, variant, off, theta_u)


def fuzz(seconds, seed, gens, G, R, kW, variant, off, theta_u, N_max, stacked=False,
         rows_max=200, shown=5):
    """Problems from `gens` in turn for `seconds`; stacked: items of 33 .. rows_max rows
    (lengths m from 0 up, so some of one stripe) through run_stacked (G = 32, R = 1)."""
    import time
    _setup()
    rng = np.random.default_rng(seed)
    tot = dict(problems=0, items=0, taken=0, wrong=0, refused=0, taken_stacked=0)
    by_rule = {r: 0 for r in RULES}
    alone = {r: 0 for r in RULES}  # items refused by this rule and no other
    per_gen = {g: [0, 0, 0, 0] for g in gens}  # taken, wrong, refused, items
    start = time.time()
    while time.time() - start < seconds:
        gen = gens[tot["problems"] % len(gens)]
        if stacked:
            S, o, e, t, mode, reduction, m, n = problem(rng, gen, rows_max, N_max, rows_min=33,
                                                       gap_scale=(96 // (kW or 16)) / 12)
        else:
            S, o, e, t, mode, reduction, m, n = problem(rng, gen, G * R, N_max)
        score, refused, why = sweep(S, o, e, t, m, n, mode, reduction, G, R, kW, stacked, variant,
                                    off, theta_u)
        want = reference(S, o, e, t, mode, reduction, m, n)
        items = (m > 0) & (n > 0)
        taken = items & ~refused
        with np.errstate(all="ignore"):
            miss = taken & ~(np.abs(score - want) <= 2e-4 + 2e-4 * np.abs(want))
        tot["problems"] += 1
        tot["items"] += int(items.sum())
        tot["taken"] += int(taken.sum())
        tot["refused"] += int((items & refused).sum())
        tot["wrong"] += int(miss.sum())
        tot["taken_stacked"] += int((taken & (m > 32)).sum())
        per_gen[gen][0] += int(taken.sum())
        per_gen[gen][1] += int(miss.sum())
        per_gen[gen][2] += int((items & refused).sum())
        per_gen[gen][3] += int(items.sum())
        rules_said = sum(why[r].astype(int) for r in RULES)
        for r in RULES:
            by_rule[r] += int((items & why[r]).sum())
            alone[r] += int((items & why[r] & (rules_said == 1)).sum())
        for b in np.nonzero(miss)[0]:
            if shown <= 0:
                break
            shown -= 1
            print(f"wrong: {gen} {mode} {reduction} t={t} (M, N)={S.shape[1:]} m={m[b]} n={n[b]} "
                  f"({-(-m[b] // 32)} stripes) o={o[b]:.4g} e={e[b]:.4g}: {score[b]!r} vs "
                  f"{want[b]!r}", flush=True)
    steps = kW or "16 local, 8 global"
    where = f"stacked G=32 R=1 kW={steps} rows 33..{rows_max}" if stacked else f"G={G} R={R} kW={kW}"
    print(f"seed {seed} {where} {variant} off={list(off)} theta_u={theta_u}: "
          f"{tot['problems']} problems, {tot['items']} items, {tot['taken']} taken, "
          f"{tot['wrong']} wrong, {tot['refused']} refused" +
          (f" ({tot['taken_stacked']} taken of m > 32)" if stacked else ""), flush=True)
    print("  refused by rule (an item may count under several): " +
          ", ".join(f"{r} {c}" for r, c in by_rule.items()))
    print("  refused by one rule alone: " + ", ".join(f"{r} {c}" for r, c in alone.items()))
    print("  per generator (taken / wrong / refused / items): " +
          ", ".join(f"{g} {v[0]}/{v[1]}/{v[2]}/{v[3]}" for g, v in per_gen.items()), flush=True)
    return tot["wrong"]


def rates(G, R, kW, variant, theta_u, seed=1, batches=4, temps=(1.0, 0.1), stacked=False):
    """Refusal rates on ordinary inputs: N(0, 1) scores, o = -1, e = -0.5, local max, local soft,
    global, full lengths; 32 x 32, 32 x 256, 32 x 1024 items (G R rows at most), or, stacked,
    64 x 256, 128 x 256, 256 x 256 (one batch of 32 items each)."""
    _setup()
    rng = np.random.default_rng(seed)
    rows = []
    sizes = ((64, 256), (128, 256), (256, 256)) if stacked else (
        (min(32, G * R), 32), (min(32, G * R), 256), (min(32, G * R), 1024))
    for t in temps:
        for M, N in sizes:
            for mode, reduction in (("local", "max"), ("local", "soft"), ("global", "max")):
                ref = tak = wrong = 0
                why_n = {r: 0 for r in RULES}
                for _ in range(batches if N < 1024 and not stacked else 1):
                    B = 32
                    S = rng.normal(0, 1, (B, M, N))
                    o, e = np.full(B, -1.0), np.full(B, -0.5)
                    m, n = np.full(B, S.shape[1]), np.full(B, N)
                    score, refused, why = sweep(S, o, e, t, m, n, mode, reduction, G, R, kW,
                                                stacked, variant, (), theta_u)
                    want = reference(S, o, e, t, mode, reduction, m, n)
                    ref += int(refused.sum())
                    tak += int((~refused).sum())
                    with np.errstate(all="ignore"):
                        wrong += int((~refused & ~(np.abs(score - want) <= 2e-4 + 2e-4 * np.abs(want))).sum())
                    for r in RULES:
                        why_n[r] += int(why[r].sum())
                tot = ref + tak
                rows.append((t, M, N, mode, reduction, ref, tot, wrong, why_n))
                print(f"  t={t} {M}x{N} {mode} {reduction}: refused {ref}/{tot} "
                      f"({100.0 * ref / tot:.1f}%), wrong {wrong}; by rule " +
                      " ".join(f"{r}={c}" for r, c in why_n.items() if c), flush=True)
    return rows


if __name__ == "__main__":
    import argparse
    import warnings
    warnings.simplefilter("ignore")
    p = argparse.ArgumentParser(description="fuzz the emulated affine scaled forward against the CPU")
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--gens", default=None,
                   help="generators, comma-separated (all; --stacked also ringjump)")
    p.add_argument("--G", type=int, default=16)
    p.add_argument("--R", type=int, default=2)
    p.add_argument("--kW", type=int, default=None,
                   help="steps a chunk (8; --stacked: the kernel's, 16 local, 8 global)")
    p.add_argument("--variant", default="shared", choices=["shared", "split"])
    p.add_argument("--off", default="", help="rules switched off, comma-separated")
    p.add_argument("--theta-u", type=int, default=-100)
    p.add_argument("--N-max", type=int, default=120)
    p.add_argument("--stacked", action="store_true",
                   help="items of several stripes (run_stacked: G 32, R 1; --G, --R ignored)")
    p.add_argument("--rows-max", type=int, default=200, help="--stacked: rows at most (from 33)")
    p.add_argument("--rates", action="store_true", help="refusal rates on ordinary inputs")
    p.add_argument("--temps", default=None, help="--rates: temperatures (1,0.1; --stacked 1,0.5)")
    a = p.parse_args()
    off = tuple(x for x in a.off.split(",") if x)
    kW = a.kW if a.kW is not None else None if a.stacked else 8
    if a.stacked:
        a.G, a.R = 32, 1
    if a.rates:
        temps = a.temps if a.temps is not None else "1,0.5" if a.stacked else "1,0.1"
        rates(a.G, a.R, kW, a.variant, a.theta_u, temps=[float(x) for x in temps.split(",")],
              stacked=a.stacked)
        raise SystemExit(0)
    gens = a.gens.split(",") if a.gens else STACKED_GENERATORS if a.stacked else GENERATORS
    raise SystemExit(1 if fuzz(a.seconds, a.seed, gens, a.G, a.R, kW, a.variant,
                               off, a.theta_u, a.N_max, a.stacked, a.rows_max) else 0)
