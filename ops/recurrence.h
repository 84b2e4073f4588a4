// The cell update of every model in SPEC.md: the single source of truth for the math,
// compiled for the host (CPU backend) and the device (CUDA backend) alike.
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

template <typename T>
SOFTALIGN_HD T neg_inf() {
  return -static_cast<T>(INFINITY);
}

template <typename T>
SOFTALIGN_HD bool is_finite(T x) {
  return x > neg_inf<T>() && x < static_cast<T>(INFINITY);  // false for NaN too
}

// On the GPU, float32 takes one MUFU.EX2 / MUFU.LG2 each (DESIGN "base 2"): the arguments here
// are x - max <= 0 and sums >= 1, where the fast intrinsics are accurate to a few ulps.
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
template <typename T>
SOFTALIGN_HD T nan_max(T a, T b) {
  return (a > b || a != a) ? a : b;
}

// SPEC "smax_t": t * log(sum_k exp(x_k / t)), stably; t == 0 is max; all -inf gives -inf.
template <typename T, int K>
SOFTALIGN_HD T smax(const T (&x)[K], T t) {
  T m = x[0];
SOFTALIGN_UNROLL
  for (int k = 1; k < K; ++k) m = nan_max(m, x[k]);
  if (t == T(0) || !is_finite(m)) return m;
  const T inv_t = T(1) / t;
  // DESIGN: the maximal term contributes exp(0) = 1 exactly; issue only K - 1 exps.
  T sum = T(1);
  bool skipped = false;
SOFTALIGN_UNROLL
  for (int k = 0; k < K; ++k) {
    const bool is_max = !skipped && x[k] == m;
    skipped = skipped || is_max;
    if (!is_max) sum += exp_((x[k] - m) * inv_t);
  }
  return m + t * log_(sum);
}

// DESIGN "weights": w_k = d smax_t / d x_k = softmax(x / t); one-hot on the first maximal
// term when t == 0 (SPEC's tie order) or when the max is +inf; all zero when the max is -inf.
template <typename T, int K>
SOFTALIGN_HD void smax_weights(const T (&x)[K], T t, T (&w)[K]) {
  T m = x[0];
SOFTALIGN_UNROLL
  for (int k = 1; k < K; ++k) m = nan_max(m, x[k]);
  if (m == neg_inf<T>()) {
SOFTALIGN_UNROLL
    for (int k = 0; k < K; ++k) w[k] = T(0);
    return;
  }
  if (t == T(0) || !is_finite(m)) {
    bool taken = false;
SOFTALIGN_UNROLL
    for (int k = 0; k < K; ++k) {
      w[k] = (!taken && x[k] == m) ? T(1) : T(0);
      taken = taken || x[k] == m;
    }
    return;
  }
  const T inv_t = T(1) / t;
  T sum = T(0);
SOFTALIGN_UNROLL
  for (int k = 0; k < K; ++k) {
    w[k] = exp_((x[k] - m) * inv_t);
    sum += w[k];
  }
  const T inv_sum = T(1) / sum;
SOFTALIGN_UNROLL
  for (int k = 0; k < K; ++k) w[k] *= inv_sum;
}

// The start term of local alignment (SPEC's "0"); global drops it, which -inf does exactly.
template <typename T>
SOFTALIGN_HD T start_term(bool local) {
  return local ? T(0) : neg_inf<T>();
}

// Linear gap, SPEC: H[i][j] = smax_t(0, H[i-1][j-1] + S[i-1][j-1], H[i-1][j] + g, H[i][j-1] + g).
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

// Affine gap, SPEC: A[i][j] = S[i-1][j-1] + smax_t(0, A[i-1][j-1], X[i-1][j-1], Y[i-1][j-1]).
struct AffineMatchTerms {
  template <typename T>
  SOFTALIGN_HD static void of(T a_diag, T x_diag, T y_diag, bool local, T (&x)[4]) {
    x[0] = start_term<T>(local);
    x[1] = a_diag;
    x[2] = x_diag;
    x[3] = y_diag;
  }
};

// Affine gap, SPEC: X[i][j] = smax_t(A[i-1][j] + o, X[i-1][j] + e)   (vertical gap, consumes a).
struct AffineVerticalTerms {
  static constexpr int kOpen = 0, kExtend = 1;
  template <typename T>
  SOFTALIGN_HD static void of(T a_up, T x_up, T o, T e, T (&x)[2]) {
    x[kOpen] = a_up + o;
    x[kExtend] = x_up + e;
  }
};

// Affine gap, SPEC: Y[i][j] = smax_t(A[i][j-1] + o, X[i][j-1] + o, Y[i][j-1] + e)
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
