// Raw pointers and strides of one call's inputs and gradients, for kernels (host and device).
// No ATen here: per-instruction-set CPU translation units include it (ops/cpu/pack.h).
#pragma once

#include <cstdint>

#include "sweep.h"

namespace softalign {

// Raw pointers and strides for kernels (host and device).
template <typename T>
struct ProblemView {
  const T* scores;
  int64_t M, N;
  const T* open;
  int64_t open_sb, open_si, open_sj;
  const T* extend;
  int64_t extend_sb, extend_si, extend_sj;
  const int64_t* lengths_a;  // null: every item has length M
  const int64_t* lengths_b;
  dp::Config<T> config;

  static SOFTALIGN_HD int64_t clamp(int64_t length, int64_t limit) {
    return length < 0 ? 0 : length > limit ? limit : length;
  }

  // Item b's lengths. Clamped: lengths are checked on the host except under CUDA graph capture
  // (problem.cpp), where an out-of-range one must still not reach outside the item's (M, N) block.
  SOFTALIGN_HD int m_of(int64_t b) const {
    return static_cast<int>(lengths_a ? clamp(lengths_a[b], M) : M);
  }
  SOFTALIGN_HD int n_of(int64_t b) const {
    return static_cast<int>(lengths_b ? clamp(lengths_b[b], N) : N);
  }

  SOFTALIGN_HD dp::Item<T> item(int64_t b) const {
    dp::Item<T> it;
    it.scores = scores + b * M * N;
    it.stride_i = N;
    it.stride_j = 1;
    it.open = {open + b * open_sb, open_si, open_sj};
    it.extend = {extend ? extend + b * extend_sb : nullptr, extend_si, extend_sj};
    it.m = m_of(b);
    it.n = n_of(b);
    return it;
  }
};

template <typename T>
struct GradsView {
  T* scores;
  int64_t M, N;
  T* open;
  int64_t open_sb, open_si, open_sj;
  T* extend;
  int64_t extend_sb, extend_si, extend_sj;

  SOFTALIGN_HD dp::ItemGrads<T> item(int64_t b) const {
    dp::ItemGrads<T> g;
    g.scores = scores + b * M * N;
    g.stride_i = N;
    g.stride_j = 1;
    g.open = {open + b * open_sb, open_si, open_sj};
    g.extend = {extend ? extend + b * extend_sb : nullptr, extend_si, extend_sj};
    return g;
  }
};

}  // namespace softalign
