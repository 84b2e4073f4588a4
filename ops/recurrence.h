// The cell update of every model of docs/spec.md in log space
// (docs/design.md, "Log space: the cell"): the single source of truth for the math, compiled for
// the host (CPU backend) and the device (CUDA backend) alike. prob_space.h is its counterpart in
// probability space.
#pragma once

#include <cmath>
#include <type_traits>

#if defined(__CUDACC__)
#define SOFTALIGN_HD __host__ __device__ __forceinline__
#else
#define SOFTALIGN_HD inline
#endif

#if defined(__CUDA_ARCH__)
#define SOFTALIGN_UNROLL _Pragma("unroll")
#else
#define SOFTALIGN_UNROLL
#endif

namespace softalign {
namespace dp {

// The cell math below is generic over the value type V: a scalar (float, double: CPU and CUDA
// alike) or a SIMD pack of items (ops/cpu/pack.h, one lane per item,
// docs/design.md, "CPU schedules"). For a pack, comparisons give masks, select blends, and any/all
// ask whether some/every lane is set; the pack type provides these (and exp_/log_) next to itself,
// found by argument-dependent lookup.
template <typename V>
struct Lanes {
  using Scalar = V;  // a pack type specialises this with its element type
};
template <typename V>
using scalar_of = typename Lanes<V>::Scalar;

SOFTALIGN_HD bool any(bool m) { return m; }
SOFTALIGN_HD bool all(bool m) { return m; }
template <typename T>
SOFTALIGN_HD T select(bool m, T a, T b) {
  return m ? a : b;
}

template <typename T>
SOFTALIGN_HD T neg_inf() {
  return -static_cast<T>(INFINITY);
}

template <typename T>
SOFTALIGN_HD auto is_finite(T x) {
  return (x > neg_inf<T>()) & (x < static_cast<T>(INFINITY));  // false for NaN too
}

// On the GPU, float32 takes one MUFU.EX2 / MUFU.LG2 each (docs/design.md, "Log space: the cell"):
// the arguments here are x - max <= 0 and sums >= 1, where the fast intrinsics are accurate to a
// few ulps.
template <typename T>
SOFTALIGN_HD T exp_(T x) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, float>) return __expf(x);
  return ::exp(x);
#else
  return std::exp(x);
#endif
}

template <typename T>
SOFTALIGN_HD T log_(T x) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, float>) return __logf(x);
  return ::log(x);
#else
  return std::log(x);
#endif
}

// max that propagates NaN (std::fmax would drop it): a NaN score must reach its item's result.
template <typename V>
SOFTALIGN_HD V nan_max(V a, V b) {
  return select((a > b) | (a != a), a, b);
}

// The K - 1 terms of x other than one maximal one, by a min/max network (no branches, so the
// same for every SIMD lane or GPU thread whichever term is the max), and the maximum that the
// network's pairwise maxima (max2) give on the way: 6 min/max in all for K = 4, where a separate
// chain for the maximum takes 8. V is a pack (fast_min / fast_max beside it, found by
// argument-dependent lookup) or float (below, on the GPU). NaN handling is max2's (a NaN-
// propagating max makes the maximum NaN, and the rest moot) or the caller's.
SOFTALIGN_HD float fast_min(float a, float b) { return fminf(a, b); }
SOFTALIGN_HD float fast_max(float a, float b) { return fmaxf(a, b); }
template <typename V, int K, class Max2>
SOFTALIGN_HD V max_and_rest(const V (&x)[K], V (&rest)[K - 1], Max2 max2) {
  static_assert(K >= 2 && K <= 4, "the network covers 2, 3 or 4 terms");
  if constexpr (K == 2) {
    rest[0] = fast_min(x[0], x[1]);
    return max2(x[0], x[1]);
  } else {
    const V hi01 = max2(x[0], x[1]);
    rest[0] = fast_min(x[0], x[1]);
    if constexpr (K == 3) {
      rest[1] = fast_min(hi01, x[2]);
      return max2(hi01, x[2]);
    } else {
      const V hi23 = max2(x[2], x[3]);
      rest[1] = fast_min(x[2], x[3]);
      rest[2] = fast_min(hi01, hi23);
      return max2(hi01, hi23);
    }
  }
}
template <typename V, int K>
SOFTALIGN_HD void terms_below_max(const V (&x)[K], V (&rest)[K - 1]) {
  max_and_rest(x, rest, [](V a, V b) { return fast_max(a, b); });
}

#if defined(__CUDACC__)
// float32 on the GPU, branch-free (docs/design.md, "Log space: the cell"): the hardware's exp2 /
// log2 / reciprocal (one MUFU instruction each) and a NaN-propagating max.
namespace device {
__device__ __forceinline__ float max_nan(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ float ex2(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float lg2(float x) {
  float r;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float rcp(float x) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

// smax_t over K terms: m + t ln2 log2(1 + sum of exp2 of the K - 1 non-maximal terms), which a
// min/max network picks without branches; -inf, +inf and NaN maxima pass through (NaN in any
// term makes the max NaN).
template <int K>
__device__ __forceinline__ float smax(const float (&x)[K], float t, float c) {  // c = log2(e) / t
  float rest[K - 1];
  const float m = max_and_rest(x, rest, [](float a, float b) { return max_nan(a, b); });
  // t == 0 (the max) and non-finite maxima select m at the end instead of branching per cell.
  // (x - m) c as x c - m c: one FFMA a term. Its error, that of rounding m c, is half an ulp of m
  // in the result (the rounding of m itself). But a term tied with m gets that rounding's
  // residual, up to ulp(m c) / 2, as its exponent: past 128 once |m| / t passes about 1.5e9, and
  // ex2 overflows (global items of scores 2 g, g = -1e4, t = 1e-6, scored +inf). So the sum is
  // held at K, its bound: where that bites, t ln K is below half an ulp of m.
  const float mc = m * c;
  float sum = 1.f;
#pragma unroll
  for (int k = 0; k < K - 1; ++k) sum += ex2(fmaf(rest[k], c, -mc));
  const float v = fmaf(lg2(fminf(sum, float(K))), t * kLn2, m);
  return (t != 0.f) & (fabsf(m) < INFINITY) ? v : m;
}
// The exp2 scale by __fdividef (a reciprocal and a multiply), not an IEEE division; sweeps work
// it out once (the three-argument smax) rather than per cell. Past 2^126 __fdividef gives 0, and
// a -inf term (every local boundary, global's dropped start term) times 0 is NaN ((1, 1, 1) affine
// at t = 1e38 scored NaN): there the IEEE division.
__device__ __forceinline__ float exp2_scale(float t) {
  return t > 0x1p126f ? kLog2e / t : __fdividef(kLog2e, t);
}
template <int K>
__device__ __forceinline__ float smax(const float (&x)[K], float t) {
  return smax(x, t, exp2_scale(t));
}
}  // namespace device
#endif

// sum_k exp((x_k - m) / t) with m = max_k x_k (not NaN): the maximal term contributes exp(0) = 1
// exactly, so only K - 1 exps are issued (docs/design.md, "Log space: the cell"). A scalar skips
// the first maximal term; a pack (whose lanes have their maxima at different k) sorts the terms
// with a min/max network instead, leaving the K - 1 non-maximal ones. Both are the same sum, in a
// different order.
template <typename V, int K>
SOFTALIGN_HD V sum_exp_below_max(const V (&x)[K], V m, V inv_t) {
  V sum = V(1);
  if constexpr (std::is_floating_point_v<V>) {
    bool skipped = false;
SOFTALIGN_UNROLL
    for (int k = 0; k < K; ++k) {
      const bool is_max = !skipped && x[k] == m;
      skipped = skipped || is_max;
      if (!is_max) sum += exp_((x[k] - m) * inv_t);
    }
  } else {
    V rest[K - 1];
    terms_below_max(x, rest);
    for (int k = 0; k < K - 1; ++k) sum += exp_((rest[k] - m) * inv_t);
  }
  return sum;
}

// smax_t (docs/spec.md, "Temperature"): t * log(sum_k exp(x_k / t)), stably; t == 0 is max; all
// -inf gives -inf.
template <typename V, int K>
SOFTALIGN_HD V smax(const V (&x)[K], scalar_of<V> t) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<V, float>) return device::smax(x, t);
#endif
  using T = scalar_of<V>;
  V m = x[0];
SOFTALIGN_UNROLL
  for (int k = 1; k < K; ++k) m = nan_max(m, x[k]);
  if (t == T(0)) return m;
  const auto finite = is_finite(m);
  if (!any(finite)) return m;
  const V inv_t = V(T(1) / t);
  const V sum = sum_exp_below_max(x, m, inv_t);
  return select(finite, m + V(t) * log_(sum), m);
}

// One-hot on the first maximal term (docs/spec.md, "Gradients": the tie order); zero where m is
// -inf or NaN.
template <typename V, int K>
SOFTALIGN_HD void hard_weights(const V (&x)[K], V m, V (&w)[K]) {
  const auto dead = m == neg_inf<V>();
  auto taken = dead;
SOFTALIGN_UNROLL
  for (int k = 0; k < K; ++k) {
    const auto hit = x[k] == m;
    w[k] = select(hit & !taken, V(1), V(0));
    taken = taken | hit;
  }
}

// docs/design.md, "Log space: the adjoint": w_k = d smax_t / d x_k = softmax(x / t); one-hot on the
// first maximal term when t == 0 (docs/spec.md, "Gradients": the tie order) or when the max is
// +inf; all zero when the max is -inf.
template <typename V, int K>
SOFTALIGN_HD void smax_weights(const V (&x)[K], scalar_of<V> t, V (&w)[K]) {
  using T = scalar_of<V>;
  V m = x[0];
SOFTALIGN_UNROLL
  for (int k = 1; k < K; ++k) m = nan_max(m, x[k]);
  const auto finite = is_finite(m);
  if (t == T(0) || !any(finite)) {
    hard_weights(x, m, w);
    return;
  }
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<V, float>) {  // exp2, and one reciprocal for the K divisions
    const float c = device::exp2_scale(t);  // not 0 past t = 2^126: a -inf term times 0 is NaN
    float sum = 0.f;
SOFTALIGN_UNROLL
    for (int k = 0; k < K; ++k) {
      w[k] = device::ex2((x[k] - m) * c);
      sum += w[k];
    }
    const float inv_sum = device::rcp(sum);
SOFTALIGN_UNROLL
    for (int k = 0; k < K; ++k) w[k] *= inv_sum;
    return;
  }
#endif
  const V inv_t = V(T(1) / t);
  V sum = V(0);
SOFTALIGN_UNROLL
  for (int k = 0; k < K; ++k) {
    w[k] = exp_((x[k] - m) * inv_t);
    sum += w[k];
  }
  const V inv_sum = V(1) / sum;
SOFTALIGN_UNROLL
  for (int k = 0; k < K; ++k) w[k] *= inv_sum;
  if (!all(finite)) {  // packs only: some lanes take the one-hot weights
    V h[K];
    hard_weights(x, m, h);
SOFTALIGN_UNROLL
    for (int k = 0; k < K; ++k) w[k] = select(finite, w[k], h[k]);
  }
}

// The start term of local alignment (docs/spec.md, "Score": the "0"); global drops it, which -inf
// does exactly.
template <typename T>
SOFTALIGN_HD T start_term(bool local) {
  return local ? T(0) : neg_inf<T>();
}

// docs/spec.md, "Linear gap":
//   H[i][j] = smax_t(0, H[i-1][j-1] + S[i-1][j-1], H[i-1][j] + g, H[i][j-1] + g).
struct LinearTerms {
  static constexpr int kMatch = 1, kUp = 2, kLeft = 3;
  template <typename T>
  SOFTALIGN_HD static void of(T diag, T up, T left, T s, T g, bool local, T (&x)[4]) {
    x[0] = start_term<T>(local);
    x[kMatch] = diag + s;
    x[kUp] = up + g;
    x[kLeft] = left + g;
  }
};

// docs/spec.md, "Affine gap":
//   A[i][j] = S[i-1][j-1] + smax_t(0, A[i-1][j-1], X[i-1][j-1], Y[i-1][j-1]).
struct AffineMatchTerms {
  template <typename T>
  SOFTALIGN_HD static void of(T a_diag, T x_diag, T y_diag, bool local, T (&x)[4]) {
    x[0] = start_term<T>(local);
    x[1] = a_diag;
    x[2] = x_diag;
    x[3] = y_diag;
  }
};

// docs/spec.md, "Affine gap":
//   X[i][j] = smax_t(A[i-1][j] + o, X[i-1][j] + e)   (vertical gap, consumes a).
struct AffineVerticalTerms {
  static constexpr int kOpen = 0, kExtend = 1;
  template <typename T>
  SOFTALIGN_HD static void of(T a_up, T x_up, T o, T e, T (&x)[2]) {
    x[kOpen] = a_up + o;
    x[kExtend] = x_up + e;
  }
};

// docs/spec.md, "Affine gap": Y[i][j] = smax_t(A[i][j-1] + o, X[i][j-1] + o, Y[i][j-1] + e)
// (horizontal gap, consumes b; X may be followed by Y, Y never by X).
struct AffineHorizontalTerms {
  static constexpr int kOpenFromA = 0, kOpenFromX = 1, kExtend = 2;
  template <typename T>
  SOFTALIGN_HD static void of(T a_left, T x_left, T y_left, T o, T e, T (&x)[3]) {
    x[kOpenFromA] = a_left + o;
    x[kOpenFromX] = x_left + o;
    x[kExtend] = y_left + e;
  }
};

}  // namespace dp
}  // namespace softalign
