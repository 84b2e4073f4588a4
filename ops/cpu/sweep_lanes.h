// sweep.h's row-major forward and adjoint, run for W items at once, one per lane of a Pack.
// The cells are recurrence.h's, computed on packs; this file only orders them and keeps each
// item to its own (m, n) block: the group sweeps the largest block of its items, and a lane's
// result and gradients take only cells inside its block (cells outside it depend on cells
// inside, never the other way; their adjoint stays exactly zero, and pushes are masked so that
// 0 * NaN never leaks in). Included by one translation unit per instruction set, after pack.h,
// inside that unit's namespace.
#pragma once

#include <cstdlib>
#include <cstring>
#include <new>

namespace softalign {
namespace dp {
template <int W>
struct Lanes<SOFTALIGN_PACK_NAMESPACE::Pack<W>> {
  using Scalar = float;
};
}  // namespace dp

namespace SOFTALIGN_PACK_NAMESPACE {

// A zero-filled heap array (no std containers: their inline code would be compiled for this
// ISA and might be shared with other translation units).
template <typename E>
struct Buffer {
  E* p = nullptr;
  explicit Buffer(int64_t count) {
    p = static_cast<E*>(std::aligned_alloc(64, ((count * sizeof(E) + 63) / 64) * 64));
    if (!p && count > 0) throw std::bad_alloc();  // not a memset of null: a MemoryError
    std::memset(static_cast<void*>(p), 0, count * sizeof(E));
  }
  ~Buffer() { std::free(p); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  E& operator[](int64_t k) const { return p[k]; }
};

// docs/spec.md, "Notation": G[max(i,1)-1]...
inline int64_t clamp_index(int k) { return k > 0 ? k - 1 : 0; }

// The 8 x 8 block src[r][0..8) (r = 0..7) written transposed: dst[k][r] = src[r][k].
// Lane-major rows of the items to a pack per column and back, without 64 scalar moves.
inline void transpose8(const float* const* src, float* const* dst) {
#if defined(__AVX__)
  const __m256 r0 = _mm256_loadu_ps(src[0]), r1 = _mm256_loadu_ps(src[1]);
  const __m256 r2 = _mm256_loadu_ps(src[2]), r3 = _mm256_loadu_ps(src[3]);
  const __m256 r4 = _mm256_loadu_ps(src[4]), r5 = _mm256_loadu_ps(src[5]);
  const __m256 r6 = _mm256_loadu_ps(src[6]), r7 = _mm256_loadu_ps(src[7]);
  const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
  const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
  const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
  const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  _mm256_storeu_ps(dst[0], _mm256_permute2f128_ps(u0, u4, 0x20));
  _mm256_storeu_ps(dst[1], _mm256_permute2f128_ps(u1, u5, 0x20));
  _mm256_storeu_ps(dst[2], _mm256_permute2f128_ps(u2, u6, 0x20));
  _mm256_storeu_ps(dst[3], _mm256_permute2f128_ps(u3, u7, 0x20));
  _mm256_storeu_ps(dst[4], _mm256_permute2f128_ps(u0, u4, 0x31));
  _mm256_storeu_ps(dst[5], _mm256_permute2f128_ps(u1, u5, 0x31));
  _mm256_storeu_ps(dst[6], _mm256_permute2f128_ps(u2, u6, 0x31));
  _mm256_storeu_ps(dst[7], _mm256_permute2f128_ps(u3, u7, 0x31));
#else
  for (int r = 0; r < 8; ++r)
    for (int k = 0; k < 8; ++k) dst[k][r] = src[r][k];
#endif
}

// The same with the transposed rows at a stride: dst[k * stride + r] = src[r][k].
inline void transpose8(const float* const* src, float* dst, int64_t stride) {
  float* rows[8];
  for (int k = 0; k < 8; ++k) rows[k] = dst + k * stride;
  transpose8(src, rows);
}

// The W lanes' items: which item, its block, where its inputs are.
template <int W>
struct Group {
  int64_t b[W];
  bool valid[W];  // false for lanes that repeat another lane's item to fill the group
  int m[W], n[W];
  int mmax = 0, nmax = 0;
  Int<W> mi, ni;

  Group(const ProblemView<float>& p, const int64_t* items) {
    int64_t first = -1;
    for (int l = 0; l < W; ++l)
      if (items[l] >= 0 && first < 0) first = items[l];
    for (int l = 0; l < W; ++l) {
      valid[l] = items[l] >= 0;
      b[l] = valid[l] ? items[l] : first;
      m[l] = static_cast<int>(p.lengths_a ? p.lengths_a[b[l]] : p.M);
      n[l] = static_cast<int>(p.lengths_b ? p.lengths_b[b[l]] : p.N);
      mmax = m[l] > mmax ? m[l] : mmax;
      nmax = n[l] > nmax ? n[l] : nmax;
      set_lane(mi.v, l, m[l]);
      set_lane(ni.v, l, n[l]);
    }
  }
};

// One penalty of the W items, staged for row i as a pack per column j = 0..nmax.
template <int W>
struct PenaltyRow {
  using P = Pack<W>;
  const float* base[W];
  int64_t si = 0, sj = 0;
  int nmax;
  Buffer<float> row;

  PenaltyRow(const Group<W>& g, const float* data, int64_t sb, int64_t si_, int64_t sj_)
      : si(si_), sj(sj_), nmax(g.nmax), row(int64_t(g.nmax + 1) * W) {
    for (int l = 0; l < W; ++l) base[l] = data ? data + g.b[l] * sb : nullptr;
    if (data && si == 0 && sj == 0) fill(0);
  }
  void stage(int i) {
    if (base[0] && (si != 0 || sj != 0)) fill(i);
  }
  void fill(int i) {
    for (int l = 0; l < W; ++l) {
      const float* src = base[l] + clamp_index(i) * si;
      for (int j = 0; j <= nmax; ++j) row[int64_t(j) * W + l] = src[clamp_index(j) * sj];
    }
  }
  P at(int j) const { return P::load(row.p + int64_t(j) * W); }
};

// The gradient of one penalty of the W items: a running pack when the penalty is one value
// per item, else a row of packs added to the items' planes once the row is done.
template <int W>
struct PenaltyGradRow {
  using P = Pack<W>;
  float* base[W];
  int64_t si = 0, sj = 0;
  bool one_value;
  P total = P(0.0f);
  Buffer<float> row;

  PenaltyGradRow(const Group<W>& g, float* data, int64_t sb, int64_t si_, int64_t sj_)
      : si(si_), sj(sj_), one_value(si_ == 0 && sj_ == 0), row(int64_t(g.nmax + 1) * W) {
    for (int l = 0; l < W; ++l) base[l] = data ? data + g.b[l] * sb : nullptr;
  }
  void add(int j, P x) {
    if (one_value) {
      total += x;
    } else {
      float* r = row.p + int64_t(j) * W;
      (P::load(r) + x).store(r);
    }
  }
  // Row i is done: add it to the items whose block holds it.
  void flush(const Group<W>& g, int i) {
    if (one_value || !base[0]) return;
    for (int l = 0; l < W; ++l) {
      if (!g.valid[l] || i > g.m[l]) continue;
      float* dst = base[l] + clamp_index(i) * si;
      for (int j = 0; j <= g.n[l]; ++j) dst[clamp_index(j) * sj] += row[int64_t(j) * W + l];
    }
    std::memset(static_cast<void*>(row.p), 0, sizeof(float) * (g.nmax + 1) * W);
  }
  void finish(const Group<W>& g) {
    if (!one_value || !base[0]) return;
    for (int l = 0; l < W; ++l)
      if (g.valid[l]) base[l][0] += total[l];
  }
};

// sweep.h's LocalEnd with a lane per item; `in` masks the cells of each item's block.
template <int W>
struct LocalEndLanes {
  using P = Pack<W>;
  using I = Int<W>;
  bool soft;
  float t;
  P inv_t;
  P best = P(0.0f);
  I best_i = I(0), best_j = I(0);
  P soft_sum = P(1.0f);

  LocalEndLanes(const dp::Config<float>& c)
      : soft(c.soft_reduction && c.temperature > 0.0f), t(c.temperature),
        inv_t(soft ? 1.0f / c.temperature : 0.0f) {}

  // The max reduction's seed, d score / d V = 1 at the best cell: added to row i's adjoints
  // `e` (a pack per column) before the row is swept, for the lanes whose best cell is in row i.
  void seed_row(int i, P* e, P grad) const {
    const Mask<W> here = best_i == I(i);
    if (i == 0 || !any(here)) return;
    for (int l = 0; l < W; ++l) {
      if (!here.v[l]) continue;
      P& c = e[best_j.v[l]];
      c.set(l, c[l] + grad[l]);
    }
  }

  void add(P v, int i, int j, Mask<W> in) {
    if (soft) {  // one exp: exp(-|v - best| / t), scaling the old sum when v is the new best
      const Mask<W> gt = v > best;
      const P e = select(v == best, P(1.0f), exp_(select(gt, best - v, v - best) * inv_t));
      soft_sum = select(in, select(gt, soft_sum * e + P(1.0f), soft_sum + e), soft_sum);
      best = select(in & gt, v, best);
    } else {  // first maximal cell in row-major order; NaN sticks
      const Mask<W> take = ((v > best) | (v != v)) & (best == best) & in;
      best = select(take, v, best);
      best_i = select(take, I(i), best_i);
      best_j = select(take, I(j), best_j);
    }
  }
  P score() const { return soft ? best + P(t) * log_(soft_sum) : best; }
  // d score / d V[i][j] (sweep.h's LocalEnd::seed): soft, exp((v - best) / t) / soft_sum,
  // normalised by construction (not exp((v - score) / t), which divides score's rounding by t).
  P seed(P v, int i, int j) const {
    if (soft) return select(v == best, P(1.0f), exp_((v - best) * inv_t)) / soft_sum;
    return select((best_i == I(i)) & (best_j == I(j)), P(1.0f), P(0.0f));
  }
};

// recurrence.h's smax and smax_weights for packs, the same math with fewer instructions per
// cell: t's constants computed once; a NaN-propagating max from vmaxps and vcmpunordps; base-2
// exps of the non-positive (x_k - max) * log2(e) / t (exp2_nonpositive: no overflow or NaN
// handling, which only lanes with a non-finite max would need, and those take the max); the log
// of a sum in [1, K] without log_'s special cases.
template <int W>
struct CellMath {
  using P = Pack<W>;
  using Mk = Mask<W>;
  bool hard;      // t == 0: the max, one-hot weights
  bool t_finite;  // t < inf
  P t, c;         // t and log2(e) / t

  explicit CellMath(float temperature)
      : hard(temperature == 0.0f), t_finite(temperature < __builtin_inff()), t(temperature),
        c(temperature > 0.0f ? 1.4426950408889634f / temperature : 0.0f) {}

  template <int K>
  SOFTALIGN_PACK_INLINE static P nan_max(const P (&x)[K]) {
    static_assert(K >= 2 && K <= 4, "2, 3 or 4 terms");
    const P nan = P(__builtin_nanf(""));
    if constexpr (K == 2) {
      return select(unordered(x[0], x[1]), nan, fast_max(x[0], x[1]));
    } else if constexpr (K == 3) {
      const Mk any_nan = unordered(x[0], x[1]) | unordered(x[2], x[2]);
      return select(any_nan, nan, fast_max(fast_max(x[0], x[1]), x[2]));
    } else {
      const Mk any_nan = unordered(x[0], x[1]) | unordered(x[2], x[3]);
      return select(any_nan, nan, fast_max(fast_max(x[0], x[1]), fast_max(x[2], x[3])));
    }
  }

  template <int K>
  SOFTALIGN_PACK_INLINE P smax(const P (&x)[K]) const {
    const P m = nan_max(x);
    if (hard) return m;
    P rest[K - 1];  // the K - 1 terms below the max
    dp::terms_below_max(x, rest);
    // Terms below 2^-126 of the max are not flushed to 0: they vanish in the sum (>= 1) anyway.
    P sum = P(1.0f);
    for (int k = 0; k < K - 1; ++k) sum += exp2_nonpositive<false>((rest[k] - m) * c);
    // sum is finite in [1, K] in every lane (lanes with a non-finite max included), so with a
    // finite t, m + t log(sum) is m itself where m is +-inf or NaN.
    const P v = m + t * log_positive(sum);
    return t_finite ? v : select(dp::is_finite(m), v, m);
  }

  template <int K>
  SOFTALIGN_PACK_INLINE void weights(const P (&x)[K], P (&w)[K]) const {
    const P m = nan_max(x);
    const Mk finite = dp::is_finite(m);
    if (hard || !any(finite)) {
      dp::hard_weights(x, m, w);
      return;
    }
    P sum = P(0.0f);
    for (int k = 0; k < K; ++k) {
      w[k] = exp2_nonpositive((x[k] - m) * c);
      sum += w[k];
    }
    const P inv_sum = P(1.0f) / sum;
    for (int k = 0; k < K; ++k) w[k] *= inv_sum;
    if (!all(finite)) {  // some lanes take the one-hot weights
      P h[K];
      dp::hard_weights(x, m, h);
      for (int k = 0; k < K; ++k) w[k] = select(finite, w[k], h[k]);
    }
  }
};

template <int W, bool kAffine>
struct GroupSweep {
  using P = Pack<W>;
  using Mk = Mask<W>;
  using I = Int<W>;
  static constexpr int kStates = kAffine ? 3 : 1;

  const ProblemView<float>& p;
  const dp::Config<float> c;
  const Group<W> g;
  const int64_t width;
  Buffer<float> s_row;  // the scores of row i, a pack per column
  PenaltyRow<W> open, extend;
  Buffer<Mk> col_in;  // j <= n, per lane
  int rows_kept = 0;
  P* table = nullptr;
  LocalEndLanes<W> end;
  CellMath<W> cell;

  GroupSweep(const ProblemView<float>& p_, const int64_t* items)
      : p(p_), c(p_.config), g(p_, items), width(g.nmax + 1), s_row(width * W),
        open(g, p_.open, p_.open_sb, p_.open_si, p_.open_sj),
        extend(g, p_.extend, p_.extend_sb, p_.extend_si, p_.extend_sj), col_in(width),
        end(p_.config), cell(p_.config.temperature) {
    for (int j = 0; j <= g.nmax; ++j) col_in[j] = I(j) <= g.ni;
  }

  P* row(int state, int i) const {
    return table + (int64_t(state) * rows_kept + i % rows_kept) * width;
  }
  Mk row_in(int i) const { return I(i) <= g.mi; }
  P s(int j) const { return P::load(s_row.p + int64_t(j) * W); }

  void stage(int i) {
    const float* src[W];
    for (int l = 0; l < W; ++l) src[l] = p.scores + g.b[l] * p.M * p.N + int64_t(i - 1) * p.N;
    int j0 = 0;
    if constexpr (W % 8 == 0) {  // whole blocks of 8 columns x 8 lanes transposed in registers
      for (; j0 + 8 <= g.nmax; j0 += 8) {
        for (int lb = 0; lb < W; lb += 8) {
          const float* block[8];
          for (int l = 0; l < 8; ++l) block[l] = src[lb + l] + j0;
          transpose8(block, s_row.p + int64_t(j0 + 1) * W + lb, W);
        }
      }
    }
    for (int l = 0; l < W; ++l) {
      float* dst = s_row.p + W + l;
      for (int j = j0; j < g.nmax; ++j) dst[int64_t(j) * W] = src[l][j];
    }
    open.stage(i);
    if (kAffine) extend.stage(i);
  }

  // Lane l of pack v[j_l], for the lanes whose last row is i; into out[l].
  void take_last(int i, const P* r, float* out) const {
    for (int l = 0; l < W; ++l)
      if (g.m[l] == i) out[l] = r[g.n[l]][l];
  }

  // ------------------------------------------------------------ forward (sweep.h's, per lane)
  P forward_linear() {
    const bool local = c.local;
    float last[W] = {};
    open.stage(0);
    P* h0 = row(0, 0);
    h0[0] = P(0.0f);
    for (int j = 1; j <= g.nmax; ++j) h0[j] = local ? P(0.0f) : h0[j - 1] + open.at(j);
    if (!local) take_last(0, h0, last);
    for (int i = 1; i <= g.mmax; ++i) {
      stage(i);
      const P* hp = row(0, i - 1);
      P* hc = row(0, i);
      hc[0] = local ? P(0.0f) : hp[0] + open.at(0);
      const Mk rin = row_in(i);
      for (int j = 1; j <= g.nmax; ++j) {
        P x[4];
        dp::LinearTerms::of(hp[j - 1], hp[j], hc[j - 1], s(j), open.at(j), local, x);
        hc[j] = cell.smax(x);
        if (local) end.add(hc[j], i, j, rin & col_in[j]);
      }
      if (!local) take_last(i, hc, last);
    }
    return local ? end.score() : P::load(last);
  }

  P forward_affine() {
    using dp::kA;
    using dp::kX;
    using dp::kY;
    const bool local = c.local;
    const P ninf = dp::neg_inf<P>();
    float last[3][W] = {};
    open.stage(0);
    extend.stage(0);
    {
      P *a0 = row(kA, 0), *x0 = row(kX, 0), *y0 = row(kY, 0);
      a0[0] = local ? ninf : P(0.0f);
      x0[0] = y0[0] = ninf;
      for (int j = 1; j <= g.nmax; ++j) {
        a0[j] = x0[j] = ninf;
        if (local) {
          y0[j] = ninf;
        } else {
          P x[3];
          dp::AffineHorizontalTerms::of(a0[j - 1], x0[j - 1], y0[j - 1], open.at(j),
                                        extend.at(j), x);
          y0[j] = cell.smax(x);
        }
      }
      if (!local)
        for (int s = 0; s < 3; ++s) take_last(0, row(s, 0), last[s]);
    }
    for (int i = 1; i <= g.mmax; ++i) {
      stage(i);
      const P *ap = row(kA, i - 1), *xp = row(kX, i - 1), *yp = row(kY, i - 1);
      P *ac = row(kA, i), *xc = row(kX, i), *yc = row(kY, i);
      ac[0] = yc[0] = ninf;
      if (local) {
        xc[0] = ninf;
      } else {
        P x[2];
        dp::AffineVerticalTerms::of(ap[0], xp[0], open.at(0), extend.at(0), x);
        xc[0] = cell.smax(x);
      }
      const Mk rin = row_in(i);
      for (int j = 1; j <= g.nmax; ++j) {
        const P o = open.at(j), e = extend.at(j);
        P xa[4], xv[2], xh[3];
        dp::AffineMatchTerms::of(ap[j - 1], xp[j - 1], yp[j - 1], local, xa);
        dp::AffineVerticalTerms::of(ap[j], xp[j], o, e, xv);
        dp::AffineHorizontalTerms::of(ac[j - 1], xc[j - 1], yc[j - 1], o, e, xh);
        ac[j] = s(j) + cell.smax(xa);
        xc[j] = cell.smax(xv);
        yc[j] = cell.smax(xh);
        if (local) end.add(ac[j], i, j, rin & col_in[j]);
      }
      if (!local)
        for (int s = 0; s < 3; ++s) take_last(i, row(s, i), last[s]);
    }
    if (local) return end.score();
    P lastp[3] = {P::load(last[0]), P::load(last[1]), P::load(last[2])};
    return cell.smax(lastp);  // global score = smax_t(A[m][n], X[m][n], Y[m][n])
  }

  P forward(int rows) {
    rows_kept = rows;
    Buffer<P> values(int64_t(kStates) * rows * width);
    table = values.p;
    const P score = kAffine ? forward_affine() : forward_linear();
    table = nullptr;
    return score;
  }

  // ------------------------------------------------------------ adjoint (sweep.h's, per lane)
  struct Grads {
    const GradsView<float>& v;
    Buffer<float> s_row;  // d score / d S of row i, a pack per column
    Buffer<float> s_lanes;  // the same transposed: a row of nmax per lane
    PenaltyGradRow<W> open, extend;
    Grads(const Group<W>& g, const GradsView<float>& v_)
        : v(v_), s_row(int64_t(g.nmax + 1) * W), s_lanes(int64_t(g.nmax + 1) * W),
          open(g, v_.open, v_.open_sb, v_.open_si, v_.open_sj),
          extend(g, v_.extend, v_.extend_sb, v_.extend_si, v_.extend_sj) {}
    void set_s(int j, P x) { x.store(s_row.p + int64_t(j) * W); }
    void flush(const Group<W>& g, int i) {
      if (i >= 1) {
        int jb = 0;  // columns [0, jb) are in s_lanes
        if constexpr (W % 8 == 0) {
          for (; jb + 8 <= g.nmax; jb += 8) {
            for (int lb = 0; lb < W; lb += 8) {
              const float* block[8];
              for (int r = 0; r < 8; ++r) block[r] = s_row.p + int64_t(jb + 1 + r) * W + lb;
              transpose8(block, s_lanes.p + int64_t(lb) * g.nmax + jb, g.nmax);
            }
          }
        }
        for (int l = 0; l < W; ++l) {
          if (!g.valid[l] || i > g.m[l]) continue;
          float* dst = v.scores + g.b[l] * v.M * v.N + int64_t(i - 1) * v.N;
          const int nb = jb < g.n[l] ? jb : g.n[l];
          if (nb > 0) std::memcpy(dst, s_lanes.p + int64_t(l) * g.nmax, sizeof(float) * nb);
          const float* src = s_row.p + W + l;
          for (int j = nb; j < g.n[l]; ++j) dst[j] = src[int64_t(j) * W];
        }
      }
      open.flush(g, i);
      extend.flush(g, i);
    }
  };

  static P masked(Mk act, P x) { return select(act, x, P(0.0f)); }

  // Seeds d score / d V of the global end cell (m, n) of the lanes whose last row is i.
  void seed_global(int i, P* const* rows, const float (*seed)[W]) const {
    for (int l = 0; l < W; ++l) {
      if (g.m[l] != i) continue;
      for (int s = 0; s < kStates; ++s) rows[s][g.n[l]].set(l, seed[s][l]);
    }
  }

  void backward_linear(P grad, Grads& gr) {
    const bool local = c.local;
    Buffer<P> adjoint(2 * width);
    auto erow = [&](int i) { return adjoint.p + (i % 2) * width; };
    float seed[1][W];
    grad.store(seed[0]);
    for (int i = g.mmax; i >= 1; --i) {
      stage(i);
      const P* hp = row(0, i - 1);
      const P* hc = row(0, i);
      P* ec = erow(i);
      P* ep = erow(i - 1);  // every column written below: no zero-fill
      if (!local) {
        P* rows[1] = {ec};
        seed_global(i, rows, seed);
      }
      const Mk rin = row_in(i);
      if (local && !end.soft) end.seed_row(i, ec, grad);
      // Cell j + 1's pushes into ep[j] (diagonal) and ec[j] (left), carried in registers: each
      // adjoint is stored once, in the order of sweep.h's additions.
      P diag_in = P(0.0f), left_in = P(0.0f);
      for (int j = g.nmax; j >= 1; --j) {
        P e = ec[j] + left_in;
        if (local && end.soft) {
          e = e + masked(rin & col_in[j], grad * end.seed(hc[j], i, j));
        }
        const Mk act = e != P(0.0f);
        if (!any(act)) {
          gr.set_s(j, P(0.0f));
          ep[j] = diag_in;
          diag_in = left_in = P(0.0f);
          continue;
        }
        P x[4], w[4];
        dp::LinearTerms::of(hp[j - 1], hp[j], hc[j - 1], s(j), open.at(j), local, x);
        cell.weights(x, w);
        const P em = masked(act, e * w[dp::LinearTerms::kMatch]);
        gr.set_s(j, em);
        ep[j] = diag_in + masked(act, e * w[dp::LinearTerms::kUp]);
        diag_in = em;
        left_in = masked(act, e * w[dp::LinearTerms::kLeft]);
        gr.open.add(j, masked(act, e * (w[dp::LinearTerms::kUp] + w[dp::LinearTerms::kLeft])));
      }
      ep[0] = diag_in;
      ec[0] = ec[0] + left_in;
      if (!local) {  // H[i][0] = H[i-1][0] + g
        const P e0 = masked(ec[0] != P(0.0f), ec[0]);
        ep[0] += e0;
        gr.open.add(0, e0);
      }
      gr.flush(g, i);
    }
    if (!local) {  // H[0][j] = H[0][j-1] + g
      P* e0 = erow(0);
      if (g.mmax == 0) {
        for (int j = 0; j <= g.nmax; ++j) e0[j] = P(0.0f);
      }
      P* rows[1] = {e0};
      seed_global(0, rows, seed);
      open.stage(0);
      for (int j = g.nmax; j >= 1; --j) {
        const P e = masked(e0[j] != P(0.0f), e0[j]);
        e0[j - 1] += e;
        gr.open.add(j, e);
      }
      gr.open.flush(g, 0);
    }
    gr.open.finish(g);
  }

  // Pushes the adjoint of Y[i][j] to its predecessors (same row) and to the penalties.
  void push_horizontal(P* const* E, int i, int j, P ey, Grads& gr) {
    using dp::AffineHorizontalTerms;
    const Mk act = ey != P(0.0f);
    if (!any(act)) return;
    P x[3], w[3];
    AffineHorizontalTerms::of(row(dp::kA, i)[j - 1], row(dp::kX, i)[j - 1],
                              row(dp::kY, i)[j - 1], open.at(j), extend.at(j), x);
    cell.weights(x, w);
    E[dp::kA][j - 1] += masked(act, ey * w[AffineHorizontalTerms::kOpenFromA]);
    E[dp::kX][j - 1] += masked(act, ey * w[AffineHorizontalTerms::kOpenFromX]);
    E[dp::kY][j - 1] += masked(act, ey * w[AffineHorizontalTerms::kExtend]);
    gr.open.add(j, masked(act, ey * (w[AffineHorizontalTerms::kOpenFromA] +
                                     w[AffineHorizontalTerms::kOpenFromX])));
    gr.extend.add(j, masked(act, ey * w[AffineHorizontalTerms::kExtend]));
  }

  // Pushes the adjoint of X[i][j] to its predecessors (row above, E_up) and to the penalties.
  void push_vertical(P* const* E_up, int i, int j, P ex, Grads& gr) {
    using dp::AffineVerticalTerms;
    const Mk act = ex != P(0.0f);
    if (!any(act)) return;
    P x[2], w[2];
    AffineVerticalTerms::of(row(dp::kA, i - 1)[j], row(dp::kX, i - 1)[j], open.at(j),
                            extend.at(j), x);
    cell.weights(x, w);
    E_up[dp::kA][j] += masked(act, ex * w[AffineVerticalTerms::kOpen]);
    E_up[dp::kX][j] += masked(act, ex * w[AffineVerticalTerms::kExtend]);
    gr.open.add(j, masked(act, ex * w[AffineVerticalTerms::kOpen]));
    gr.extend.add(j, masked(act, ex * w[AffineVerticalTerms::kExtend]));
  }

  void backward_affine(P grad, Grads& gr) {
    const bool local = c.local;
    Buffer<P> adjoint(int64_t(3) * 2 * width);
    auto erow = [&](int s, int i) { return adjoint.p + (int64_t(s) * 2 + i % 2) * width; };
    float seed[3][W] = {};
    if (!local) {
      float last[3][W] = {};
      for (int s = 0; s < 3; ++s)
        for (int l = 0; l < W; ++l) last[s][l] = row(s, g.m[l])[g.n[l]][l];
      P lastp[3] = {P::load(last[0]), P::load(last[1]), P::load(last[2])}, w[3];
      cell.weights(lastp, w);
      for (int s = 0; s < 3; ++s) (grad * w[s]).store(seed[s]);
    }
    for (int i = g.mmax; i >= 1; --i) {
      stage(i);
      P* E[3] = {erow(0, i), erow(1, i), erow(2, i)};
      P* E_up[3] = {erow(0, i - 1), erow(1, i - 1), erow(2, i - 1)};
      for (int s = 0; s < 3; ++s)
        for (int j = 0; j <= g.nmax; ++j) E_up[s][j] = P(0.0f);
      if (!local) seed_global(i, E, seed);
      const P* ac = row(dp::kA, i);
      const P *ap = row(dp::kA, i - 1), *xp = row(dp::kX, i - 1), *yp = row(dp::kY, i - 1);
      const Mk rin = row_in(i);
      if (local && !end.soft) end.seed_row(i, E[dp::kA], grad);
      for (int j = g.nmax; j >= 1; --j) {
        P ea = E[dp::kA][j];
        if (local && end.soft) {
          ea = ea + masked(rin & col_in[j], grad * end.seed(ac[j], i, j));
        }
        const P ex = E[dp::kX][j], ey = E[dp::kY][j];
        push_horizontal(E, i, j, ey, gr);
        push_vertical(E_up, i, j, ex, gr);
        const Mk act = ea != P(0.0f);
        gr.set_s(j, masked(act, ea));  // A = S + smax_t(0, A, X, Y at (i-1, j-1)): dA/dS = 1
        if (any(act)) {
          P x[4], w[4];
          dp::AffineMatchTerms::of(ap[j - 1], xp[j - 1], yp[j - 1], local, x);
          cell.weights(x, w);
          E_up[dp::kA][j - 1] += masked(act, ea * w[1]);
          E_up[dp::kX][j - 1] += masked(act, ea * w[2]);
          E_up[dp::kY][j - 1] += masked(act, ea * w[3]);
        }
      }
      if (!local) push_vertical(E_up, i, 0, E[dp::kX][0], gr);
      gr.flush(g, i);
    }
    if (!local) {
      P* E0[3] = {erow(0, 0), erow(1, 0), erow(2, 0)};
      if (g.mmax == 0)
        for (int s = 0; s < 3; ++s)
          for (int j = 0; j <= g.nmax; ++j) E0[s][j] = P(0.0f);
      seed_global(0, E0, seed);
      open.stage(0);
      extend.stage(0);
      for (int j = g.nmax; j >= 1; --j) push_horizontal(E0, 0, j, E0[dp::kY][j], gr);
      gr.open.flush(g, 0);
      gr.extend.flush(g, 0);
    }
    gr.open.finish(g);
    gr.extend.finish(g);
  }

  P forward_backward(P grad, const GradsView<float>& gv) {
    rows_kept = g.mmax + 1;
    Buffer<P> values(int64_t(kStates) * rows_kept * width);
    table = values.p;
    const P score = kAffine ? forward_affine() : forward_linear();
    Grads gr(g, gv);
    if (kAffine) {
      backward_affine(grad, gr);
    } else {
      backward_linear(grad, gr);
    }
    table = nullptr;
    return score;
  }
};

template <int W, bool kAffine>
void forward_group(const ProblemView<float>& p, const int64_t* items, float* score) {
  GroupSweep<W, kAffine> sweep(p, items);
  const Pack<W> s = sweep.forward(2);
  for (int l = 0; l < W; ++l)
    if (sweep.g.valid[l]) score[sweep.g.b[l]] = s[l];
}

template <int W, bool kAffine>
void forward_backward_group(const ProblemView<float>& p, const int64_t* items, const float* grad,
                            float* score, const GradsView<float>& gv) {
  GroupSweep<W, kAffine> sweep(p, items);
  float grads[W];
  for (int l = 0; l < W; ++l) grads[l] = grad[sweep.g.b[l]];
  const Pack<W> s = sweep.forward_backward(Pack<W>::load(grads), gv);
  for (int l = 0; l < W; ++l)
    if (sweep.g.valid[l]) score[sweep.g.b[l]] = s[l];
}

template <int W>
void forward_lanes(const ProblemView<float>& p, bool affine, const int64_t* items, float* score) {
  if (affine) {
    forward_group<W, true>(p, items, score);
  } else {
    forward_group<W, false>(p, items, score);
  }
}

template <int W>
void forward_backward_lanes(const ProblemView<float>& p, bool affine, const int64_t* items,
                            const float* grad, float* score, const GradsView<float>& g) {
  if (affine) {
    forward_backward_group<W, true>(p, items, grad, score, g);
  } else {
    forward_backward_group<W, false>(p, items, grad, score, g);
  }
}

}  // namespace SOFTALIGN_PACK_NAMESPACE
}  // namespace softalign
