"""A float32 emulation of ops/cuda/scaled_adjoint.cuh's forward_backward_kernel (G = 8, R = 4,
kW = 8), step by step and lane by lane in numpy, vectorised over items (each its own group) and
lanes: run(S, g, t, m, n, mode, reduction) returns (score, d S, d g, refused, taken) per item, at
grad 1. Written by session 34's review, which found with it two ways the kernel returned wrong
gradients for items it took (FIX: True follows the kernel since that session's fix; False, the
kernel before it):
  - "er": E R computed before the factor to the row above's scale (R times a factor of 2^-100
    flushed before E = 2^80 multiplied it: d S 0 instead of 1 on a strong diagonal at t = 0.1);
  - "gfa": the gap factor G folded into that factor once per chunk (R near 2^-127 times 2^-11 kept
    11 bits before G multiplied it back: d g about 1e-3 off with gaps that pay).
Session 35 ran both on the H100: they gave NaN gradients in
test_scaled_backward_paying_gaps[lengths-local-*], which this emulation reproduced once its
compare() counted NaN as a miss (before, `max(...) > 1` was False for NaN, in the fuzz too; and it
runs a warp's 4 items at a time, as the kernel counts its steps): with
gaps that pay, a row below the item's last overflows to inf, keeps its scale k, and its factor to
the row above clamps at 2^127, so G times it is inf, and R there (0) times that is NaN, which the
row above adds ("mask": zero outside the item, as R). The kernel follows all three since then.
Session 36 ("gback"): R of a chunk's first column, carried into the chunk before's scale by 2^-e,
went subnormal there (z > 2^126 p in that scale) before G multiplied it: up to 2^(gap_c - 22) off
in probability, d g 2.3e-4 off on an item of session 35's harsher fuzz (local soft, gaps paying
11.9 bits; local max as much, under its tolerance). Now G first, then 2^-e; the first step of
the chunk adds that G R as it is (--before36: as before).
It must follow the kernel line by line, so a change to one is a change to both. Run as a script it
fuzzes the emulation against the CPU backend in float64 (session 34: 2500 problems, 36,478 items
taken: 13 wrong before the fix, none after):

    SOFTALIGN_LIBRARY=build/libsoftalign.so python3 tools/scaled_adjoint_emulation.py SEED PROBLEMS [--before] [--before36]
"""
import numpy as np

from f32_intrinsics import (ERR, F, G, KFAC, KGAP, KTINY, KW, LN2, R, add, ex2, f32, factor, fma,
                            follow_k, lg2, max_nan, mul, pow2, pow2_or_zero, pow2_to_subnormal,
                            rows_total, scale_down, shfl_down, shfl_up, unit_mantissa)

KEEPC, KEEPW = 32, 33
LOG2E = F(1.4426950408889634)


def log_space(z, k, t):
    return mul(mul(F(t), LN2), add(lg2(z), f32(k)))


FIX = {"er": True, "gfa": True, "mask": True, "gback": True}  # the kernel's (see above)


def run(S, g, t, m, n, mode="local", reduction="soft", steps=None):
    S = np.asarray(S, np.float64)
    B, M, N = S.shape
    assert M <= 32 and N <= 32
    local = mode == "local"
    soft = local and reduction == "soft"
    t = F(t)
    scale = mul(LOG2E, F(1.0) / t)  # __fdividef: rcp then multiply
    l = np.arange(G)[None, :] * np.ones((B, 1), int)
    lanes = np.arange(B)[:, None]
    m = np.asarray(m)[:, None] * np.ones((1, G), int)
    n = np.asarray(n)[:, None] * np.ones((1, G), int)
    gap_c = mul(f32(g)[:, None], scale) * np.ones((1, G), F)
    bad = (m == 0) | (n == 0) | ~(np.abs(gap_c) <= KGAP)
    m = np.where(bad, 0, m)
    n = np.where(bad, 0, n)
    gap_c = np.where(bad, F(0), gap_c).astype(F)
    gap = ex2(gap_c)
    if steps is None:
        steps = int(np.max(np.where(m > 0, n + G, 0), initial=0))
    assert steps > 0
    dense = np.zeros((B, 32, KEEPC), F)
    for b in range(B):
        dense[b, :m[b, 0], :n[b, 0]] = S[b, :m[b, 0], :n[b, 0]].astype(F)
    kept = np.full((B, 32, KEEPW), F(np.nan))  # uninitialised shared memory
    nch = 5
    kept_k = np.zeros((nch, R, B, G), np.int64)
    first_row = l * R + 1
    rows_inside = np.clip(m - l * R, 0, R)

    # ---- forward (scaled::sweep with DenseScores, KeepCells)
    k = np.zeros((R, B, G), np.int64)
    for r in range(R):
        k[r] = 0 if local else np.floor(mul(f32(first_row + r), gap_c)).astype(np.int64)
    ka = k.copy()
    z = np.ones((R, B, G), F)
    one = np.ones((R, B, G), F)
    to_acc = np.ones((R, B, G), F)
    acc = np.zeros((R, B, G), F)
    best_j = -np.ones((R, B, G), int)
    diag = np.ones((B, G), F)

    def set_factors():
        fa = np.ones((R, B, G), F)
        for r in range(1, R):
            fa[r] = factor(k[r - 1] - k[r])
        return fa

    from_above = set_factors()
    below = 126 - KW * np.ceil(np.abs(gap_c)).astype(int)
    column_zero = np.ones((R, B, G), F)
    if not local:
        for r in range(R):
            column_zero[r] = np.minimum(ex2(fma(f32(first_row + r), gap_c, -f32(k[r]))),
                                        F(np.nextafter(F(2), F(0))))
    final_value = np.zeros((B, G), F)

    def loses(dk, kk_):
        return (dk > KFAC) | ((dk < -below) & ~(local & (kk_ <= 102)))

    up = np.ones((B, G), F)
    kk = 0
    while kk * KW < steps:
        j0 = kk * KW - l
        cells_ahead = (rows_inside > 0) & (j0 + KW - 1 >= 1) & (j0 <= n)
        if kk > 0:
            k0 = k[0].copy()
            ends_open = j0 <= n
            for r in range(R):
                z[r], e = unit_mantissa(z[r])
                k[r] += e
                if local:
                    one[r], acc[r], ka[r], to_acc[r] = follow_k(k[r], acc[r], ka[r],
                                                                ends_open & (r < rows_inside))
            diag = mul(diag, pow2(k0 - k[0]))
            from_above = set_factors()
            for r in range(1, R):
                bad |= cells_ahead & (r < rows_inside) & loses(k[r - 1] - k[r], k[r])
            bad |= cells_ahead & ~(diag >= F(2.0 ** -126))
        for r in range(R):
            kept_k[kk, r] = k[r]
        up = shfl_up(z[R - 1])
        k_above = shfl_up(k[R - 1])
        from_lane_above = factor(k_above - k[0])
        k_row0 = np.zeros_like(k_above) if local else np.floor(mul(f32(j0 - 1), gap_c)).astype(np.int64)
        bad |= cells_ahead & loses(np.where(l == 0, k_row0, k_above) - k[0], k[0])
        row0_local = one[0].copy()
        gap_above = [mul(gap, from_above[r]) for r in range(R)]
        for w in range(KW):
            j = j0 + w
            row0 = row0_local if local else ex2(fma(f32(j), gap_c, -f32(k[0])))
            u = np.where(l == 0, row0, mul(up, from_lane_above))
            d = diag
            diag = u
            column_inside = (j >= 1) & (j <= n)
            jc = np.clip(j - 1, 0, KEEPC - 1)
            for r in range(R):
                i = first_row + r
                E = ex2(mul(dense[lanes, i - 1, jc], scale))
                ine = (j >= 1) & (j <= KEEPC)
                dense[lanes, i - 1, jc] = np.where(ine, E, dense[lanes, i - 1, jc])
                old = z[r].copy()
                rest = fma(E, d, one[r]) if local else mul(E, d)
                if r == 0:
                    zz = fma(gap, add(u, old), rest)
                else:
                    zz = fma(gap_above[r], z[r - 1], fma(gap, old, rest))
                zz = np.where(j <= 0, column_zero[r], zz)
                if local:
                    mine = mul(zz, to_acc[r])
                    a = np.where(column_inside & (r < rows_inside), mine, F(0))
                    if not soft:
                        best_j[r] = np.where(a > acc[r], j, best_j[r])
                        acc[r] = max_nan(acc[r], a)
                    else:
                        acc[r] = add(acc[r], a)
                kj = (j >= 0) & (j <= KEEPC)
                jk = np.clip(j, 0, KEEPC)
                kept[lanes, i - 1, jk] = np.where(kj, zz, kept[lanes, i - 1, jk])
                z[r] = zz
                if r + 1 < R:
                    d = mul(old, from_above[r + 1])
            if not local:
                hit = (j == n) & (m >= first_row) & (m < first_row + R)
                for r in range(R):
                    h = hit & (first_row + r == m)
                    bad |= h & ~((z[r] >= KTINY) & (z[r] < np.inf))
                    final_value = np.where(h, log_space(z[r], k[r], t), final_value)
            up = shfl_up(z[R - 1])
        kk += 1

    end_i = m.copy()
    end_j = n.copy()
    total_z = np.ones((B, G), F)
    total_k = np.zeros((B, G), np.int64)
    if local:
        total, top = rows_total(acc, ka, soft)
        bad |= ~(total < np.inf)
        if soft:
            total_k = np.max(top, axis=1, keepdims=True) * np.ones((1, G), np.int64)
            tz = scale_down(total, top - total_k)
            for delta in (4, 2, 1):
                tz = add(tz, tz[:, np.arange(G) ^ delta])
            tz = add(tz, pow2_to_subnormal(-total_k))
            total_z = tz
            bad |= ~(total_z < np.inf)
            item_score = log_space(total_z, total_k, t)[:, 0].astype(np.float64)
        else:
            best = np.zeros((B, G), F)
            bi = np.zeros((B, G), int)
            bj = np.zeros((B, G), int)
            for r in range(R):
                x = scale_down(acc[r], ka[r] - top)
                take = x > best
                best = np.where(take, x, best)
                bi = np.where(take, first_row + r, bi)
                bj = np.where(take, best_j[r], bj)
            cb = np.where(best > 0, log_space(best, top, t), F(0))
            # group merge: the row-major first maximum (best > 0 only), else the empty alignment
            item_score = np.zeros(B)
            for b in range(B):
                eb, ei, ej = F(0), 0, 0
                for q in range(G):
                    if best[b, q] > 0:
                        v = cb[b, q]
                        if np.isnan(v) or v > eb or (v == eb and (bi[b, q], bj[b, q]) < (ei, ej)):
                            eb, ei, ej = v, bi[b, q], bj[b, q]
                item_score[b] = eb
                end_i[b] = ei
                end_j[b] = ej
    else:
        item_score = np.array([final_value[b, (m[b, 0] - 1) // R if m[b, 0] > 0 else 0]
                               for b in range(B)], np.float64)
    refused = bad.any(axis=1)
    taken = ~refused & (m[:, 0] > 0)

    # ---- seeds
    seed_z = np.zeros((B, G), F)
    seed_j = np.full((R, B, G), -1)
    for r in range(R):
        end_row = (not soft) & (first_row + r == end_i)
        seed_j[r] = np.where(end_row, end_j, -1)
        ej = np.clip(end_j, 0, KEEPC)
        with np.errstate(**ERR):
            sz = (F(1) / kept[lanes, np.clip(end_i - 1, 0, 31), ej]).astype(F)
        seed_z = np.where(end_row, sz, seed_z)
    with np.errstate(**ERR):
        inv_total = (F(1) / total_z).astype(F) if soft else np.zeros((B, G), F)

    # ---- reverse
    def zrow(r, j):  # kept z of lane row r at column j
        return kept[lanes, first_row - 1 + r, j]

    def zabove(j):
        return np.where(l > 0, kept[lanes, np.maximum(first_row - 2, 0), j], F(0))

    next_R = np.zeros((R, B, G), F)
    next_ER = np.zeros((R, B, G), F)
    z_up_next = np.zeros((R, B, G), F)
    back_next = np.ones((R, B, G), F)
    below_ = np.zeros((B, G), F)
    below_diag = np.zeros((B, G), F)
    below_diag_next = np.zeros((B, G), F)
    gap_edges = np.zeros((B, G), F)
    gaps_before = np.zeros((B, G), F)
    last_chunk = (steps - 1) // KW
    j = np.clip(last_chunk * KW + KW - 1 - l, 0, KEEPC)
    for r in range(R):
        z_up_next[r] = zrow(r, j)
    z_above_next = zabove(j)
    for kk in range(last_chunk, -1, -1):
        for r in range(R):
            if FIX["gback"]:  # G R, then 2^-e: G R rounds in this chunk's scale
                next_R[r] = mul(mul(next_R[r], gap), back_next[r])
            else:
                next_R[r] = mul(next_R[r], back_next[r])
            next_ER[r] = mul(next_ER[r], back_next[0 if r == 0 else r - 1])
        below_ = mul(below_, back_next[R - 1])
        below_diag = mul(below_diag, back_next[R - 1])
        below_diag_next = mul(below_diag_next, back_next[R - 1])
        kc = kept_k[kk]
        e = kc - kept_k[kk - 1] if kk > 0 else np.zeros_like(kc)
        k_above = shfl_up(kc[R - 1])
        e_above = shfl_up(e[R - 1])
        fa = [np.where(l == 0, F(1), factor(k_above - kc[0]))] + \
             [factor(kc[r - 1] - kc[r]) for r in range(1, R)]
        back = [pow2_to_subnormal(-e[r]) for r in range(R)]
        seed_soft = [mul(pow2_to_subnormal(kc[r] - total_k), inv_total) if soft else np.zeros((B, G), F)
                     for r in range(R)]
        back_above = np.where(l == 0, F(1), pow2_to_subnormal(-e_above))
        row0_local = pow2_or_zero(-kc[0])
        j0 = kk * KW - l
        for w in range(KW - 1, -1, -1):
            j = j0 + w
            column_inside = (j >= 1) & (j <= n)
            jl = np.clip(j - 1, 0, KEEPC)
            if local:
                z_up0 = np.where(l == 0, row0_local, mul(z_above_next, back_above if w == 0 else F(1)))
                z_diag0 = np.where(l == 0, row0_local, mul(zabove(jl), back_above if w <= 1 else F(1)))
            else:
                z_up0 = np.where(l == 0, ex2(fma(f32(j), gap_c, -f32(kc[0]))),
                                 mul(z_above_next, back_above if w == 0 else F(1)))
                z_diag0 = np.where(l == 0, ex2(fma(f32(j - 1), gap_c, -f32(kc[0]))),
                                   mul(zabove(jl), back_above if w <= 1 else F(1)))
            z_above_next = zabove(jl)
            z_left = [zrow(r, jl) for r in range(R)]
            now_R = [None] * R
            now_ER = [None] * R
            R_below = below_
            jc = np.clip(j - 1, 0, KEEPC - 1)
            for r in range(R - 1, -1, -1):
                i = first_row + r
                E = dense[lanes, i - 1, jc]
                inside = column_inside & (r < rows_inside)
                from_diag = below_diag if r == R - 1 else next_ER[r + 1]
                seed = seed_soft[r] if soft else np.where(j == seed_j[r], seed_z, F(0))
                if FIX["gback"] and w == KW - 1:  # G R from the chunk after
                    base = add(next_R[r], add(from_diag, seed))
                else:
                    base = fma(gap, next_R[r], add(from_diag, seed))
                value = add(R_below, base) if FIX["gfa"] else fma(gap, R_below, base)
                now_R[r] = np.where(inside, value, F(0))
                R_scaled = mul(now_R[r], mul(gap, fa[r])) if FIX["gfa"] else mul(now_R[r], fa[r])
                if FIX["mask"]:  # no 0 * inf (G times a factor clamped at 2^127) below the item
                    R_scaled = np.where(inside, R_scaled, F(0))
                now_ER[r] = mul(mul(E, now_R[r]), fa[r]) if FIX["er"] else mul(E, R_scaled)
                R_below = R_scaled
                z_diag = z_diag0 if r == 0 else mul(z_left[r - 1], back[r - 1] if w == 0 else F(1))
                z_up = z_up0 if r == 0 else z_up_next[r - 1]
                left = mul(z_left[r], back[r] if w == 0 else F(1))
                match = mul(z_diag, now_ER[r])
                wr = (j >= 1) & (j <= KEEPC)
                dense[lanes, i - 1, jc] = np.where(wr, match, dense[lanes, i - 1, jc])
                left_edge = mul(left, now_R[r])
                up_edge = mul(z_up, R_scaled)
                if FIX["gfa"]:  # up edges carry G already; left edges get it at the end
                    lw = np.where(j == 1, f32(i + 1), F(1)) if not local else F(1)
                    uw = np.where(i == 1, f32(j + 1), F(1)) if not local else F(1)
                    gap_edges = add(gap_edges, np.where(inside, mul(left_edge, lw), F(0)))
                    gaps_before = add(gaps_before, np.where(inside, mul(up_edge, uw), F(0)))
                    if not local:
                        before = mul(match, f32(np.where(j == 1, i - 1, 0) + np.where(i == 1, j - 1, 0)))
                        gaps_before = add(gaps_before, np.where(inside, before, F(0)))
                elif local:
                    gap_edges = add(gap_edges, np.where(inside, add(left_edge, up_edge), F(0)))
                else:
                    edges = add(mul(left_edge, np.where(j == 1, f32(i + 1), F(1))),
                                mul(up_edge, np.where(i == 1, f32(j + 1), F(1))))
                    before = mul(match, f32(np.where(j == 1, i - 1, 0) + np.where(i == 1, j - 1, 0)))
                    gap_edges = add(gap_edges, np.where(inside, edges, F(0)))
                    gaps_before = add(gaps_before, np.where(inside, before, F(0)))
            for r in range(R):
                next_R[r] = now_R[r]
                next_ER[r] = now_ER[r]
                z_up_next[r] = z_left[r]
            from_lane_below = shfl_down(R_below)
            diag_from_lane_below = shfl_down(now_ER[0])
            below_ = np.where(l == G - 1, F(0), from_lane_below)
            below_diag = below_diag_next
            below_diag_next = np.where(l == G - 1, F(0), diag_from_lane_below)
        back_next = np.array(back)
    dS = np.zeros((B, M, N))
    for b in range(B):
        dS[b, :m[b, 0], :n[b, 0]] = dense[b, :m[b, 0], :n[b, 0]]
    d_gap = fma(gap, gap_edges, gaps_before)
    for delta in (4, 2, 1):
        d_gap = add(d_gap, d_gap[:, np.arange(G) ^ delta])
    return item_score, dS, d_gap[:, 0].astype(np.float64), refused, taken


def run_units(S, g, t, m, n, mode="local", reduction="soft", per_warp=4):
    """run() a unit (a warp's 4 items) at a time: the kernel's steps are its warp's, not the
    batch's."""
    outs = []
    for u in range(0, len(g), per_warp):
        sl = slice(u, min(u + per_warp, len(g)))
        mm, nn = np.asarray(m)[sl], np.asarray(n)[sl]
        gc = np.asarray(g, np.float32)[sl] * (LOG2E * (F(1) / F(t)))
        if not ((mm > 0) & (nn > 0) & (np.abs(gc) <= KGAP)).any():  # no steps: all refused
            outs.append((np.zeros(len(mm)), np.zeros(np.asarray(S)[sl].shape), np.zeros(len(mm)),
                         np.ones(len(mm), bool), np.zeros(len(mm), bool)))
            continue
        outs.append(run(np.asarray(S)[sl], np.asarray(g)[sl], t, mm, nn, mode, reduction))
    return tuple(np.concatenate([o[q] for o in outs]) for q in range(5))


def cpu(S, g, t, m, n, mode, reduction):
    import torch
    import softalign
    St = torch.tensor(np.asarray(S, np.float64), requires_grad=True)
    gt = torch.tensor(np.asarray(g, np.float64), requires_grad=True)
    s = softalign.smith_waterman(St, gap_open=gt, temperature=float(t), mode=mode,
                                 reduction=reduction, lengths_a=torch.tensor(np.asarray(m)),
                                 lengths_b=torch.tensor(np.asarray(n)))
    s.sum().backward()
    return s.detach().numpy(), St.grad.numpy(), gt.grad.numpy()


def compare(S, g, t, m, n, mode, reduction, verbose=True, tol=2e-4):
    score, dS, dg, refused, taken = run_units(S, g, t, m, n, mode, reduction)
    ws, wdS, wdg = cpu(S, g, t, m, n, mode, reduction)
    out = []
    for b in range(len(g)):
        if not taken[b]:
            continue
        es = abs(score[b] - ws[b]) / (tol + tol * abs(ws[b]))
        ed = np.max(np.abs(dS[b] - wdS[b]) / (tol + tol * np.abs(wdS[b])), initial=0)
        eg = abs(dg[b] - wdg[b]) / (tol + tol * abs(wdg[b]))
        if not all(e <= 1 for e in (es, ed, eg)):  # NaN is a miss (max() may skip it)
            out.append((b, es, ed, eg))
            if verbose:
                ij = np.unravel_index(np.argmax(np.abs(dS[b] - wdS[b])), dS[b].shape)
                print(f"MISS item {b} {mode} {reduction} t={t} m={m[b]} n={n[b]} g={g[b]}: "
                      f"score {score[b]:.6g} vs {ws[b]:.6g}; dS worst {ij}: {dS[b][ij]:.6g} vs "
                      f"{wdS[b][ij]:.6g}; dg {dg[b]:.6g} vs {wdg[b]:.6g}")
    return out, refused, taken


def fuzz(seed, problems):
    """Random problems of strong diagonals, gaps of both signs and random lengths, 32 items each;
    returns (items taken, items wrong)."""
    rng = np.random.default_rng(seed)
    taken_items = misses = 0
    for _ in range(problems):
        B, M, N = 32, int(rng.integers(1, 33)), int(rng.integers(1, 33))
        t = float(rng.choice([0.05, 0.1, 0.25, 0.5, 1.0]))
        S = (rng.normal(0, float(rng.choice([0.5, 1, 3, 8])), (B, M, N)) +
             float(rng.choice([-2, 0, 0.5, 2])))
        for b in range(B):
            if rng.random() < 0.5:
                L = int(rng.integers(1, min(M, N) + 1))
                i0, j0 = int(rng.integers(0, M - L + 1)), int(rng.integers(0, N - L + 1))
                S[b, np.arange(i0, i0 + L), np.arange(j0, j0 + L)] = float(rng.uniform(1, 30)) * t
        g = -rng.uniform(0, 10, B) * t * float(rng.choice([0.2, 1, 1.2]))
        if rng.random() < 0.2:
            g = -g
        mode, reduction = [("local", "soft"), ("local", "max"), ("global", "max")][int(rng.integers(3))]
        m, n = rng.integers(0, M + 1, B), rng.integers(0, N + 1, B)
        m[0], n[0] = M, N
        out, _, taken = compare(S, g, t, m, n, mode, reduction)
        taken_items += int(taken.sum())
        misses += len(out)
    return taken_items, misses


if __name__ == "__main__":
    import sys
    import warnings
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
    warnings.simplefilter("ignore")
    if "--before" in sys.argv:  # the kernel before session 34's fixes
        FIX.update(er=False, gfa=False, mask=False)
    if "--before" in sys.argv or "--before36" in sys.argv:  # before session 36's fix
        FIX.update(gback=False)
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    seed, problems = (int(args[0]), int(args[1])) if len(args) >= 2 else (2, 200)
    taken_items, misses = fuzz(seed, problems)
    print(f"{problems} problems, {taken_items} items taken, {misses} wrong; fix {FIX}")
