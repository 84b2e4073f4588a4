// One item's DP swept in row-major order, forward and adjoint, for both gap models.
// The CPU backend runs it per item; the CUDA backend runs it per thread for the general
// path. What a cell computes lives in recurrence.h; this file only orders the cells.
#pragma once

#include <cstdint>

#include "recurrence.h"

namespace softalign {
namespace dp {

// A penalty of one item, read at the DP cell a gap enters: G[max(i,1)-1][max(j,1)-1]
// (docs/spec.md, "Notation"). Strides are 0 along the dimensions the caller's penalty broadcasts.
template <typename T>
struct PenaltyView {
  const T* data = nullptr;
  int64_t stride_i = 0, stride_j = 0;

  SOFTALIGN_HD int64_t offset(int i, int j) const {
    return int64_t(i > 0 ? i - 1 : 0) * stride_i + int64_t(j > 0 ? j - 1 : 0) * stride_j;
  }
  SOFTALIGN_HD T at(int i, int j) const { return data[offset(i, j)]; }
};

// The gradient of a penalty of one item; the item owns it, so sums stay in a fixed order.
template <typename T>
struct PenaltyGrad {
  T* data = nullptr;
  int64_t stride_i = 0, stride_j = 0;

  SOFTALIGN_HD void add(int i, int j, T value) const {
    data[int64_t(i > 0 ? i - 1 : 0) * stride_i + int64_t(j > 0 ? j - 1 : 0) * stride_j] += value;
  }
};

// The inputs of one item: its (m, n) block of scores and its penalties.
template <typename T>
struct Item {
  const T* scores = nullptr;
  int64_t stride_i = 0, stride_j = 0;
  PenaltyView<T> open, extend;
  int m = 0, n = 0;

  // The score charged by the match move that enters DP cell (i, j), i, j >= 1.
  SOFTALIGN_HD T s(int i, int j) const {
    return scores[int64_t(i - 1) * stride_i + int64_t(j - 1) * stride_j];
  }
};

// Where the adjoint sweep writes d score / d (scores, gap_open, gap_extend) of one item.
template <typename T>
struct ItemGrads {
  T* scores = nullptr;  // zero-filled by the caller
  int64_t stride_i = 0, stride_j = 0;
  PenaltyGrad<T> open, extend;

  SOFTALIGN_HD void add_s(int i, int j, T value) const {
    scores[int64_t(i - 1) * stride_i + int64_t(j - 1) * stride_j] += value;
  }
};

template <typename T>
struct Config {
  T temperature;
  bool local;
  bool soft_reduction;  // local only; at temperature 0 it is the max
};

// DP values of one item, kStates planes of rows (n + 1 wide). A forward without grad keeps
// 2 rows (rows_kept = 2); a forward for the adjoint keeps all m + 1.
template <typename T, int kStates>
struct Table {
  T* data;
  int rows_kept;
  int64_t width;

  SOFTALIGN_HD T* row(int state, int i) const {
    return data + (int64_t(state) * rows_kept + i % rows_kept) * width;
  }
  SOFTALIGN_HD static int64_t size(int rows_kept, int64_t width) {
    return int64_t(kStates) * rows_kept * width;
  }
};

// docs/spec.md, "Score", local: R({0} ∪ {V[i][j]}), tracked as the cells arrive.
template <typename T>
struct LocalEnd {
  T best = T(0);          // the running max; the empty alignment scores 0
  int best_i = 0, best_j = 0;  // (0, 0) stands for the empty alignment
  T soft_sum = T(1);      // sum of exp((v - best) / t), the empty alignment's exp(0) included

  SOFTALIGN_HD void add(T v, int i, int j, const Config<T>& c) {
    if (c.soft_reduction && c.temperature > T(0)) {
      if (v > best) {
        soft_sum = soft_sum * exp_((best - v) / c.temperature) + T(1);
        best = v;
      } else {  // v == best: exp(0) = 1, also for a second +inf cell (inf - inf is NaN)
        soft_sum += v == best ? T(1) : exp_((v - best) / c.temperature);
      }
    } else if (v > best || v != v) {  // first maximal cell in row-major order; NaN sticks
      if (best == best) {
        best = v;
        best_i = i;
        best_j = j;
      }
    }
  }
  SOFTALIGN_HD bool soft(const Config<T>& c) const {
    return c.soft_reduction && c.temperature > T(0);
  }
  SOFTALIGN_HD T score(const Config<T>& c) const {
    return soft(c) ? best + c.temperature * log_(soft_sum) : best;
  }
  // d score / d V[i][j] for a unit d score (docs/spec.md, "Gradients";
  // docs/design.md, "Log space: the adjoint"). Soft: exp((v - score) / t) written as exp((v - best)
  // / t) / soft_sum, which sums to 1 over the cells by construction; through score, the rounding
  // error of t * log(soft_sum) would be divided by t and skew the weights once t nears ulp(score).
  SOFTALIGN_HD T seed(T v, int i, int j, const Config<T>& c) const {
    if (soft(c)) return (v == best ? T(1) : exp_((v - best) / c.temperature)) / soft_sum;
    return (i == best_i && j == best_j) ? T(1) : T(0);
  }
};

// ---------------------------------------------------------------- linear gap (state H)

template <typename T>
SOFTALIGN_HD T forward_linear(const Item<T>& it, const Config<T>& c, const Table<T, 1>& H,
                              LocalEnd<T>& end) {
  // Boundaries (docs/spec.md, "Linear gap"): local H[i][0] = H[0][j] = 0; global H[0][j] =
  // H[0][j-1] + g.
  T* h0 = H.row(0, 0);
  h0[0] = T(0);
  for (int j = 1; j <= it.n; ++j) h0[j] = c.local ? T(0) : h0[j - 1] + it.open.at(0, j);
  for (int i = 1; i <= it.m; ++i) {
    const T* hp = H.row(0, i - 1);
    T* hc = H.row(0, i);
    hc[0] = c.local ? T(0) : hp[0] + it.open.at(i, 0);
    for (int j = 1; j <= it.n; ++j) {
      T x[4];
      LinearTerms::of(hp[j - 1], hp[j], hc[j - 1], it.s(i, j), it.open.at(i, j), c.local, x);
      hc[j] = smax(x, c.temperature);
      if (c.local) end.add(hc[j], i, j, c);
    }
  }
  return c.local ? end.score(c) : H.row(0, it.m)[it.n];
}

// The adjoint sweep over a full table H (rows_kept = m + 1); E holds 2 rolling adjoint rows.
template <typename T>
SOFTALIGN_HD void backward_linear(const Item<T>& it, const Config<T>& c, const Table<T, 1>& H,
                                  const LocalEnd<T>& end, T grad, const Table<T, 1>& E,
                                  const ItemGrads<T>& g) {
  for (int j = 0; j <= it.n; ++j) E.row(0, 0)[j] = E.row(0, 1)[j] = T(0);
  if (!c.local) E.row(0, it.m)[it.n] = grad;
  for (int i = it.m; i >= 1; --i) {
    const T* hp = H.row(0, i - 1);
    const T* hc = H.row(0, i);
    T* ec = E.row(0, i);
    T* ep = E.row(0, i - 1);
    for (int j = 0; j <= it.n; ++j) ep[j] = T(0);
    for (int j = it.n; j >= 1; --j) {
      T e = ec[j];
      if (c.local) e += grad * end.seed(hc[j], i, j, c);
      if (e == T(0)) continue;
      T x[4], w[4];
      LinearTerms::of(hp[j - 1], hp[j], hc[j - 1], it.s(i, j), it.open.at(i, j), c.local, x);
      smax_weights(x, c.temperature, w);
      g.add_s(i, j, e * w[LinearTerms::kMatch]);
      ep[j - 1] += e * w[LinearTerms::kMatch];
      ep[j] += e * w[LinearTerms::kUp];
      ec[j - 1] += e * w[LinearTerms::kLeft];
      g.open.add(i, j, e * (w[LinearTerms::kUp] + w[LinearTerms::kLeft]));
    }
    if (!c.local && ec[0] != T(0)) {  // H[i][0] = H[i-1][0] + g
      ep[0] += ec[0];
      g.open.add(i, 0, ec[0]);
    }
  }
  if (!c.local) {  // H[0][j] = H[0][j-1] + g
    T* e0 = E.row(0, 0);
    for (int j = it.n; j >= 1; --j) {
      if (e0[j] == T(0)) continue;
      e0[j - 1] += e0[j];
      g.open.add(0, j, e0[j]);
    }
  }
}

// ---------------------------------------------------------------- affine gap (A, X, Y)

enum AffineState { kA = 0, kX = 1, kY = 2 };

template <typename T>
SOFTALIGN_HD T forward_affine(const Item<T>& it, const Config<T>& c, const Table<T, 3>& V,
                              LocalEnd<T>& end) {
  const T ninf = neg_inf<T>();
  // Boundaries (docs/spec.md, "Affine gap"): local, all -inf; global, A[0][0] = 0, column 0 only X,
  // row 0 only Y.
  {
    T* a0 = V.row(kA, 0);
    T* x0 = V.row(kX, 0);
    T* y0 = V.row(kY, 0);
    a0[0] = c.local ? ninf : T(0);
    x0[0] = y0[0] = ninf;
    for (int j = 1; j <= it.n; ++j) {
      a0[j] = x0[j] = ninf;
      if (c.local) {
        y0[j] = ninf;
      } else {
        T x[3];
        AffineHorizontalTerms::of(a0[j - 1], x0[j - 1], y0[j - 1], it.open.at(0, j),
                                  it.extend.at(0, j), x);
        y0[j] = smax(x, c.temperature);
      }
    }
  }
  for (int i = 1; i <= it.m; ++i) {
    const T *ap = V.row(kA, i - 1), *xp = V.row(kX, i - 1), *yp = V.row(kY, i - 1);
    T *ac = V.row(kA, i), *xc = V.row(kX, i), *yc = V.row(kY, i);
    ac[0] = yc[0] = ninf;
    if (c.local) {
      xc[0] = ninf;
    } else {
      T x[2];
      AffineVerticalTerms::of(ap[0], xp[0], it.open.at(i, 0), it.extend.at(i, 0), x);
      xc[0] = smax(x, c.temperature);
    }
    for (int j = 1; j <= it.n; ++j) {
      const T o = it.open.at(i, j), e = it.extend.at(i, j);
      T xa[4], xv[2], xh[3];
      AffineMatchTerms::of(ap[j - 1], xp[j - 1], yp[j - 1], c.local, xa);
      AffineVerticalTerms::of(ap[j], xp[j], o, e, xv);
      AffineHorizontalTerms::of(ac[j - 1], xc[j - 1], yc[j - 1], o, e, xh);
      ac[j] = it.s(i, j) + smax(xa, c.temperature);
      xc[j] = smax(xv, c.temperature);
      yc[j] = smax(xh, c.temperature);
      if (c.local) end.add(ac[j], i, j, c);
    }
  }
  if (c.local) return end.score(c);
  T last[3] = {V.row(kA, it.m)[it.n], V.row(kX, it.m)[it.n], V.row(kY, it.m)[it.n]};
  return smax(last, c.temperature);  // global score = smax_t(A[m][n], X[m][n], Y[m][n])
}

// Pushes the adjoint of Y[i][j] to its predecessors (same row) and to the penalties.
template <typename T>
SOFTALIGN_HD void push_horizontal(const Item<T>& it, const Config<T>& c, const Table<T, 3>& V,
                                  const Table<T, 3>& E, int i, int j, T ey,
                                  const ItemGrads<T>& g) {
  T x[3], w[3];
  AffineHorizontalTerms::of(V.row(kA, i)[j - 1], V.row(kX, i)[j - 1], V.row(kY, i)[j - 1],
                            it.open.at(i, j), it.extend.at(i, j), x);
  smax_weights(x, c.temperature, w);
  E.row(kA, i)[j - 1] += ey * w[AffineHorizontalTerms::kOpenFromA];
  E.row(kX, i)[j - 1] += ey * w[AffineHorizontalTerms::kOpenFromX];
  E.row(kY, i)[j - 1] += ey * w[AffineHorizontalTerms::kExtend];
  g.open.add(i, j, ey * (w[AffineHorizontalTerms::kOpenFromA] +
                         w[AffineHorizontalTerms::kOpenFromX]));
  g.extend.add(i, j, ey * w[AffineHorizontalTerms::kExtend]);
}

// Pushes the adjoint of X[i][j] to its predecessors (row above) and to the penalties.
template <typename T>
SOFTALIGN_HD void push_vertical(const Item<T>& it, const Config<T>& c, const Table<T, 3>& V,
                                const Table<T, 3>& E, int i, int j, T ex,
                                const ItemGrads<T>& g) {
  T x[2], w[2];
  AffineVerticalTerms::of(V.row(kA, i - 1)[j], V.row(kX, i - 1)[j], it.open.at(i, j),
                          it.extend.at(i, j), x);
  smax_weights(x, c.temperature, w);
  E.row(kA, i - 1)[j] += ex * w[AffineVerticalTerms::kOpen];
  E.row(kX, i - 1)[j] += ex * w[AffineVerticalTerms::kExtend];
  g.open.add(i, j, ex * w[AffineVerticalTerms::kOpen]);
  g.extend.add(i, j, ex * w[AffineVerticalTerms::kExtend]);
}

template <typename T>
SOFTALIGN_HD void backward_affine(const Item<T>& it, const Config<T>& c, const Table<T, 3>& V,
                                  const LocalEnd<T>& end, T grad, const Table<T, 3>& E,
                                  const ItemGrads<T>& g) {
  for (int s = 0; s < 3; ++s)
    for (int j = 0; j <= it.n; ++j) E.row(s, 0)[j] = E.row(s, 1)[j] = T(0);
  if (!c.local) {
    T last[3] = {V.row(kA, it.m)[it.n], V.row(kX, it.m)[it.n], V.row(kY, it.m)[it.n]};
    T w[3];
    smax_weights(last, c.temperature, w);
    for (int s = 0; s < 3; ++s) E.row(s, it.m)[it.n] = grad * w[s];
  }
  for (int i = it.m; i >= 1; --i) {
    for (int s = 0; s < 3; ++s)
      for (int j = 0; j <= it.n; ++j) E.row(s, i - 1)[j] = T(0);
    for (int j = it.n; j >= 1; --j) {
      T ea = E.row(kA, i)[j];
      if (c.local) ea += grad * end.seed(V.row(kA, i)[j], i, j, c);
      const T ex = E.row(kX, i)[j], ey = E.row(kY, i)[j];
      if (ey != T(0)) push_horizontal(it, c, V, E, i, j, ey, g);
      if (ex != T(0)) push_vertical(it, c, V, E, i, j, ex, g);
      if (ea != T(0)) {  // A = S + smax_t(0, A, X, Y at (i-1, j-1)): d A / d S = 1
        g.add_s(i, j, ea);
        T x[4], w[4];
        AffineMatchTerms::of(V.row(kA, i - 1)[j - 1], V.row(kX, i - 1)[j - 1],
                             V.row(kY, i - 1)[j - 1], c.local, x);
        smax_weights(x, c.temperature, w);
        E.row(kA, i - 1)[j - 1] += ea * w[1];
        E.row(kX, i - 1)[j - 1] += ea * w[2];
        E.row(kY, i - 1)[j - 1] += ea * w[3];
      }
    }
    const T ex0 = E.row(kX, i)[0];
    if (!c.local && ex0 != T(0)) push_vertical(it, c, V, E, i, 0, ex0, g);
  }
  if (!c.local) {
    for (int j = it.n; j >= 1; --j) {
      const T ey0 = E.row(kY, 0)[j];
      if (ey0 != T(0)) push_horizontal(it, c, V, E, 0, j, ey0, g);
    }
  }
}

// ---------------------------------------------------------------- both models

template <typename T, bool kAffine>
struct Model {
  static constexpr int kStates = kAffine ? 3 : 1;
  using Tab = Table<T, kStates>;

  SOFTALIGN_HD static T forward(const Item<T>& it, const Config<T>& c, const Tab& V,
                                LocalEnd<T>& end) {
    if constexpr (kAffine) {
      return forward_affine(it, c, V, end);
    } else {
      return forward_linear(it, c, V, end);
    }
  }
  SOFTALIGN_HD static void backward(const Item<T>& it, const Config<T>& c, const Tab& V,
                                    const LocalEnd<T>& end, T grad, const Tab& E,
                                    const ItemGrads<T>& g) {
    if constexpr (kAffine) {
      backward_affine(it, c, V, end, grad, E, g);
    } else {
      backward_linear(it, c, V, end, grad, E, g);
    }
  }
};

}  // namespace dp
}  // namespace softalign
