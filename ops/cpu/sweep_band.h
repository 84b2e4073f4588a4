// One item's DP swept W rows at a time, one row a lane (docs/design.md, "CPU schedules"): the
// schedule for items too few to fill sweep_lanes.h's groups. In a band of rows i0 + 1 ..
// i0 + W, lane k holds row i0 + 1 + k and at step s computes its cell (i0 + 1 + k, s + 1 - k),
// so that one step's cells lie on an anti-diagonal and depend only on the two steps before:
// left is the lane's own value of the step before, up the step before's value of the lane above
// (shift_up), diagonal the up of the step before that. Lane 0 reads the band's top row, the last
// row of the band above; lane W - 1 writes the band's own last row. Those boundary rows, every
// W-th DP row, are all the forward keeps; the adjoint recomputes a band's values from its top row
// and sweeps the band backwards, handing its pushes into the row above on to the band above.
// Several threads can work on one item: each takes the next band and keeps a few steps behind
// the band above it (progress counters). Every result is summed in an order fixed by the item
// alone (per row, then rows in order), so its bits do not depend on the threads.
// The cells are recurrence.h's, on packs (sweep_lanes.h's CellMath). Included after
// sweep_lanes.h, inside the instruction set's namespace.
#pragma once

#include <sched.h>

#include <cmath>

namespace softalign {
namespace SOFTALIGN_PACK_NAMESPACE {

// One input of an item read per cell (scores, or a penalty) as an (M, N)-strided block; a
// penalty of one value per item has both strides 0. Cell (i, j), i, j >= 1, reads
// (i - 1, j - 1); a boundary cell the clamped index (docs/spec.md, "Notation").
struct CellSource {
  const float* base = nullptr;
  int64_t si = 0, sj = 0;
  bool constant() const { return si == 0 && sj == 0; }
  float at(int i, int j) const { return base[clamp_index(i) * si + clamp_index(j) * sj]; }
};

// Where the adjoint adds a penalty's gradient: the same layout.
struct CellTarget {
  float* base = nullptr;
  int64_t si = 0, sj = 0;
  bool constant() const { return si == 0 && sj == 0; }
};

// What lane k reads at steps [s0, s1) of the band whose first row is i0 + 1, skewed into
// buf[(s - s0) * W + k] = src(i0 + k, s - k) (0 outside the item's m x n block): one pack a step.
// Whole 8 x 8 blocks of contiguous rows by transposition (the rows' reads offset by -k).
template <int W>
void stage_skewed(float* buf, const CellSource& src, int i0, int s0, int s1, int m, int n) {
  auto one = [&](int s, int k) {
    const int r = i0 + k, col = s - k;
    buf[int64_t(s - s0) * W + k] =
        r < m && col >= 0 && col < n ? src.base[r * src.si + col * src.sj] : 0.0f;
  };
  for (int s = s0; s < s1; s += 8) {
    const int se = s + 8 <= s1 ? s + 8 : s1;
    for (int lb = 0; lb < W; lb += 8) {
      const bool whole = se - s == 8 && src.sj == 1 && i0 + lb + 7 < m && s - lb - 7 >= 0 &&
                         s + 7 - lb < n;
      if (whole && W % 8 == 0) {
        const float* rows[8];
        for (int q = 0; q < 8; ++q) {
          rows[q] = src.base + (i0 + lb + q) * src.si + (s - lb - q);
          // The next chunk's block: 8 rows far apart are more streams than the prefetchers
          // follow.
          __builtin_prefetch(rows[q] + (s1 - s0), 0, 3);
        }
        transpose8(rows, buf + int64_t(s - s0) * W + lb, W);
      } else {
        for (int t = s; t < se; ++t)
          for (int k = lb; k < lb + 8 && k < W; ++k) one(t, k);
      }
    }
  }
}

// The inverse of stage_skewed for steps [s0, s1): dst[(i0 + k) * ld + s - k] = buf[(s - s0) *
// W + k] inside the item's m x n block.
template <int W>
void store_unskewed(const float* buf, float* dst, int64_t ld, int i0, int s0, int s1, int m,
                    int n) {
  for (int s = s0; s < s1; s += 8) {
    const int se = s + 8 <= s1 ? s + 8 : s1;
    for (int lb = 0; lb < W; lb += 8) {
      const bool whole = se - s == 8 && i0 + lb + 7 < m && s - lb - 7 >= 0 && s + 7 - lb < n;
      if (whole && W % 8 == 0) {
        const float* src[8];
        float* rows[8];
        for (int t = 0; t < 8; ++t) src[t] = buf + int64_t(s + t - s0) * W + lb;
        for (int q = 0; q < 8; ++q) rows[q] = dst + (i0 + lb + q) * ld + (s - lb - q);
        transpose8(src, rows);
      } else {
        for (int t = s; t < se; ++t)
          for (int k = lb; k < lb + 8 && k < W; ++k) {
            const int r = i0 + k, col = t - k;
            if (r < m && col >= 0 && col < n) dst[r * ld + col] = buf[int64_t(t - s0) * W + k];
          }
      }
    }
  }
}

// The same added to a penalty's gradient at its strides (broadcast dimensions sum).
template <int W>
void add_unskewed(const float* buf, const CellTarget& dst, int i0, int s0, int s1, int m, int n) {
  for (int s = s0; s < s1; ++s)
    for (int k = 0; k < W; ++k) {
      const int r = i0 + k, col = s - k;
      if (r < m && col >= 0 && col < n) dst.base[r * dst.si + col * dst.sj] += buf[int64_t(s - s0) * W + k];
    }
}

template <int W, bool kAffine>
class BandSweep final : public cpu::BandJob {
  using P = Pack<W>;
  using Mk = Mask<W>;
  using I = Int<W>;
  static constexpr int kStates = kAffine ? 3 : 1;
  static constexpr int kChunk = 64;  // steps staged at once (their inputs stay in L1)
  // The adjoint a band pushes into its top row, read by the band above: kRing rows in turn
  // (a band reuses a row once the band that read its last user is done).
  static constexpr int kRing = 4;

 public:
  BandSweep(const ProblemView<float>& p, int64_t b)
      : c_(p.config), cell_(p.config.temperature),
        scores_{p.scores + b * p.M * p.N, p.N, 1},
        open_{p.open + b * p.open_sb, p.open_si, p.open_sj},
        extend_{p.extend ? p.extend + b * p.extend_sb : nullptr, p.extend_si, p.extend_sj},
        m_(p.m_of(b)), n_(p.n_of(b)), bands_((m_ + W - 1) / W), steps_(n_ + W - 1),
        width_(n_ + 1), boundary_(int64_t(kStates) * (bands_ + 1) * width_),
        progress_(bands_ + 1), row_best_(m_ + 1), row_sum_(m_ + 1), b_(b),
        adjoint_(int64_t(kStates) * kRing * width_), back_done_(bands_ + 1), row_d_open_(m_ + 1),
        row_d_extend_(m_ + 1) {
    first_row();
    for (int band = 0; band <= bands_; ++band) back_done_[band] = steps_;
  }

  void forward() override {
    for (;;) {
      const int band = __atomic_fetch_add(&next_band_, 1, __ATOMIC_RELAXED);
      if (band >= bands_) return;
      forward_band(band);
    }
  }

  float score() override {
    if (!c_.local) {
      if constexpr (kAffine) return dp::smax(last_, c_.temperature);
      return last_[0];
    }
    // docs/spec.md, "Score", local: sweep.h's LocalEnd over the rows' ends, in row order.
    end_ = dp::LocalEnd<float>{};
    const bool soft = end_.soft(c_);
    for (int i = 1; i <= m_; ++i) {
      const float v = row_best_[i];
      if (soft) {
        if (v > end_.best) {
          end_.soft_sum = end_.soft_sum * std::exp((end_.best - v) / c_.temperature) + row_sum_[i];
          end_.best = v;
        } else {
          end_.soft_sum += v == end_.best ? row_sum_[i]
                                          : row_sum_[i] * std::exp((v - end_.best) / c_.temperature);
        }
      } else if ((v > end_.best || v != v) && end_.best == end_.best) {  // a cell's (> 0)
        end_.best = v;
        end_.best_i = i;  // its column: backward_band's
      }
    }
    return end_.score(c_);
  }

  void backward(float grad, const GradsView<float>& g) override {
    Buffer<float> values(int64_t(kStates) * steps_ * W);
    for (;;) {
      const int taken = __atomic_fetch_add(&next_band_back_, 1, __ATOMIC_RELAXED);
      if (taken >= bands_) return;
      backward_band(bands_ - 1 - taken, grad, g, values.p);
    }
  }

  // The gradients of what the bands leave: penalties of one value an item (the rows' sums, in
  // row order) and, global, DP row 0 (docs/spec.md's boundary row), from the adjoint band 0
  // pushed into it.
  void finish_backward(const GradsView<float>& g) override {
    const CellTarget d_open = open_target(g), d_extend = extend_target(g);
    if (!c_.local) {
      if constexpr (!kAffine) {  // H[0][j] = H[0][j-1] + g
        const float* adj = adjoint_row(0, 0);
        float e = 0.0f;
        for (int j = n_; j >= 1; --j) {
          e += adj[j];
          add_penalty(d_open, row_d_open_.p, 0, j, e);
        }
      } else {  // Y[0][j] = smax_t(A[0][j-1] + o, X[0][j-1] + o, Y[0][j-1] + e)
        const float* adj = adjoint_row(dp::kY, 0);
        const float *a = boundary(dp::kA, 0), *x = boundary(dp::kX, 0), *y = boundary(dp::kY, 0);
        float ey = 0.0f;
        for (int j = n_; j >= 1; --j) {
          ey += adj[j];
          if (ey == 0.0f) continue;
          float t[3], w[3];
          dp::AffineHorizontalTerms::of(a[j - 1], x[j - 1], y[j - 1], open_.at(0, j),
                                        extend_.at(0, j), t);
          dp::smax_weights(t, c_.temperature, w);
          add_penalty(d_open, row_d_open_.p, 0, j, ey * (w[0] + w[1]));
          add_penalty(d_extend, row_d_extend_.p, 0, j, ey * w[2]);
          ey *= w[2];
        }
      }
    }
    float open_sum = 0.0f, extend_sum = 0.0f;
    for (int i = m_; i >= 0; --i) {
      open_sum += row_d_open_[i];
      extend_sum += row_d_extend_[i];
    }
    if (d_open.base && d_open.constant()) d_open.base[0] += open_sum;
    if (d_extend.base && d_extend.constant()) d_extend.base[0] += extend_sum;
  }

 private:
  float* boundary(int state, int band) const {
    return boundary_.p + (int64_t(state) * (bands_ + 1) + band) * width_;
  }

  // DP row 0 (docs/spec.md's boundaries): the top of band 0.
  void first_row() {
    const float ninf = dp::neg_inf<float>();
    if constexpr (!kAffine) {
      float* h = boundary(0, 0);
      h[0] = 0.0f;
      for (int j = 1; j <= n_; ++j) h[j] = c_.local ? 0.0f : h[j - 1] + open_.at(0, j);
    } else {
      float *a = boundary(dp::kA, 0), *x = boundary(dp::kX, 0), *y = boundary(dp::kY, 0);
      a[0] = c_.local ? ninf : 0.0f;
      x[0] = y[0] = ninf;
      for (int j = 1; j <= n_; ++j) {
        a[j] = x[j] = ninf;
        if (c_.local) {
          y[j] = ninf;
        } else {
          float t[3];
          dp::AffineHorizontalTerms::of(a[j - 1], x[j - 1], y[j - 1], open_.at(0, j),
                                        extend_.at(0, j), t);
          y[j] = dp::smax(t, c_.temperature);
        }
      }
    }
  }

  // Column 0 of the band's rows (docs/spec.md's boundaries), from its top row's. Lanes past
  // row m repeat row m's penalties (their values are never used).
  void first_column(int band, float (&col)[kStates][W]) const {
    const float ninf = dp::neg_inf<float>();
    const int i0 = band * W;
    if constexpr (!kAffine) {
      float h = boundary(0, band)[0];
      for (int k = 0; k < W; ++k) {
        const int i = i0 + 1 + k < m_ ? i0 + 1 + k : m_;
        col[0][k] = h = c_.local ? 0.0f : h + open_.at(i, 0);
      }
    } else {
      float a = boundary(dp::kA, band)[0], x = boundary(dp::kX, band)[0];
      for (int k = 0; k < W; ++k) {
        const int i = i0 + 1 + k < m_ ? i0 + 1 + k : m_;
        float t[2];
        dp::AffineVerticalTerms::of(a, x, open_.at(i, 0), extend_.at(i, 0), t);
        a = col[dp::kA][k] = col[dp::kY][k] = ninf;
        x = col[dp::kX][k] = c_.local ? ninf : dp::smax(t, c_.temperature);
      }
    }
  }

  // Waits until the band above has written its last row up to column j.
  void wait_for_row_above(int band, int j) const {
    if (band == 0) return;
    const int need = j + W - 1;  // its lane W - 1 writes column j at step j + W - 2
    for (int spins = 0; __atomic_load_n(&progress_[band - 1], __ATOMIC_ACQUIRE) < need; ++spins) {
      if (spins > 64) sched_yield();
    }
  }

  // A row's end: sweep.h's LocalEnd with a lane per row, the empty alignment left out (the
  // rows are merged into one LocalEnd in score()). The max keeps the value only: the adjoint
  // finds the best cell's column in its recomputed band.
  struct RowEnds {
    P best = P(0.0f), sum = P(0.0f);
    void add(P v, Mk in, bool soft, P inv_t) {
      if (soft) {  // LocalEndLanes::add's
        const Mk gt = v > best;
        const P e = select(v == best, P(1.0f), exp_(select(gt, best - v, v - best) * inv_t));
        sum = select(in, select(gt, sum * e + P(1.0f), sum + e), sum);
        best = select(in & gt, v, best);
      } else {  // NaN sticks
        best = select(((v > best) | (v != v)) & (best == best) & in, v, best);
      }
    }
  };

  // Whether every lane of the packs at p[0], p[W], ... (count of them) is below +inf (not NaN).
  static bool below_inf(const float* p, int count) {
    Mk bad = Mk::none();
    for (int k = 0; k < count; ++k) bad = bad | !(P::load(p + int64_t(k) * W) < P(INFINITY));
    return !any(bad);
  }
  static bool below_inf(const float* row, int from, int to) {  // row[from..to]
    for (int j = from; j <= to; ++j)
      if (!(row[j] < INFINITY)) return false;
    return true;
  }

  // The band's forward. With `keep`, a recomputation for the adjoint: every step's values go to
  // keep[(state * steps + s) * W + lane] and nothing the forward shares is written.
  //
  // At t = 0 (the max), a chunk whose inputs, top row and carried values are all below +inf
  // (no NaN can arise: sums of finite values and -inf, and their maxima) takes max-plus steps:
  // the cell of recurrence.h without its NaN care and, affine with penalties of one value an
  // item, the maxima taken before the lane shift (max and the shift commute), so that a step
  // shifts two packs instead of three. The same values, bit for bit: max is exact.
  void forward_band(int band, float* keep = nullptr) {
    const int i0 = band * W;
    const bool local = c_.local;
    const bool soft = local && end_.soft(c_);  // the config's: end_ is not merged yet
    const bool hard = c_.temperature == 0.0f;
    const P inv_t = P(soft ? 1.0f / c_.temperature : 0.0f);
    const float* top[kStates];
    float* bottom[kStates];
    if (!keep) wait_for_row_above(band, 0);  // its column 0, written before its first step
    float col[kStates][W];
    first_column(band, col);
    // prev: the values of step s - 1; prev2: of step s - 2 (step -1 and -2: every lane before
    // its first column holds column 0).
    P col_pack[kStates], prev[kStates], prev2[kStates];
    for (int st = 0; st < kStates; ++st) {
      top[st] = boundary(st, band);
      bottom[st] = boundary(st, band + 1);
      if (!keep) bottom[st][0] = col[st][W - 1];
      col_pack[st] = prev[st] = prev2[st] = P::load(col[st]);
    }
    const I lane = I::iota();
    const Mk row_in = lane <= I(m_ - i0 - 1);
    const bool partial = i0 + W > m_;
    const int end_lane = m_ - i0 - 1;  // the lane of row m, if this band holds it
    const P open_value = P(open_.constant() ? open_.base[0] : 0.0f);
    const P extend_value = P(kAffine && extend_.constant() ? extend_.base[0] : 0.0f);
    const bool max_plus_penalties = !kAffine || (open_.constant() && extend_.constant());
    Buffer<float> s_in(kChunk * W), o_in(open_.constant() ? 0 : kChunk * W),
        e_in(kAffine && !extend_.constant() ? kChunk * W : 0);
    RowEnds ends;
    // Bookkeeping of a step's values `cur`: kept, or the row ends, the band's last row, the end
    // cell (global).
    // (The states as separate arguments: an array of packs would live in memory.)
    auto step_done = [&](int s, const auto&... cur) {
      if (keep) {
        int st = 0;
        (cur.store(keep + (int64_t(st++) * steps_ + s) * W), ...);
        return;
      }
      const int j_last = s + 2 - W;  // lane W - 1's column
      if (j_last >= 1 && j_last <= n_) {
        int st = 0;
        ((bottom[st++][j_last] = last_lane(cur)), ...);
      }
      if (!local && end_lane < W && s == n_ - 1 + end_lane) {
        float lanes[W];
        int st = 0;
        ((cur.store(lanes), last_[st++] = lanes[end_lane]), ...);
      }
    };
    for (int s0 = 0; s0 < steps_; s0 += kChunk) {
      const int s1 = s0 + kChunk < steps_ ? s0 + kChunk : steps_;
      if (!keep) wait_for_row_above(band, s1 < n_ ? s1 : n_);
      stage_skewed<W>(s_in.p, scores_, i0, s0, s1, m_, n_);
      if (!open_.constant()) stage_skewed<W>(o_in.p, open_, i0, s0, s1, m_, n_);
      if (kAffine && !extend_.constant()) stage_skewed<W>(e_in.p, extend_, i0, s0, s1, m_, n_);
      bool max_plus = hard && max_plus_penalties && below_inf(s_in.p, s1 - s0) &&
                      (open_.constant() || below_inf(o_in.p, s1 - s0)) &&
                      (!kAffine || extend_.constant() || below_inf(e_in.p, s1 - s0));
      for (int st = 0; st < kStates && max_plus; ++st) {
        float carried[2 * W];
        prev[st].store(carried);
        prev2[st].store(carried + W);
        max_plus = below_inf(carried, 2) &&
                   below_inf(top[st], s0 < n_ ? s0 : n_, s1 < n_ ? s1 : n_);
      }
      if (max_plus) {
        max_plus_steps(s0, s1, top, col_pack, prev, prev2, s_in.p, o_in.p, open_value,
                       extend_value, lane, row_in, partial, ends, step_done);
      } else {
        general_steps(s0, s1, top, col_pack, prev, prev2, s_in.p, o_in.p, e_in.p, open_value,
                      extend_value, lane, row_in, local && !keep, soft, inv_t, ends, step_done);
      }
      if (!keep) __atomic_store_n(&progress_[band], s1, __ATOMIC_RELEASE);
    }
    if (local && !keep) {
      for (int k = 0; k < W && i0 + 1 + k <= m_; ++k) {
        row_best_[i0 + 1 + k] = ends.best[k];
        row_sum_[i0 + 1 + k] = ends.sum[k];
      }
    }
  }

  // forward_band's steps [s0, s1): recurrence.h's cells. Each chunk's steps are a function of
  // their own (so are max_plus_steps), whose carried values stay in registers.
  template <typename StepDone>
  __attribute__((noinline)) void general_steps(
      int s0, int s1, const float* const (&top)[kStates], const P (&col_pack)[kStates],
      P (&prev_io)[kStates], P (&prev2_io)[kStates], const float* s_in, const float* o_in,
      const float* e_in, P open_value, P extend_value, I lane, Mk row_in, bool track_ends,
      bool soft, P inv_t, RowEnds& ends_io, StepDone& step_done) {
    const bool local = c_.local;
    P prev[kStates], diag[kStates];  // diag: the up of step s - 1
    for (int st = 0; st < kStates; ++st) {
      prev[st] = prev_io[st];
      diag[st] = shift_up(prev2_io[st], top[st][s0 < n_ ? s0 : n_]);
    }
    RowEnds ends = ends_io;
    P last_prev[kStates];
    for (int st = 0; st < kStates; ++st) last_prev[st] = prev2_io[st];
    for (int s = s0; s < s1; ++s) {
      const int64_t at = int64_t(s - s0) * W;
      const P score = P::load(s_in + at);
      const P o = open_.constant() ? open_value : P::load(o_in + at);
      const int jt = s + 1 < n_ ? s + 1 : n_;  // lane 0's column (past n: any)
      const I j = I(s + 1) - lane;
      P cur[kStates], up[kStates];
      for (int st = 0; st < kStates; ++st) up[st] = shift_up(prev[st], top[st][jt]);
      if constexpr (!kAffine) {
        P x[4];
        dp::LinearTerms::of(diag[0], up[0], prev[0], score, o, local, x);
        cur[0] = cell_.smax(x);
      } else {
        const P e = extend_.constant() ? extend_value : P::load(e_in + at);
        P xa[4], xv[2], xh[3];
        dp::AffineMatchTerms::of(diag[dp::kA], diag[dp::kX], diag[dp::kY], local, xa);
        dp::AffineVerticalTerms::of(up[dp::kA], up[dp::kX], o, e, xv);
        dp::AffineHorizontalTerms::of(prev[dp::kA], prev[dp::kX], prev[dp::kY], o, e, xh);
        cur[dp::kA] = score + cell_.smax(xa);
        cur[dp::kX] = cell_.smax(xv);
        cur[dp::kY] = cell_.smax(xh);
      }
      if (s < W - 1) {  // lanes before their first column hold column 0
        const Mk before = j <= I(0);
        for (int st = 0; st < kStates; ++st) cur[st] = select(before, col_pack[st], cur[st]);
      }
      if (track_ends) ends.add(cur[0], row_in & (I(1) <= j) & (j <= I(n_)), soft, inv_t);
      if constexpr (kAffine) {
        step_done(s, cur[0], cur[1], cur[2]);
      } else {
        step_done(s, cur[0]);
      }
      for (int st = 0; st < kStates; ++st) {
        diag[st] = up[st];
        last_prev[st] = prev[st];
        prev[st] = cur[st];
      }
    }
    for (int st = 0; st < kStates; ++st) {
      prev_io[st] = prev[st];
      prev2_io[st] = last_prev[st];
    }
    ends_io = ends;
  }

  // forward_band's max-plus steps [s0, s1) (t = 0, nothing at or above +inf).
  template <typename StepDone>
  __attribute__((noinline)) void max_plus_steps(int s0, int s1, const float* const (&top)[kStates],
                      const P (&col_pack)[kStates], P (&prev_io)[kStates], P (&prev2_io)[kStates],
                      const float* s_in, const float* o_in, P open_value, P extend_value,
                      I lane, Mk row_in, bool partial, RowEnds& ends, StepDone& step_done) {
    // Named copies (not arrays), so that the carried values stay in registers.
    const bool local = c_.local;
    const P zero = P(0.0f);
    auto max2 = [](P a, P b) { return fast_max(a, b); };
    auto max1 = [](float a, float b) { return a > b ? a : b; };  // no NaN here, no libm call
    P best = ends.best;
    // Lanes before their first column hold column 0; the end's maximum takes only the cells
    // of the item's block (the mask needed in the first and last W - 1 steps, or a partial band).
    auto edges = [&](int s, P& v, const P& col) {
      const I j = I(s + 1) - lane;
      if (s < W - 1) v = select(j <= I(0), col, v);
      return row_in & (I(1) <= j) & (j <= I(n_));
    };
    if constexpr (!kAffine) {
      P h = prev_io[0], h2 = prev2_io[0];
      for (int s = s0; s < s1; ++s) {
        const int64_t at = int64_t(s - s0) * W;
        const P score = P::load(s_in + at);
        const P g = open_.constant() ? open_value : P::load(o_in + at);
        const P diag = shift_up(h2, top[0][s < n_ ? s : n_]);
        const P up = shift_up(h, top[0][s + 1 < n_ ? s + 1 : n_]);
        const P match = local ? max2(zero, diag + score) : diag + score;
        P v = max2(max2(match, h + g), up + g);
        if (s < W - 1 || s >= n_ || partial) {
          const Mk in = edges(s, v, col_pack[0]);
          if (local) best = max2(best, select(in, v, zero));
        } else if (local) {
          best = max2(best, v);
        }
        step_done(s, v);
        h2 = h;
        h = v;
      }
      prev_io[0] = h;
      prev2_io[0] = h2;
    } else {
      using dp::kA;
      using dp::kX;
      using dp::kY;
      const P o = open_value, e = extend_value;
      const float o_value = o[0], e_value = e[0];
      const float *ta = top[kA], *tx = top[kX], *ty = top[kY];
      P a = prev_io[kA], x = prev_io[kX], y = prev_io[kY];
      P a2 = prev2_io[kA], x2 = prev2_io[kX], y2 = prev2_io[kY];
      for (int s = s0; s < s1; ++s) {
        const int64_t at = int64_t(s - s0) * W;
        const P score = P::load(s_in + at);
        const int jt = s + 1 < n_ ? s + 1 : n_;
        const int jd = s < n_ ? s : n_;
        // A = S + max(0, A, X, Y of the diagonal), X = max(A + o, X + e of the cell above),
        // Y = max(A + o, X + o, Y + e of the cell to the left): maxima taken, then shifted.
        const P diag_max =
            shift_up(max2(max2(a2, x2), y2), max1(max1(ta[jd], tx[jd]), ty[jd]));
        const P a_open = a + o;
        P na = score + (local ? max2(zero, diag_max) : diag_max);
        P nx = shift_up(max2(a_open, x + e), max1(ta[jt] + o_value, tx[jt] + e_value));
        P ny = max2(max2(a_open, x + o), y + e);
        if (s < W - 1 || s >= n_ || partial) {
          edges(s, nx, col_pack[kX]);
          edges(s, ny, col_pack[kY]);
          const Mk in = edges(s, na, col_pack[kA]);
          if (local) best = max2(best, select(in, na, zero));
        } else if (local) {
          best = max2(best, na);
        }
        step_done(s, na, nx, ny);
        a2 = a;
        x2 = x;
        y2 = y;
        a = na;
        x = nx;
        y = ny;
      }
      prev_io[kA] = a;
      prev_io[kX] = x;
      prev_io[kY] = y;
      prev2_io[kA] = a2;
      prev2_io[kX] = x2;
      prev2_io[kY] = y2;
    }
    ends.best = best;
  }

  CellTarget open_target(const GradsView<float>& g) const {
    return {g.open ? g.open + b_ * g.open_sb : nullptr, g.open_si, g.open_sj};
  }
  CellTarget extend_target(const GradsView<float>& g) const {
    return {kAffine && g.extend ? g.extend + b_ * g.extend_sb : nullptr, g.extend_si, g.extend_sj};
  }

  // d score / d penalty at cell (i, j): into the penalty's entry, or, for a penalty of one
  // value an item, into row i's sum (row_sums[i]), which finish_backward adds up in row order.
  static void add_penalty(const CellTarget& dst, float* row_sums, int i, int j, float value) {
    if (!dst.base || value == 0.0f) return;
    if (dst.constant()) {
      row_sums[i] += value;
    } else {
      dst.base[clamp_index(i) * dst.si + clamp_index(j) * dst.sj] += value;
    }
  }

  float* adjoint_row(int state, int boundary_index) const {
    return adjoint_.p + (int64_t(state) * kRing + boundary_index % kRing) * width_;
  }

  // Waits until `band`'s adjoint has done every step down to `step` (-1: column 0 too).
  void wait_for_adjoint(int band, int step) const {
    for (int spins = 0; __atomic_load_n(&back_done_[band], __ATOMIC_ACQUIRE) > step; ++spins) {
      if (spins > 64) sched_yield();
    }
  }

  // The adjoint of one band (docs/design.md, "Log space: the adjoint"; sweep.h's, cell by cell):
  // its values recomputed from its top row, then its steps from the last, each lane's adjoint
  // made of the pushes of its right neighbour (the lane's own, a step later) and of the row
  // below (the lane below's, shifted down; the band below's for lane W - 1).
  void backward_band(int band, float grad, const GradsView<float>& g, float* values) {
    using dp::kA;
    using dp::kX;
    using dp::kY;
    const int i0 = band * W;
    const bool local = c_.local;
    forward_band(band, values);
    float col[kStates][W];
    first_column(band, col);
    const float* top[kStates];
    const float* below[kStates];
    float* above[kStates];
    P col_pack[kStates];
    if (band + kRing - 1 < bands_) wait_for_adjoint(band + kRing - 1, -1);  // row `above` free
    for (int st = 0; st < kStates; ++st) {
      top[st] = boundary(st, band);
      below[st] = band + 1 < bands_ ? adjoint_row(st, band + 1) : nullptr;
      above[st] = adjoint_row(st, band);
      col_pack[st] = P::load(col[st]);
    }
    auto value = [&](int st, int s) {
      return s < 0 ? col_pack[st] : P::load(values + (int64_t(st) * steps_ + s) * W);
    };
    const I lane = I::iota();
    const Mk row_in = lane <= I(m_ - i0 - 1);
    // Seeds at one cell a band (docs/spec.md, "Gradients"): global, d score / d (m, n); local
    // max, the best cell.
    int seed_step = -1;
    P seed[kStates];
    for (int st = 0; st < kStates; ++st) seed[st] = P(0.0f);
    if (!local && m_ - i0 - 1 < W) {
      const int k = m_ - i0 - 1;
      seed_step = n_ - 1 + k;
      if constexpr (kAffine) {
        float w[3];
        dp::smax_weights(last_, c_.temperature, w);
        for (int st = 0; st < 3; ++st) seed[st].set(k, grad * w[st]);
      } else {
        seed[0].set(k, grad);
      }
    }
    const bool soft = local && end_.soft(c_);
    if (local && !soft && end_.best_i > i0 && end_.best_i <= i0 + W) {
      // The best cell: the first of its row (lane k) that holds the best value (NaN: a NaN).
      const int k = end_.best_i - i0 - 1;
      const float best = end_.best;
      for (int s = k; s < k + n_; ++s) {
        const float v = values[int64_t(s) * W + k];
        if (v == best || (best != best && v != v)) {
          seed_step = s;
          break;
        }
      }
      seed[0].set(k, grad);
    }
    const P inv_t = P(soft ? 1.0f / c_.temperature : 0.0f);
    const P best = P(end_.best), inv_sum = P(1.0f / end_.soft_sum), grad_pack = P(grad);

    const CellTarget d_open = open_target(g), d_extend = extend_target(g);
    float* d_scores = g.scores + b_ * g.M * g.N;
    const P open_value = P(open_.constant() ? open_.base[0] : 0.0f);
    const P extend_value = P(kAffine && extend_.constant() ? extend_.base[0] : 0.0f);
    const bool open_cells = d_open.base && !d_open.constant();
    const bool extend_cells = d_extend.base && !d_extend.constant();
    Buffer<float> s_in(kChunk * W), o_in(open_.constant() ? 0 : kChunk * W),
        e_in(kAffine && !extend_.constant() ? kChunk * W : 0), ds_out(kChunk * W),
        do_out(open_cells ? kChunk * W : 0), de_out(extend_cells ? kChunk * W : 0);
    P sum_open = P(0.0f), sum_extend = P(0.0f);  // penalties of one value an item, per row
    // Carried from step s + 1 to s: the pushes into the lane's left neighbour, the pushes
    // into the row above (diagonal of step s + 1 plus up of step s, summed as sweep.h does).
    P left[kStates], to_above[kStates], diag_next[kStates];
    float col0_adjoint[kStates][W] = {};
    for (int st = 0; st < kStates; ++st) left[st] = to_above[st] = diag_next[st] = P(0.0f);
    const int last_chunk = (steps_ - 1) / kChunk * kChunk;
    for (int s0 = last_chunk; s0 >= 0; s0 -= kChunk) {
      const int s1 = s0 + kChunk < steps_ ? s0 + kChunk : steps_;
      if (below[0]) wait_for_adjoint(band + 1, s0 + 2 - W <= 0 ? -1 : s0 + 1 - W);
      stage_skewed<W>(s_in.p, scores_, i0, s0, s1, m_, n_);
      if (!open_.constant()) stage_skewed<W>(o_in.p, open_, i0, s0, s1, m_, n_);
      if (kAffine && !extend_.constant()) stage_skewed<W>(e_in.p, extend_, i0, s0, s1, m_, n_);
      for (int s = s1 - 1; s >= s0; --s) {
        const int64_t at = int64_t(s - s0) * W;
        const I j = I(s + 1) - lane;
        const Mk in = row_in & (I(1) <= j) & (j <= I(n_));
        const int jb = s + 2 - W;  // lane W - 1's column
        P e[kStates];
        for (int st = 0; st < kStates; ++st) {
          const float from_band_below = below[st] && jb >= 0 && jb <= n_ ? below[st][jb] : 0.0f;
          e[st] = shift_down(to_above[st], from_band_below) + left[st];
        }
        if (s == seed_step)
          for (int st = 0; st < kStates; ++st) e[st] = e[st] + seed[st];
        const P cur0 = value(0, s);
        if (soft) {
          const P w = select(cur0 == best, P(1.0f), exp_((cur0 - best) * inv_t)) * inv_sum;
          e[0] = e[0] + select(in, grad_pack * w, P(0.0f));
        }
        if (s <= W - 2)  // lane s + 1 is at column 0: the adjoint of its boundary cell
          for (int st = 0; st < kStates; ++st) col0_adjoint[st][s + 1] = e[st][s + 1];
        const int jt = s + 1 < n_ ? s + 1 : n_;
        const int jd = s < n_ ? s : n_;
        P up[kStates], diag[kStates], prev[kStates];
        for (int st = 0; st < kStates; ++st) {
          prev[st] = value(st, s - 1);
          up[st] = shift_up(prev[st], top[st][jt]);
          diag[st] = shift_up(value(st, s - 2), top[st][jd]);
        }
        const P score = P::load(s_in.p + at);
        const P o = open_.constant() ? open_value : P::load(o_in.p + at);
        P d_o, d_e = P(0.0f), d_s;
        if constexpr (!kAffine) {
          const Mk act = in & (e[0] != P(0.0f));
          P x[4], w[4];
          dp::LinearTerms::of(diag[0], up[0], prev[0], score, o, local, x);
          cell_.weights(x, w);
          const P dn = masked(act, e[0] * w[dp::LinearTerms::kMatch]);
          to_above[0] = diag_next[0] + masked(act, e[0] * w[dp::LinearTerms::kUp]);
          left[0] = masked(act, e[0] * w[dp::LinearTerms::kLeft]);
          diag_next[0] = dn;
          d_s = dn;
          d_o = masked(act, e[0] * (w[dp::LinearTerms::kUp] + w[dp::LinearTerms::kLeft]));
        } else {
          using dp::AffineHorizontalTerms;
          using dp::AffineVerticalTerms;
          const P ext = extend_.constant() ? extend_value : P::load(e_in.p + at);
          const Mk act_a = in & (e[kA] != P(0.0f)), act_x = in & (e[kX] != P(0.0f)),
                   act_y = in & (e[kY] != P(0.0f));
          P xh[3], wh[3], xv[2], wv[2], xa[4], wa[4];
          dp::AffineHorizontalTerms::of(prev[kA], prev[kX], prev[kY], o, ext, xh);
          dp::AffineVerticalTerms::of(up[kA], up[kX], o, ext, xv);
          dp::AffineMatchTerms::of(diag[kA], diag[kX], diag[kY], local, xa);
          cell_.weights(xh, wh);
          cell_.weights(xv, wv);
          cell_.weights(xa, wa);
          const P ey = e[kY], ex = e[kX], ea = e[kA];
          left[kA] = masked(act_y, ey * wh[AffineHorizontalTerms::kOpenFromA]);
          left[kX] = masked(act_y, ey * wh[AffineHorizontalTerms::kOpenFromX]);
          left[kY] = masked(act_y, ey * wh[AffineHorizontalTerms::kExtend]);
          to_above[kA] = diag_next[kA] + masked(act_x, ex * wv[AffineVerticalTerms::kOpen]);
          to_above[kX] = diag_next[kX] + masked(act_x, ex * wv[AffineVerticalTerms::kExtend]);
          to_above[kY] = diag_next[kY];
          diag_next[kA] = masked(act_a, ea * wa[1]);
          diag_next[kX] = masked(act_a, ea * wa[2]);
          diag_next[kY] = masked(act_a, ea * wa[3]);
          d_s = masked(act_a, ea);  // A = S + smax_t(...): d A / d S = 1
          d_o = masked(act_y, ey * (wh[AffineHorizontalTerms::kOpenFromA] +
                                    wh[AffineHorizontalTerms::kOpenFromX])) +
                masked(act_x, ex * wv[AffineVerticalTerms::kOpen]);
          d_e = masked(act_y, ey * wh[AffineHorizontalTerms::kExtend]) +
                masked(act_x, ex * wv[AffineVerticalTerms::kExtend]);
        }
        if (s + 1 <= n_)  // lane 0's pushes into the row above, at column s + 1
          for (int st = 0; st < kStates; ++st) above[st][s + 1] = to_above[st][0];
        d_s.store(ds_out.p + at);
        if (open_cells) d_o.store(do_out.p + at); else sum_open += d_o;
        if constexpr (kAffine) {
          if (extend_cells) d_e.store(de_out.p + at); else sum_extend += d_e;
        }
      }
      store_unskewed<W>(ds_out.p, d_scores, g.N, i0, s0, s1, m_, n_);
      if (open_cells) add_unskewed<W>(do_out.p, d_open, i0, s0, s1, m_, n_);
      if (kAffine && extend_cells) add_unskewed<W>(de_out.p, d_extend, i0, s0, s1, m_, n_);
      __atomic_store_n(&back_done_[band], s0, __ATOMIC_RELEASE);
    }
    // Lane 0 reaches column 0 at step -1: its adjoint is what step 0 pushed into it.
    for (int st = 0; st < kStates; ++st) col0_adjoint[st][0] = to_above[st][1] + left[st][0];
    // Column 0 and the row above's column 0 (docs/spec.md's boundaries; constants when local).
    for (int st = 0; st < kStates; ++st) above[st][0] = diag_next[st][0];
    if (!local) {
      if constexpr (!kAffine) {  // H[i][0] = H[i-1][0] + g
        float chain = 0.0f;
        for (int k = W - 1; k >= 0; --k) {
          if (i0 + 1 + k > m_) continue;
          chain += col0_adjoint[0][k];
          add_penalty(d_open, row_d_open_.p, i0 + 1 + k, 0, chain);
        }
        above[0][0] += chain;
      } else {  // X[i][0] = smax_t(A[i-1][0] + o, X[i-1][0] + e); A[i][0], Y[i][0] constant
        float ex = 0.0f, to_a = 0.0f;
        for (int k = W - 1; k >= 0; --k) {
          const int i = i0 + 1 + k;
          if (i > m_) continue;
          ex += col0_adjoint[kX][k];
          to_a = 0.0f;
          if (ex == 0.0f) continue;
          const float a_up = k > 0 ? col[kA][k - 1] : top[kA][0];
          const float x_up = k > 0 ? col[kX][k - 1] : top[kX][0];
          float t[2], w[2];
          dp::AffineVerticalTerms::of(a_up, x_up, open_.at(i, 0), extend_.at(i, 0), t);
          dp::smax_weights(t, c_.temperature, w);
          add_penalty(d_open, row_d_open_.p, i, 0, ex * w[0]);
          add_penalty(d_extend, row_d_extend_.p, i, 0, ex * w[1]);
          to_a = ex * w[0];
          ex *= w[1];
        }
        above[kX][0] += ex;
        above[kA][0] += to_a;
      }
    }
    for (int k = 0; k < W && i0 + 1 + k <= m_; ++k) {
      row_d_open_[i0 + 1 + k] += sum_open[k];
      row_d_extend_[i0 + 1 + k] += sum_extend[k];
    }
    __atomic_store_n(&back_done_[band], -1, __ATOMIC_RELEASE);
  }

  static P masked(Mk act, P x) { return select(act, x, P(0.0f)); }

  const dp::Config<float> c_;
  const CellMath<W> cell_;
  const CellSource scores_, open_, extend_;
  const int m_, n_;
  const int bands_, steps_;  // bands of W rows; n + W - 1 steps a band
  const int64_t width_;     // n + 1 columns a row
  Buffer<float> boundary_;  // kStates planes of bands + 1 rows: DP row band * W, each band's top
  Buffer<int> progress_;    // steps each band has done
  int next_band_ = 0;       // the band the next thread takes
  Buffer<float> row_best_, row_sum_;  // local: each row's end (RowEnds), index i = 1..m
  float last_[kStates] = {};  // global: the values of cell (m, n)
  dp::LocalEnd<float> end_;   // local: the rows' ends merged (score())
  const int64_t b_;           // the item
  Buffer<float> adjoint_;     // kStates planes of kRing rows (adjoint_row)
  Buffer<int> back_done_;     // the lowest step each band's adjoint has done; -1: all, column 0 too
  int next_band_back_ = 0;    // bands taken by the adjoint, from the last
  Buffer<float> row_d_open_, row_d_extend_;  // penalties of one value an item: each row's sum
};

template <int W>
cpu::BandJob* band_job(const ProblemView<float>& p, bool affine, int64_t item) {
  if (affine) return new BandSweep<W, true>(p, item);
  return new BandSweep<W, false>(p, item);
}

}  // namespace SOFTALIGN_PACK_NAMESPACE
}  // namespace softalign
