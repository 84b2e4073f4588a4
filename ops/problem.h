// The validated, normalised form of one call, shared by every backend: the front end checks
// the arguments once (docs/spec.md, "Bad input") and hands kernels plain tensors in the compute dtype.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/Scalar.h>

#include <optional>
#include <string_view>

#include "registration.h"  // SOFTALIGN_LIBRARY_IMPL, for every file that registers kernels
#include "views.h"

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

// The dtype the kernels compute in for scores of dtype t: float64 stays, half and bfloat16
// compute in float32.
inline at::ScalarType compute_dtype(at::ScalarType t) {
  return t == at::kDouble ? at::kDouble : at::kFloat;
}

// A number (a penalty given as one) as a 0-d tensor with these options (compute dtype, device).
at::Tensor number_tensor(double value, const at::TensorOptions& options);

// A penalty given as a number, checked: a real number <= 0 (penalties are added to the score),
// not a bool; NaN propagates (docs/spec.md, "Bad input"). `name` is the argument's.
double penalty_number(const c10::Scalar& value, const char* name);

// A number penalty as a 0-d tensor in the dtype the kernels compute in, on the scores' device.
at::Tensor number_penalty_tensor(double value, const at::Tensor& scores);

// What autograd's backward adds to grad so that an item whose score is NaN gets NaN gradients
// everywhere (the kernels' gradient of a NaN item may be finite): NaN for those items, 0 for
// the others (finite or infinite scores alike). Same shape as score.
at::Tensor nan_of_items(const at::Tensor& score);

// An item whose score is NaN gets a NaN d score / d scores (the alignment op's output, which has
// no grad to carry it). In place on `grad`, (B, M, N).
void nan_items_to_nan(at::Tensor& grad, const at::Tensor& score);
#ifdef SOFTALIGN_WITH_CUDA
// The same on CUDA (scale_by_item.cu): reads each item's score and writes only NaN items' rows,
// so a batch without NaN costs a read of B floats, not a pass over B M N.
void nan_items_to_nan_cuda(at::Tensor& grad, const at::Tensor& score);
#endif

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

// Gradient buffers of the right shapes, zero-filled (d scores only if zero_scores: a backend
// that writes every cell spares the fill), and the score buffer.
ProblemGrads make_grads(const Problem& p, bool zero_scores);

// The shapes and dtypes the caller passed.
at::Tensor score_to_caller(const Problem& p, const at::Tensor& score);
at::Tensor scores_grad_to_caller(const Problem& p, const at::Tensor& grad);
at::Tensor penalty_grad_to_caller(const at::Tensor& grad, const at::Tensor& penalty);

// values (B, ...) times factors (B,), item by item: what softalign::_scale_by_item computes
// (autograd's backward scales the kept per-item gradients by grad with it), by PyTorch's ops.
at::Tensor scale_by_item(const at::Tensor& values, const at::Tensor& factors);

template <typename T>
ProblemView<T> view_of(const Problem& p);
template <typename T>
GradsView<T> view_of(const ProblemGrads& g);

}  // namespace softalign
