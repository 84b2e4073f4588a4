"""The float32 arithmetic of the scaled kernels (ops/cuda/scaled.cuh, scaled_adjoint.cuh) in
numpy, for their emulations (tools/scaled_emulation.py, tools/scaled_adjoint_emulation.py): the
device intrinsics they call (ex2.approx.ftz, lg2.approx.ftz, exact powers of two, fmaf), float32
products and sums rounded once each, the shapes' constants and the warp's shuffles. Arrays are
(..., G) with the group's lanes last; every function returns float32.
"""
import numpy as np

F = np.float32
G, R, KW = 8, 4, 8  # lanes a group, rows a lane, steps a chunk (the kernels' short shape)
KGAP, KFAC, KTINY = 12, 120, F(2.0 ** -100)  # scaled.cuh's gap_bound(8), kFactorBound, kTiny
LN2 = F(0.6931471805599453)
ERR = dict(over="ignore", invalid="ignore", under="ignore", divide="ignore")
SMALLEST_NORMAL = F(2.0 ** -126)


def f32(x):
    return np.asarray(x, dtype=F)


def flush(x):
    """Subnormals to 0, as the .ftz intrinsics read and write them."""
    return np.where(np.abs(x) < SMALLEST_NORMAL, F(0), x).astype(F)


def ex2(x):
    """ex2.approx.ftz.f32, taken as exact exp2 rounded to float32."""
    with np.errstate(**ERR):
        return flush(np.exp2(flush(f32(x)).astype(np.float64)).astype(F))


def lg2(x):
    """lg2.approx.ftz.f32, taken as exact log2 rounded to float32."""
    with np.errstate(**ERR):
        return np.log2(flush(f32(x)).astype(np.float64)).astype(F)


def pow2(e):
    return np.ldexp(F(1), np.asarray(e, dtype=np.int64).astype(np.int32)).astype(F)


def factor(e):
    """2^e clamped to [2^-126, 2^127]: the factor between two rows' scales."""
    return pow2(np.clip(e, -126, 127))


def pow2_or_zero(e):
    e = np.asarray(e)
    return np.where(e < -126, F(0), pow2(np.minimum(e, 127))).astype(F)


def pow2_to_subnormal(e):
    e = np.asarray(e)
    return np.where(e < -149, F(0), pow2(np.clip(e, -149, 127))).astype(F)


def mul(a, b):
    with np.errstate(**ERR):
        return (f32(a) * f32(b)).astype(F)


def add(a, b):
    with np.errstate(**ERR):
        return (f32(a) + f32(b)).astype(F)


def fma(a, b, c):
    """fmaf: a b + c rounded once (exact in float64 for float32 operands but the rare double
    rounding of a sum, which the emulations accept)."""
    with np.errstate(**ERR):
        return (f32(a).astype(np.float64) * f32(b).astype(np.float64)
                + f32(c).astype(np.float64)).astype(F)


def scale_down(x, e):
    """x times 2^e for e down to -252, in two factors of normal range (subnormal results kept)."""
    e = np.asarray(e)
    first = np.maximum(e, -126)
    return mul(mul(x, pow2(first)), pow2(np.maximum(e - first, -126)))


def shfl_up(x):
    """__shfl_up_sync within the group, delta 1: lane 0 keeps its own value."""
    y = x.copy()
    y[..., 1:] = x[..., :-1]
    return y


def shfl_down(x):
    """__shfl_down_sync within the group, delta 1: the last lane keeps its own value."""
    y = x.copy()
    y[..., :-1] = x[..., 1:]
    return y
