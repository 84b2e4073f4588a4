// The general path of the CUDA backend (docs/design.md, "GPU schedules"): one thread per item
// runs sweep.h's row-major sweeps, its tables in global memory. Every dtype, gap model, mode,
// reduction and penalty shape; dispatch.cu sends here what the striped kernels do not take.
// Included by smith_waterman_cuda.cu only (its anonymous namespace).
#pragma once

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include "../../kernels.h"
#include "../launch/striped.h"  // ceil_div

namespace softalign {
namespace {

constexpr int kGeneralThreads = 128;

template <typename T, bool kAffine>
__global__ void __launch_bounds__(kGeneralThreads)
    forward_general_kernel(ProblemView<T> v, int64_t B, T* rows, int64_t rows_per_item,
                           T* score) {
  const int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= B) return;
  using Model = dp::Model<T, kAffine>;
  const dp::Item<T> it = v.item(b);
  const typename Model::Tab table{rows + b * rows_per_item, 2, it.n + 1};  // O(N) per item
  dp::LocalEnd<T> end;
  score[b] = Model::forward(it, v.config, table, end);
}

template <typename T, bool kAffine>
__global__ void __launch_bounds__(kGeneralThreads)
    forward_backward_general_kernel(ProblemView<T> v, GradsView<T> gv, int64_t B, const T* grad,
                                    T* values, int64_t values_per_item, T* adjoint,
                                    int64_t adjoint_per_item, T* score) {
  const int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= B) return;
  using Model = dp::Model<T, kAffine>;
  const dp::Item<T> it = v.item(b);
  const typename Model::Tab V{values + b * values_per_item, it.m + 1, it.n + 1};  // every row
  const typename Model::Tab E{adjoint + b * adjoint_per_item, 2, it.n + 1};
  dp::LocalEnd<T> end;
  score[b] = Model::forward(it, v.config, V, end);
  Model::backward(it, v.config, V, end, grad[b], E, gv.item(b));  // this thread owns item b
}

template <typename T, bool kAffine>
void forward_general(const Problem& p, at::Tensor& score) {
  constexpr int kStates = dp::Model<T, kAffine>::kStates;
  const int64_t B = p.batch(), N = p.scores.size(2);
  const int64_t rows_per_item = int64_t(kStates) * 2 * (N + 1);
  at::Tensor rows = at::empty({B * rows_per_item}, p.scores.options());
  forward_general_kernel<T, kAffine>
      <<<ceil_div(B, kGeneralThreads), kGeneralThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
          view_of<T>(p), B, rows.data_ptr<T>(), rows_per_item, score.data_ptr<T>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T, bool kAffine>
void forward_backward_general(const Problem& p, const at::Tensor& grad, ProblemGrads& out) {
  constexpr int kStates = dp::Model<T, kAffine>::kStates;
  const int64_t B = p.batch(), M = p.scores.size(1), N = p.scores.size(2);
  const int64_t values_per_item = int64_t(kStates) * (M + 1) * (N + 1);
  const int64_t adjoint_per_item = int64_t(kStates) * 2 * (N + 1);
  at::Tensor values = at::empty({B * values_per_item}, p.scores.options());
  at::Tensor adjoint = at::empty({B * adjoint_per_item}, p.scores.options());
  forward_backward_general_kernel<T, kAffine>
      <<<ceil_div(B, kGeneralThreads), kGeneralThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
          view_of<T>(p), view_of<T>(out), B, grad.data_ptr<T>(), values.data_ptr<T>(),
          values_per_item, adjoint.data_ptr<T>(), adjoint_per_item, out.score.data_ptr<T>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace
}  // namespace softalign
