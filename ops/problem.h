// The validated, normalised form of one call, shared by every backend: the front end checks
// the arguments once (SPEC "Bad input") and hands kernels plain tensors in the compute dtype.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <string_view>

#include "sweep.h"

namespace softalign {

struct Problem {
  at::Tensor scores;      // (B, M, N), compute dtype, contiguous
  at::Tensor gap_open;    // (1|B, 1|M, 1|N), compute dtype, contiguous
  at::Tensor gap_extend;  // like gap_open; undefined for the linear gap model
  at::Tensor lengths_a;   // (B,) int64 on the scores' device; undefined means M
  at::Tensor lengths_b;   // (B,) int64 on the scores' device; undefined means N
  double temperature = 1.0;
  bool local = true;
  bool soft_reduction = false;
  bool unbatched = false;        // the caller passed (M, N)
  at::ScalarType result_dtype;   // the caller's scores dtype

  bool affine() const { return gap_extend.defined(); }
  int64_t batch() const { return scores.size(0); }
};

// Checks every argument (naming it in the error) and normalises it.
Problem make_problem(const at::Tensor& scores, const at::Tensor& gap_open,
                     const std::optional<at::Tensor>& gap_extend, double temperature,
                     const std::optional<at::Tensor>& lengths_a,
                     const std::optional<at::Tensor>& lengths_b, std::string_view mode,
                     std::string_view reduction);

// What the adjoint kernels produce: d score / d inputs, per item, in the compute dtype.
struct ProblemGrads {
  at::Tensor score;       // (B,)
  at::Tensor scores;      // (B, M, N)
  at::Tensor gap_open;    // (B, 1|M, 1|N): one plane per item, summed by the front end
  at::Tensor gap_extend;  // like gap_open; undefined for the linear gap model
};

// Zero-filled gradient buffers of the right shapes and the score buffer.
ProblemGrads make_grads(const Problem& p);

// The shapes and dtypes the caller passed.
at::Tensor score_to_caller(const Problem& p, const at::Tensor& score);
at::Tensor scores_grad_to_caller(const Problem& p, const at::Tensor& grad);
at::Tensor penalty_grad_to_caller(const at::Tensor& grad, const at::Tensor& penalty);

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

  SOFTALIGN_HD dp::Item<T> item(int64_t b) const {
    dp::Item<T> it;
    it.scores = scores + b * M * N;
    it.stride_i = N;
    it.stride_j = 1;
    it.open = {open + b * open_sb, open_si, open_sj};
    it.extend = {extend ? extend + b * extend_sb : nullptr, extend_si, extend_sj};
    it.m = static_cast<int>(lengths_a ? lengths_a[b] : M);
    it.n = static_cast<int>(lengths_b ? lengths_b[b] : N);
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

template <typename T>
ProblemView<T> view_of(const Problem& p);
template <typename T>
GradsView<T> view_of(const ProblemGrads& g);

}  // namespace softalign
