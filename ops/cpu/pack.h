// A SIMD pack of W float32 lanes (one lane per batch item, docs/design.md, "CPU schedules") with
// the operators the cell math of recurrence.h uses: arithmetic, comparisons giving a Mask, select,
// and exp/log. GCC/Clang vector extensions: the translation unit's -m flags pick the instructions
// (AVX2 + FMA for W = 8, AVX-512 for W = 16). Include it only from a per-ISA translation unit,
// inside that unit's own namespace (SOFTALIGN_PACK_NAMESPACE), so no inline function compiled for
// one ISA can be picked by the linker for code that runs on another.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__AVX__)
#include <immintrin.h>
#endif

#ifndef SOFTALIGN_PACK_NAMESPACE
#error "define SOFTALIGN_PACK_NAMESPACE (one per instruction set) before including pack.h"
#endif

// The cell math's functions are inlined into the sweeps whatever their size: a call passes
// its packs through the stack.
#define SOFTALIGN_PACK_INLINE inline __attribute__((always_inline))

namespace softalign {
namespace SOFTALIGN_PACK_NAMESPACE {

// Two native vectors acting as one of twice the lanes, each operation issued on both halves
// (AVX2: 16 lanes in two ymm registers). A lone group of 8 lanes is latency-bound (each cell
// waits for its left neighbour's exp/log chain); two interleaved halves fill those waits.
// GCC's own 64-byte vectors on AVX2 compile to far slower code, hence this type.
template <typename H, typename E>
struct Pair {
  H lo, hi;
  static Pair of(H a, H b) { Pair r; r.lo = a; r.hi = b; return r; }
  static constexpr int kHalf = int(sizeof(H) / sizeof(E));
  E operator[](int l) const { return l < kHalf ? lo[l] : hi[l - kHalf]; }
  void set(int l, E x) {
    if (l < kHalf) lo[l] = x; else hi[l - kHalf] = x;
  }
  auto operator-() const { return of(-lo, -hi); }
  auto operator~() const { return of(~lo, ~hi); }
#define SOFTALIGN_PAIR_OP(op)                                                            \
  friend Pair operator op(Pair a, Pair b) { return of(a.lo op b.lo, a.hi op b.hi); }     \
  friend Pair operator op(Pair a, E b) { return of(a.lo op b, a.hi op b); }              \
  friend Pair operator op(E a, Pair b) { return of(a op b.lo, a op b.hi); }              \
  Pair& operator op##=(Pair b) { lo = lo op b.lo; hi = hi op b.hi; return *this; }
  SOFTALIGN_PAIR_OP(+)
  SOFTALIGN_PAIR_OP(-)
  SOFTALIGN_PAIR_OP(*)
  SOFTALIGN_PAIR_OP(/)
  SOFTALIGN_PAIR_OP(&)
  SOFTALIGN_PAIR_OP(|)
#undef SOFTALIGN_PAIR_OP
  friend Pair operator>>(Pair a, int k) { return of(a.lo >> k, a.hi >> k); }
  friend Pair operator<<(Pair a, int k) { return of(a.lo << k, a.hi << k); }
};

#define SOFTALIGN_PAIR_CMP(op)                                                                  \
  template <typename H, typename E>                                                             \
  inline auto operator op(Pair<H, E> a, Pair<H, E> b) {                                         \
    using HM = decltype(a.lo op b.lo);                                                          \
    return Pair<HM, int32_t>::of(a.lo op b.lo, a.hi op b.hi);                                   \
  }                                                                                             \
  template <typename H, typename E>                                                             \
  inline auto operator op(Pair<H, E> a, E b) {                                                  \
    using HM = decltype(a.lo op b);                                                             \
    return Pair<HM, int32_t>::of(a.lo op b, a.hi op b);                                         \
  }
SOFTALIGN_PAIR_CMP(<)
SOFTALIGN_PAIR_CMP(>)
SOFTALIGN_PAIR_CMP(<=)
SOFTALIGN_PAIR_CMP(==)
SOFTALIGN_PAIR_CMP(!=)
#undef SOFTALIGN_PAIR_CMP

// m ? a : b per lane, for native vectors and pairs alike (operator ?: cannot be overloaded).
template <typename M, typename V>
inline V vsel(M m, V a, V b) {
  return m ? a : b;
}
template <typename HM, typename H, typename E>
inline Pair<H, E> vsel(Pair<HM, int32_t> m, Pair<H, E> a, Pair<H, E> b) {
  return Pair<H, E>::of(m.lo ? a.lo : b.lo, m.hi ? a.hi : b.hi);
}
// int32 lanes to float lanes.
template <typename F, typename I>
inline F to_float(I x) {
  return __builtin_convertvector(x, F);
}
template <typename F, typename I>
inline F to_float(Pair<I, int32_t> x) {
  using HF = decltype(F{}.lo);
  return F::of(__builtin_convertvector(x.lo, HF), __builtin_convertvector(x.hi, HF));
}
template <typename V, typename E>
inline void set_lane(V& v, int l, E x) {
  v[l] = x;
}
template <typename H, typename E>
inline void set_lane(Pair<H, E>& v, int l, E x) {
  v.set(l, x);
}

// The vector types of W lanes (GCC ignores vector_size on a type that depends on W).
template <int W>
struct VectorOf;
template <>
struct VectorOf<8> {
  typedef float F __attribute__((vector_size(32)));
  typedef int32_t I __attribute__((vector_size(32)));
};
#if defined(__AVX512F__)
template <>
struct VectorOf<16> {
  typedef float F __attribute__((vector_size(64)));
  typedef int32_t I __attribute__((vector_size(64)));
};
#else
template <>
struct VectorOf<16> {
  using F = Pair<VectorOf<8>::F, float>;
  using I = Pair<VectorOf<8>::I, int32_t>;
};
#endif

template <int W>
struct Mask {
  using V = typename VectorOf<W>::I;
  V v;  // all ones (true) or all zeros (false) per lane

  friend Mask operator&(Mask a, Mask b) { return {a.v & b.v}; }
  friend Mask operator|(Mask a, Mask b) { return {a.v | b.v}; }
  friend Mask operator!(Mask a) { return {~a.v}; }
  static Mask none() { return {V{} }; }
};

// One bit per lane (the sign bits): a single vmovmskps for 8 lanes, not a lane-by-lane loop.
template <int W>
inline unsigned bits_of(Mask<W> m) {
#if defined(__AVX__)
  if constexpr (W == 8) return unsigned(_mm256_movemask_ps((__m256)m.v));
#if !defined(__AVX512F__)
  if constexpr (W == 16) {
    return unsigned(_mm256_movemask_ps((__m256)m.v.lo)) |
           (unsigned(_mm256_movemask_ps((__m256)m.v.hi)) << 8);
  }
#endif
#endif
  unsigned r = 0;
  for (int l = 0; l < W; ++l) r |= unsigned(m.v[l] != 0) << l;
  return r;
}

template <int W>
inline bool any(Mask<W> m) {
  return bits_of(m) != 0;
}

template <int W>
inline bool all(Mask<W> m) {
  return bits_of(m) == (W == 32 ? ~0u : (1u << W) - 1u);
}

template <int W>
struct Int {
  using V = typename VectorOf<W>::I;
  V v;
  Int() = default;
  Int(int32_t x) { v = V{} + x; }
  static Int of(V x) { Int r; r.v = x; return r; }
  static Int iota() {  // lane l holds l
    Int r;
    for (int l = 0; l < W; ++l) set_lane(r.v, l, int32_t(l));
    return r;
  }
  friend Int operator+(Int a, Int b) { return of(a.v + b.v); }
  friend Int operator-(Int a, Int b) { return of(a.v - b.v); }
  int32_t operator[](int l) const { return v[l]; }
  friend Mask<W> operator==(Int a, Int b) { return {a.v == b.v}; }
  friend Mask<W> operator<=(Int a, Int b) { return {a.v <= b.v}; }
};

template <int W>
struct Pack {
  using V = typename VectorOf<W>::F;
  V v;

  Pack() = default;
  Pack(float x) { v = V{} + x; }  // broadcast, as the cell math's T(0), T(1) expect
  static Pack of(V x) { Pack r; r.v = x; return r; }
  // Whole-register loads and stores (a memcpy of a pair of registers compiles to 16-byte
  // moves through the stack, whose reloads stall on store forwarding).
  static Pack load(const float* p) {
    Pack r;
#if defined(__AVX__) && !defined(__AVX512F__)
    if constexpr (W == 16) {
      r.v.lo = (typename VectorOf<8>::F)_mm256_loadu_ps(p);
      r.v.hi = (typename VectorOf<8>::F)_mm256_loadu_ps(p + 8);
      return r;
    }
#endif
    std::memcpy(&r.v, p, sizeof(V));
    return r;
  }
  void store(float* p) const {
#if defined(__AVX__) && !defined(__AVX512F__)
    if constexpr (W == 16) {
      _mm256_storeu_ps(p, (__m256)v.lo);
      _mm256_storeu_ps(p + 8, (__m256)v.hi);
      return;
    }
#endif
    std::memcpy(p, &v, sizeof(V));
  }
  float operator[](int l) const { return v[l]; }
  void set(int l, float x) { set_lane(v, l, x); }

  friend Pack operator+(Pack a, Pack b) { return of(a.v + b.v); }
  friend Pack operator-(Pack a, Pack b) { return of(a.v - b.v); }
  friend Pack operator*(Pack a, Pack b) { return of(a.v * b.v); }
  friend Pack operator/(Pack a, Pack b) { return of(a.v / b.v); }
  friend Pack operator-(Pack a) { return of(-a.v); }
  Pack& operator+=(Pack b) { v += b.v; return *this; }
  Pack& operator*=(Pack b) { v *= b.v; return *this; }
  friend Mask<W> operator>(Pack a, Pack b) { return {a.v > b.v}; }
  friend Mask<W> operator<(Pack a, Pack b) { return {a.v < b.v}; }
  friend Mask<W> operator<=(Pack a, Pack b) { return {a.v <= b.v}; }
  friend Mask<W> operator==(Pack a, Pack b) { return {a.v == b.v}; }
  friend Mask<W> operator!=(Pack a, Pack b) { return {a.v != b.v}; }
};

template <int W>
inline Pack<W> select(Mask<W> m, Pack<W> a, Pack<W> b) {
  return Pack<W>::of(vsel(m.v, a.v, b.v));
}
template <int W>
inline Int<W> select(Mask<W> m, Int<W> a, Int<W> b) {
  return Int<W>::of(vsel(m.v, a.v, b.v));
}

// Lane W - 1, from registers (v[W - 1] would keep the pack in memory).
template <int W>
SOFTALIGN_PACK_INLINE float last_lane(Pack<W> v) {
#if defined(__AVX2__) && !defined(__AVX512F__)
  if constexpr (W == 16) {
    const __m128 high = _mm256_extractf128_ps((__m256)v.v.hi, 1);
    return _mm_cvtss_f32(_mm_permute_ps(high, 3));
  }
#endif
  return v[W - 1];
}

// Lane l takes lane l - 1 and lane 0 takes x (kUp: shift_up), or lane l takes lane l + 1 and
// lane W - 1 takes x (shift_down): the band sweep's hand-over between the rows of neighbouring
// lanes. On AVX2 each register rotates by a lane and takes its end lane from its neighbour.
template <bool kUp, int W>
inline Pack<W> shift_lanes(Pack<W> v, float x) {
#if defined(__AVX2__) && !defined(__AVX512F__)
  if constexpr (W == 16) {
    const __m256i rotate = kUp ? _mm256_setr_epi32(7, 0, 1, 2, 3, 4, 5, 6)
                               : _mm256_setr_epi32(1, 2, 3, 4, 5, 6, 7, 0);
    constexpr int kEnd = kUp ? 0x01 : 0x80;  // the lane a register takes from outside
    const __m256 lo = _mm256_permutevar8x32_ps((__m256)v.v.lo, rotate);
    const __m256 hi = _mm256_permutevar8x32_ps((__m256)v.v.hi, rotate);
    const __m256 fill = _mm256_set1_ps(x);
    Pack<W> r;
    r.v.lo = (typename VectorOf<8>::F)_mm256_blend_ps(lo, kUp ? fill : hi, kEnd);
    r.v.hi = (typename VectorOf<8>::F)_mm256_blend_ps(hi, kUp ? lo : fill, kEnd);
    return r;
  }
#endif
  float a[W + 1];
  v.store(kUp ? a + 1 : a);
  a[kUp ? 0 : W] = x;
  return Pack<W>::load(kUp ? a : a + 1);
}
template <int W>
inline Pack<W> shift_up(Pack<W> v, float x) {
  return shift_lanes<true>(v, x);
}
template <int W>
inline Pack<W> shift_down(Pack<W> v, float x) {
  return shift_lanes<false>(v, x);
}

// min/max without NaN care (vminps/vmaxps): only for values whose NaN lanes are discarded.
template <int W>
inline Pack<W> fast_min(Pack<W> a, Pack<W> b) { return Pack<W>::of(vsel(a.v < b.v, a.v, b.v)); }
template <int W>
inline Pack<W> fast_max(Pack<W> a, Pack<W> b) { return Pack<W>::of(vsel(a.v > b.v, a.v, b.v)); }

namespace detail {
template <int W>
inline typename Pack<W>::V from_bits(typename Int<W>::V i) {
  typename Pack<W>::V f;
  std::memcpy(&f, &i, sizeof(f));
  return f;
}
template <int W>
inline typename Int<W>::V to_bits(typename Pack<W>::V f) {
  typename Int<W>::V i;
  std::memcpy(&i, &f, sizeof(i));
  return i;
}
}  // namespace detail

// exp: 2^n * p(r), r = x - n ln2 in [-ln2/2, ln2/2], p a degree-6 minimax polynomial (relative
// error 4e-9, so about 1 ulp after float32 rounding) evaluated by Estrin's scheme (short
// dependency chain: the sweeps are latency-bound). 2^n is added to p's exponent bits. Exact at 0
// (exp(0) = 1); 0 below -87.3 and for -inf (tiny results near there are not exact denormals);
// +inf above 88.7; NaN in, NaN out.
template <int W>
SOFTALIGN_PACK_INLINE Pack<W> exp_(Pack<W> a) {
  using F = typename Pack<W>::V;
  using I = typename Int<W>::V;
  const F x0 = a.v;
  F x = vsel(x0 < -87.33654f, F{} - 87.33654f, x0);  // n >= -126: p * 2^n keeps a valid exponent
  x = vsel(x > 88.72283f, F{} + 88.72283f, x);
  const F magic = F{} + 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const F t = x * 1.44269504088896341f + magic;
  const F n = t - magic;
  const I ni = detail::to_bits<W>(t) - detail::to_bits<W>(magic);
  F r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  const F r2 = r * r;
  const F q01 = r * 1.6666521e-1f + 4.9999994e-1f;
  const F q23 = r * 8.3687100e-3f + 4.1668390e-2f;
  const F q = (r2 * 1.3814613e-3f + q23) * r2 + q01;
  const F p = (q * r2 + r) + 1.0f;
  F y = detail::from_bits<W>(detail::to_bits<W>(p) + (ni << 23));
  y = vsel(x0 < -87.33654f, F{}, y);
  y = vsel(x0 <= 88.72283f, y, x0 + __builtin_inff());  // +inf above, NaN for NaN
  return Pack<W>::of(y);
}

// log, Cephes-style: x = 2^e * f, f in [sqrt(1/2), sqrt(2)), log f by a polynomial; about 1 ulp
// for normal x. 0 -> -inf, +inf -> +inf, negative or NaN -> NaN (denormals are not expected:
// the cell math takes logs of sums >= 1).
template <int W>
inline Pack<W> log_(Pack<W> a);

// log of normal, finite, positive x (the special cases of log_ left out: the sums the cell math
// takes logs of lie in [1, K]).
template <int W>
SOFTALIGN_PACK_INLINE Pack<W> log_positive(Pack<W> a) {
  using F = typename Pack<W>::V;
  using I = typename Int<W>::V;
  const F x0 = a.v;
  const I bits = detail::to_bits<W>(x0);
  I e = ((bits >> 23) & 0xff) - 126;
  F f = detail::from_bits<W>((bits & 0x007fffff) | 0x3f000000);  // in [0.5, 1)
  const I small = f < 0.707106781186547524f;
  e = e + small;  // small is -1 where true
  f = f + detail::from_bits<W>(detail::to_bits<W>(f) & small) - 1.0f;
  const F ef = to_float<F>(e);
  const F z = f * f;
  // Cephes' degree-8 polynomial, by Estrin's scheme (a short dependency chain).
  const F z2 = z * z;
  const F p01 = f * -2.4999993993e-1f + 3.3333331174e-1f;
  const F p23 = f * -1.6668057665e-1f + 2.0000714765e-1f;
  const F p45 = f * -1.2420140846e-1f + 1.4249322787e-1f;
  const F p67 = f * -1.1514610310e-1f + 1.1676998740e-1f;
  const F p03 = p23 * z + p01;
  const F p47 = p67 * z + p45;
  const F p07 = p47 * z2 + p03;
  const F p = (z2 * z2) * 7.0376836292e-2f + p07;
  F y = p * f * z;
  y = y + ef * -2.12194440e-4f;
  y = y - 0.5f * z;
  y = f + y + ef * 0.693359375f;
  return Pack<W>::of(y);
}

template <int W>
SOFTALIGN_PACK_INLINE Pack<W> log_(Pack<W> a) {
  using F = typename Pack<W>::V;
  const F x0 = a.v;
  F y = log_positive(a).v;
  y = vsel(x0 == 0.0f, F{} - __builtin_inff(), y);
  y = vsel(x0 < 0.0f, F{} + __builtin_nanf(""), y);
  y = vsel(x0 == __builtin_inff(), x0, y);
  y = vsel(x0 != x0, x0, y);
  return Pack<W>::of(y);
}

// 2^y for y <= 0 or -inf (the cell math's (x_k - max) * log2(e) / t): 2^n * p(f), n = round(y),
// f = y - n in [-1/2, 1/2] (exact), p a degree-6 minimax polynomial (relative error 1.6e-8) by
// Estrin's scheme. Exact at 0; 0 below -126 (kZeroBelow; else a positive value <= 2^-126 there,
// for sums that it cannot change). y > 0 or NaN give unspecified values: callers discard those
// lanes.
template <bool kZeroBelow = true, int W>
SOFTALIGN_PACK_INLINE Pack<W> exp2_nonpositive(Pack<W> a) {
  using F = typename Pack<W>::V;
  using I = typename Int<W>::V;
  const F y0 = a.v;
  const F y = vsel(y0 > -126.0f, y0, F{} - 126.0f);  // vmaxps
  const F magic = F{} + 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const F t = y + magic;
  const F n = t - magic;
  const I ni = detail::to_bits<W>(t) - detail::to_bits<W>(magic);
  const F f = y - n;
  const F f2 = f * f;
  const F q01 = f * 2.4022647738456726e-1f + 6.9314718246459961e-1f;
  const F q23 = f * 9.6184369176626205e-3f + 5.5503323674201965e-2f;
  const F q45 = f * 1.5353361959569156e-4f + 1.3398875016719103e-3f;
  const F q = (q45 * f2 + q23) * f2 + q01;
  const F p = f * q + 1.0f;
  F r = detail::from_bits<W>(detail::to_bits<W>(p) + (ni << 23));
  if (kZeroBelow) r = vsel(y0 < -126.0f, F{}, r);
  return Pack<W>::of(r);
}

// Lanes where a or b is NaN (one vcmpunordps per 8 lanes).
template <typename M, typename V>
inline M unordered_bits(V a, V b) {
#if defined(__AVX__)
  if constexpr (sizeof(V) == 32) return (M)_mm256_cmp_ps((__m256)a, (__m256)b, _CMP_UNORD_Q);
#endif
  return (a != a) | (b != b);
}
template <typename M, typename H, typename E>
inline M unordered_bits(Pair<H, E> a, Pair<H, E> b) {
  using HM = decltype(M{}.lo);
  return M::of(unordered_bits<HM>(a.lo, b.lo), unordered_bits<HM>(a.hi, b.hi));
}
template <int W>
inline Mask<W> unordered(Pack<W> a, Pack<W> b) {
  return {unordered_bits<typename Mask<W>::V>(a.v, b.v)};
}

}  // namespace SOFTALIGN_PACK_NAMESPACE
}  // namespace softalign
