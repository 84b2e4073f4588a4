// The striped schedule's entry points (stripes.cuh), for the CUDA backend: float32 with
// penalties constant per item. Instantiated per gap model in striped_linear.cu and
// striped_affine.cu, so that the two compile in parallel.
#pragma once

#include <ATen/ATen.h>

#include "../problem.h"

namespace softalign {

// Blocks (or work units) of `b` for `a` things: both CUDA paths size their launches with it.
inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

namespace striped {

// Whether the striped kernels take this call: float32, penalties of shape (1|B, 1, 1).
bool eligible(const Problem& p);

template <bool kAffine>
void forward(const Problem& p, at::Tensor& score);

template <bool kAffine>
void forward_backward(const Problem& p, const at::Tensor& grad, ProblemGrads& out);

}  // namespace striped
}  // namespace softalign
