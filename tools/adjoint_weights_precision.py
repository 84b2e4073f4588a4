#!/usr/bin/env python3
"""Why the long pairs' saving forward in probability space (notes/scaled-saving-forward.patch)
gave gradients off by up to 4e-3 through the log-space adjoint, and what mends it (session 32).

One global item (150 x 260, t = 1, gaps +1.6 that pay, N(0, 1) scores; the worst failing case's
kind). H tables from: float64 rounded once to float32; rounded twice (L = H / t ln 2, then H, as
log_space does); the float32 log-space recurrence; a float32 probability-space recurrence with
per-row scales renormalized every 16 columns (as scaled.cuh). Each goes through the adjoint in
float64, in float32 as the log-space adjoint computes it (weights exp2((x - v) c) clamped at 1),
and in float32 with each cell's weights divided by their sum. Printed: d score / d g's relative
error against float64. Session 32's output (about 3 minutes on the CI machine):

    float64 adjoint:            once 1.1e-5, twice 4.9e-5, log-space 2.9e-3, probability 4.6e-5
    float32 adjoint:            once 3.0e-3, twice 3.1e-3, log-space 1.3e-4, probability 3.1e-3
    float32, normalized weights: once 1.1e-5, twice 1.0e-5, log-space 1.1e-5, probability 1.0e-5

The log-space adjoint's weights sum to 1 only for H's made by the same float32 log-space
arithmetic (their errors cancel); any other H table, even the exact one rounded once, leaves each
cell's weights off by about ulp(H) / t, which e compounds along the paths. Normalized weights
are accurate for every source, the log-space one included (1.3e-4 -> 1.1e-5).

    python3 tools/adjoint_weights_precision.py
"""
import math, numpy as np
rng = np.random.default_rng(12)
M, N, t, g = 150, 260, 1.0, 1.6   # gaps that pay (the worst failing case)
S = rng.standard_normal((M, N))

def forward64(S, g, t, dtype=np.float64):
    S = S.astype(dtype); g = dtype(g); t = dtype(t)
    H = np.zeros((M + 1, N + 1), dtype)
    for j in range(1, N + 1): H[0, j] = H[0, j - 1] + g
    for i in range(1, M + 1):
        H[i, 0] = H[i - 1, 0] + g
        for j in range(1, N + 1):
            x = np.array([H[i-1, j-1] + S[i-1, j-1], H[i-1, j] + g, H[i, j-1] + g], dtype)
            mx = x.max()
            H[i, j] = mx + t * dtype(np.log(np.exp((x - mx) / t).sum(dtype=dtype)))
    return H

def forward_prob32(S, g, t, W=16):
    f = np.float32
    sc = f(math.log2(math.e) / t)
    E = np.exp2((S.astype(f) * sc)).astype(f)
    G = f(np.exp2(f(g) * sc))
    z = np.zeros((M + 1, N + 1), f); k = np.zeros((M + 1, N + 1), np.int64)
    # row 0 and column 0 exactly as H = j g, i g, in scale k = floor
    for j in range(N + 1):
        L = j * g * math.log2(math.e) / t; k[0, j] = math.floor(L); z[0, j] = f(2.0 ** (L - k[0, j]))
    for i in range(1, M + 1):
        L = i * g * math.log2(math.e) / t; kr = math.floor(L); zr = f(2.0 ** (L - kr))
        z[i, 0] = zr; k[i, 0] = kr
        for j in range(1, N + 1):
            if (j - 1) % W == 0:  # renormalize the row's running value
                e = math.frexp(float(zr))[1] - 1
                zr = f(zr / f(2.0 ** e)); kr += e
            up = f(z[i-1, j] * f(2.0 ** (k[i-1, j] - kr)))
            dg = f(z[i-1, j-1] * f(2.0 ** (k[i-1, j-1] - kr)))
            zr = f(f(E[i-1, j-1] * dg) + f(G * f(up + zr)))
            z[i, j] = zr; k[i, j] = kr
    L = (np.log2(z.astype(f)).astype(f) + k.astype(f)).astype(f)
    return (L * f(t * math.log(2))).astype(np.float64)

def adjoint(H, S, g, t, dtype=np.float64, normalized=False):
    """d score / d g (score = H[M, N]) with weights from H, in `dtype` arithmetic: float32 as the
    log-space adjoint computes it (weights exp2((x - v) c) clamped at 1, x = H_pred + edge in
    float32, e pushed in float32); `normalized`: each cell's weights divided by their sum."""
    f = dtype
    H = H.astype(f); S = S.astype(f); g = f(g); c = f(math.log2(math.e) / t)
    def w(x, v): return np.exp2(np.minimum(((x - v) * c).astype(f), f(0))).astype(f)
    a = w((H[:-1, :-1] + S).astype(f), H[1:, 1:])
    b = w((H[:-1, 1:] + g).astype(f), H[1:, 1:])
    d = w((H[1:, :-1] + g).astype(f), H[1:, 1:])
    r = (f(1) / (a + b + d).astype(f)).astype(f) if normalized else f(1)
    wd, wu, wl = (np.zeros((M + 2, N + 2), f) for _ in range(3))
    wd[1:M+1, 1:N+1] = a * r; wu[1:M+1, 1:N+1] = b * r; wl[1:M+1, 1:N+1] = d * r
    # boundaries: H[i][0] from H[i-1][0] (up, weight 1), H[0][j] from H[0][j-1] (left, weight 1)
    wu[1:M+1, 0] = 1; wl[0, 1:N+1] = 1
    e = np.zeros((M + 2, N + 2), f); e[M, N] = 1
    dg = f(0)
    for i in range(M, -1, -1):
        for j in range(N, -1, -1):
            if not (i == M and j == N):
                e[i, j] = f(f(f(e[i, j+1] * wl[i, j+1]) + f(e[i+1, j] * wu[i+1, j])) + f(e[i+1, j+1] * wd[i+1, j+1]))
            dg = f(dg + f(e[i, j] * f(wu[i, j] + wl[i, j])))
    return float(dg)


def main():
    H64 = forward64(S, g, t)
    ref = adjoint(H64, S, g, t)
    f = np.float32
    variants = {
        "float32 once": H64.astype(f),
        "float32 twice (L = H / t ln2, then H)":
            (f(t * math.log(2)) * (H64 / (t * math.log(2))).astype(f)).astype(f),
        "float32 log-space recurrence": forward64(S, g, t, np.float32),
        "float32 probability space, W = 16": forward_prob32(S, g, t, 16),
    }
    print(f"M N t g = {M} {N} {t} {g}; score {H64[M, N]:.4f}; d g (float64) {ref:.6f}")
    for name, H in variants.items():
        print(f"{name:42s} max|H - H64| {np.abs(H - H64).max():.2e}  score {H[M, N]:.4f}")
    for title, kwargs in [("float64 adjoint:", {}),
                          ("float32 adjoint (the log-space adjoint's arithmetic):",
                           dict(dtype=np.float32)),
                          ("float32 adjoint, weights normalized per cell:",
                           dict(dtype=np.float32, normalized=True))]:
        print(title)
        for name, H in variants.items():
            d = adjoint(H, S, g, t, **kwargs)
            print(f"{name:42s} d g {d:.6f}  rel err {abs(d - ref) / abs(ref):.2e}")


if __name__ == "__main__":
    main()
