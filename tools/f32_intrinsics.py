"""The float32 arithmetic of the scaled kernels (ops/cuda/scaled.cuh, scaled_adjoint.cuh, and the
affine scaled forward's) in numpy, for their emulations (tools/scaled_emulation.py,
tools/scaled_adjoint_emulation.py, tools/affine_scaled_emulation.py): the device intrinsics they
call (ex2.approx.ftz, lg2.approx.ftz, exact powers of two, fmaf), float32 products and sums
rounded once each, the shapes' constants, the warp's shuffles, and the row scales' shared steps
(a chunk's renormalisation, a local row's end, the lanes' ends). Arrays are (..., G) with the
group's lanes last; values are float32 but for local_score's float64 scores.
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


def max_nan(a, b):
    """The kernels' max that keeps a NaN (dp::device::max_nan)."""
    return np.where(np.isnan(a) | np.isnan(b), F(np.nan), np.maximum(a, b)).astype(F)


def unit_mantissa(z):
    """A chunk's renormalisation (Rows::renormalize): (z', e) with z = z' 2^e and z' in [1, 2)
    where z is in [2^-126, 2^127); elsewhere z as it is and e = 0."""
    bits = f32(z).view(np.uint32).astype(np.int64)
    normal = (bits - 0x00800000 >= 0) & (bits - 0x00800000 < 0x7e800000)
    e = np.where(normal, (bits >> 23) - 127, 0)
    zn = np.where(normal, ((bits & 0x007fffff) | 0x3f800000).astype(np.uint32).view(F), z)
    return zn.astype(F), e


def follow_k(k, acc, ka, open_):
    """A local row's end after its k changed (Rows::renormalize): (one, acc, ka, to_acc), the
    end moved up to k where `open_` (its cells may still come)."""
    one = pow2_or_zero(-k)
    acc = np.where(open_, scale_down(acc, ka - np.maximum(ka, k)), acc).astype(F)
    ka = np.where(open_, np.maximum(ka, k), ka)
    return one, acc, ka, pow2_to_subnormal(k - ka)


def rows_total(acc, ka, soft):
    """A lane's local rows in one sum (or max) at their largest exponent (scaled.cuh's
    rows_total): (total, top), the rows' end being total 2^top. acc, ka: (R, ..., G)."""
    top = ka.max(axis=0)
    total = np.zeros(acc.shape[1:], F)
    for r in range(acc.shape[0]):
        x = scale_down(acc[r], ka[r] - top)
        total = add(total, x) if soft else max_nan(total, x)
    return total, top


def local_score(total, top, t, soft):
    """The item's local score from its lanes' ends total 2^top (B, G), in float64: the lanes'
    max, or t ln(1 + sum of exp(end / t)), with the empty alignment's 0."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        best = np.float64(t) * np.log(2) * (np.log2(total.astype(np.float64)) + top)
        has = total > 0
        if not soft:
            return np.maximum(np.max(np.where(has, best, 0.0), axis=1), 0.0)
        mx = np.maximum(np.max(np.where(has, best, 0.0), axis=1, keepdims=True), 0.0)
        s = np.exp(-mx[:, 0] / t) + np.sum(np.where(has, np.exp((best - mx) / t), 0.0), axis=1)
        return mx[:, 0] + t * np.log(s)
