"""A float32 emulation of ops/cuda/scaled.cuh's forward_kernel (G = 8, R = 4, kW = 8), step by
step and lane by lane in numpy, vectorised over items: run(S, g, t, m, n, mode, reduction)
returns (score, refused, stats) per item, refused items' scores being the scaled sweep's (the
kernel redoes them in log space). Written by session 20's review to find inputs on which the
kernel returns a wrong score without refusing the item, without a GPU; it must follow the
kernel line by line, so a change to one is a change to both. Run as a script, it fuzzes the
emulation against the CPU backend in float64 (session 20: 39,057 problems, 689,686 items
taken, no miss; the kernel before the review's fixes missed once in 7,600 problems):

    SOFTALIGN_LIBRARY=build/libsoftalign.so python3 tools/scaled_emulation.py --seconds 300
"""
import numpy as np

from f32_intrinsics import (F, G, KFAC, KGAP, KTINY, KW, LN2, R, ex2, factor, fma, follow_k,
                            local_score, mul, pow2, rows_total, shfl_up, unit_mantissa)

LOG2E = 1.4426950408889634  # a float64: the kernel's scale rounds once, F(LOG2E / t)


def run(S, g, t, m, n, mode="local", reduction="soft"):
    """S: (B, M, N) float64; g: (B,) gap; m, n: (B,) lengths."""
    local = mode == "local"
    soft = local and reduction == "soft"
    B, M, N = S.shape
    scale = F(LOG2E / t)
    l = np.arange(G)[None, :]
    gap_c = (g.astype(F) * scale).astype(F)[:, None] * np.ones((1, G), F)
    bad = ~(np.abs(gap_c) <= KGAP)
    gap_c = np.where(bad, F(0), gap_c).astype(F)
    gap = ex2(gap_c)
    mm = m[:, None] * np.ones((1, G), int)
    nn = n[:, None] * np.ones((1, G), int)
    valid = (mm > 0) & (nn > 0)
    first_row = l * R + 1
    rows_inside = np.clip(mm - l * R, 0, R)
    below = 126 - KW * np.ceil(np.abs(gap_c)).astype(int)
    # E tile: E[b, i, j] for i in 1..M, j in 1..N inside the item, else 1
    Sp = np.zeros((B, max(M, 32) + 1, N + 1 + 64), F)
    ii = np.arange(1, M + 1)[None, :, None]
    jj = np.arange(1, N + 1)[None, None, :]
    inside = (ii <= m[:, None, None]) & (jj <= n[:, None, None])
    Sp[:, 1:M + 1, 1:N + 1] = np.where(inside, S, 0).astype(F)
    E_all = ex2(mul(Sp, scale))

    k = np.zeros((R, B, G), np.int64)
    for r in range(R):
        k[r] = 0 if local else np.floor((first_row + r).astype(F) * gap_c).astype(np.int64)
    ka = k.copy()
    z = np.ones((R, B, G), F)
    one = np.ones((R, B, G), F)
    to_acc = np.ones((R, B, G), F)
    acc = np.zeros((R, B, G), F)
    diag = np.ones((B, G), F)

    def set_factors():
        fa = np.ones((R, B, G), F)
        for r in range(1, R):
            fa[r] = factor(k[r - 1] - k[r])
        return fa

    from_above = set_factors()
    column_zero = np.ones((R, B, G), F)
    if not local:
        for r in range(R):
            column_zero[r] = ex2(((first_row + r).astype(np.float64) * gap_c - k[r]).astype(F))
    final_value = np.zeros((B, G), F)
    has_final = np.zeros((B, G), bool)
    steps = int(np.max(np.where(valid[:, 0] & ~bad[:, 0], n + G, 0), initial=0))

    def loses(dk, kk_):
        return (dk > KFAC) | ((dk < -below) & ~(local & (kk_ <= 102)))

    kk = 0
    stats = dict(toacc_zero_cells=0)
    while kk * KW < steps:
        j0 = kk * KW - l
        cells_ahead = (rows_inside > 0) & (j0 + KW - 1 >= 1) & (j0 <= nn) & valid
        if kk > 0:
            k0 = k[0].copy()
            for r in range(R):
                z[r], e = unit_mantissa(z[r])
                k[r] += e
                if local:
                    one[r], acc[r], ka[r], to_acc[r] = follow_k(k[r], acc[r], ka[r], True)
            diag = mul(diag, pow2(k0 - k[0]))
            from_above = set_factors()
            for r in range(1, R):
                bad |= cells_ahead & (r < rows_inside) & loses(k[r - 1] - k[r], k[r])
            bad |= cells_ahead & ~(diag >= F(2.0 ** -126))
        up = shfl_up(z[R - 1])
        k_above = shfl_up(k[R - 1])
        from_lane_above = factor(k_above - k[0])
        k_row0 = np.zeros_like(k_above) if local else np.floor(((j0 - 1).astype(F) * gap_c).astype(F)).astype(np.int64)
        bad |= cells_ahead & loses(np.where(l == 0, k_row0, k_above) - k[0], k[0])
        row0_local = one[0].copy()
        for w in range(KW):
            j = j0 + w
            if local:
                row0 = row0_local
            else:
                row0 = ex2((j.astype(np.float64) * gap_c - k[0]).astype(F))
            u = np.where(l == 0, row0, mul(up, from_lane_above))
            d = diag
            diag = u
            column_inside = (j >= 1) & (j <= nn)
            jc = np.clip(j, 0, N + 63)
            for r in range(R):
                i = first_row + r  # (1, G)
                E = E_all[np.arange(B)[:, None], np.broadcast_to(i, (B, G)), jc]
                E = np.where(column_inside & (i <= mm), E, F(1))
                old = z[r].copy()
                inner = fma(E, d, one[r]) if local else mul(E, d)
                with np.errstate(over="ignore", invalid="ignore"):
                    zz = fma(gap, (u + old).astype(F), inner)
                zz = np.where(j == 0, column_zero[r], zz)
                if local:
                    mine = mul(zz, to_acc[r])
                    ins = column_inside & (r < rows_inside)
                    stats["toacc_zero_cells"] += int(np.sum(ins & (to_acc[r] == 0) & (zz > 2.0 ** 64)))
                    add = np.where(ins, mine, F(0))
                    if soft:
                        with np.errstate(over="ignore", invalid="ignore"):
                            acc[r] = (acc[r] + add).astype(F)
                    else:
                        acc[r] = np.where(np.isnan(acc[r]) | np.isnan(add), np.nan, np.maximum(acc[r], add)).astype(F)
                z[r] = zz
                if r + 1 < R:
                    u = mul(zz, from_above[r + 1])
                    d = mul(old, from_above[r + 1])
            if not local:
                hit = (j == nn) & (mm > l * R) & (mm <= l * R + R)
                for r in range(R):
                    h = hit & (first_row + r == mm)
                    zr = z[r]
                    bad |= h & ~((zr >= KTINY) & (zr < np.inf))
                    with np.errstate(divide="ignore", invalid="ignore"):
                        fv = (np.float64(t) * LN2 * (np.log2(zr.astype(np.float64)) + k[r])).astype(F)
                    final_value = np.where(h, fv, final_value)
                has_final |= hit
            up = shfl_up(z[R - 1])
        kk += 1

    if local:
        total, top = rows_total(acc, ka, soft)
        bad |= ~(total < np.inf)
        score = local_score(total, top, t, soft)
    else:
        score = np.sum(np.where(has_final, final_value, 0), axis=1).astype(np.float64)
    refused = bad.any(axis=1) & valid[:, 0]
    return score, refused, stats


def fuzz(seconds: float, seed: int) -> int:
    """Random problems (lengths, temperatures 0.1-3, scores of spread 0.5-8 with strong
    diagonals, gaps up to 12 t): the items the emulated kernel takes against the CPU backend in
    float64, to 2e-4. Prints each miss; returns their count."""
    import sys
    import time
    from pathlib import Path

    import torch
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
    import softalign

    rng = np.random.default_rng(seed)
    misses = cases = taken_items = 0
    start = time.time()
    while time.time() - start < seconds:
        B, M, N = 32, int(rng.integers(1, 33)), int(rng.integers(1, 120))
        t = float(rng.choice([0.1, 0.25, 0.5, 1.0, 3.0]))
        S = rng.normal(0, float(rng.choice([0.5, 1, 3, 8])), (B, M, N)) + float(rng.choice([-2, 0, 0.5, 2]))
        for b in range(B):  # a strong diagonal in half the items
            if rng.random() < 0.5:
                L = int(rng.integers(1, min(M, N) + 1))
                i0, j0 = int(rng.integers(0, M - L + 1)), int(rng.integers(0, N - L + 1))
                S[b, np.arange(i0, i0 + L), np.arange(j0, j0 + L)] = float(rng.uniform(1, 30)) * t
        g = -rng.uniform(0, 10, B) * t * float(rng.choice([0.2, 1, 1.2]))
        mode, reduction = str(rng.choice(["local", "global"])), str(rng.choice(["max", "soft"]))
        m, n = rng.integers(0, M + 1, B), rng.integers(0, N + 1, B)
        m[0], n[0] = M, N
        with np.errstate(all="ignore"):
            score, refused, _ = run(S, g, t, m, n, mode, reduction)
        with torch.no_grad():
            want = softalign.smith_waterman(
                torch.tensor(S), gap_open=torch.tensor(g), temperature=t, mode=mode,
                reduction=reduction, lengths_a=torch.tensor(m), lengths_b=torch.tensor(n)).numpy()
        taken = (m > 0) & (n > 0) & ~refused
        miss = taken & ~(np.abs(score - want) <= 2e-4 + 2e-4 * np.abs(want))
        cases += 1
        taken_items += int(taken.sum())
        for b in np.nonzero(miss)[0]:
            misses += 1
            print(f"miss: {mode} {reduction} t={t} (M, N)=({M}, {N}) m={m[b]} n={n[b]} g={g[b]:.3f}: "
                  f"{score[b]} vs {want[b]}", flush=True)
    print(f"{cases} problems, {taken_items} items taken, {misses} missed", flush=True)
    return misses


if __name__ == "__main__":
    import argparse
    import warnings
    warnings.simplefilter("ignore")
    parser = argparse.ArgumentParser(description="fuzz the emulated scaled forward against the CPU")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    raise SystemExit(1 if fuzz(args.seconds, args.seed) else 0)
