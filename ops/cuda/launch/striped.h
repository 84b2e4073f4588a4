// The striped kernels' entry points for the CUDA backend (float32, penalties constant per item):
// each runs the kernel dispatch.cu chose. Instantiated per gap model in striped_linear.cu and
// striped_affine.cu, so that the two compile in parallel.
#pragma once

#include <ATen/ATen.h>

#include "../../problem.h"
#include "../dispatch.h"

namespace softalign {

// Blocks (or work units) of `b` for `a` things: both CUDA paths size their launches with it.
inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

namespace striped {

template <bool kAffine>
void forward(const Problem& p, const dispatch::ForwardChoice& choice, at::Tensor& score);

template <bool kAffine>
void forward_backward(const Problem& p, const dispatch::BackwardChoice& choice,
                      const at::Tensor& grad, ProblemGrads& out);

// Groups of G lanes of the streamed forward (log_space/streamed.cuh; affine, G x R = 16 x 2) that
// the device holds at once: dispatch.cu's streamed rule.
int64_t streamed_groups(const Problem& p, int G, int R);

}  // namespace striped
}  // namespace softalign
