// CUDA backend: two schedules of the one cell math of recurrence.h.
//  - General (every dtype, gap model, mode, reduction, penalty shape): one thread per item runs
//    sweep.h's row-major sweeps, its tables in global memory.
//  - Striped (float32, penalties constant per item, DESIGN "Scheduling on a GPU"): stripes.cuh's
//    kernels, launched by striped_launch.cuh (striped.h is the interface).
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cstdlib>
#include <type_traits>

#include "../kernels.h"
#include "striped.h"

namespace softalign {
namespace {

// ------------------------------------------------------------ general path: a thread per item

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

// ------------------------------------------------------------ the backend

}  // namespace

// The striped kernels take float32 with penalties constant per item: shape (1|B, 1, 1).
// SOFTALIGN_CUDA_GENERAL=1 sends every call to the general path (for tests and comparisons).
bool striped::eligible(const Problem& p) {
  static const bool force_general = std::getenv("SOFTALIGN_CUDA_GENERAL") != nullptr;
  const auto per_item = [](const at::Tensor& t) { return t.size(1) == 1 && t.size(2) == 1; };
  // The striped kernels count steps (N + 32, rounded up to whole chunks) and rows in 32 bits.
  constexpr int64_t kMaxExtent = INT32_MAX - 4096;
  return !force_general && p.scores.scalar_type() == at::kFloat && per_item(p.gap_open) &&
         (!p.affine() || per_item(p.gap_extend)) && p.scores.size(1) <= kMaxExtent &&
         p.scores.size(2) <= kMaxExtent;
}

namespace {

template <typename T, bool kAffine>
void forward_items(const Problem& p, at::Tensor& score) {
  if constexpr (std::is_same_v<T, float>) {
    if (striped::eligible(p)) {
      striped::forward<kAffine>(p, score);
      return;
    }
  }
  forward_general<T, kAffine>(p, score);
}

template <typename T, bool kAffine>
void forward_backward_items(const Problem& p, const at::Tensor& grad, ProblemGrads& out) {
  if constexpr (std::is_same_v<T, float>) {
    if (striped::eligible(p)) {
      striped::forward_backward<kAffine>(p, grad, out);
      return;
    }
  }
  forward_backward_general<T, kAffine>(p, grad, out);
}

struct CudaBackend {
  static at::Tensor forward(const Problem& p) {
    const c10::cuda::CUDAGuard guard(p.scores.device());
    at::Tensor score = at::empty({p.batch()}, p.scores.options());
    if (p.batch() == 0) return score;
    AT_DISPATCH_FLOATING_TYPES(p.scores.scalar_type(), "smith_waterman_cuda", [&] {
      if (p.affine()) {
        forward_items<scalar_t, true>(p, score);
      } else {
        forward_items<scalar_t, false>(p, score);
      }
    });
    return score;
  }

  // The striped adjoint writes d S of every cell of an item (the general sweeps add into it):
  // without lengths, every cell of the tensor.
  static bool writes_every_cell(const Problem& p) {
    return striped::eligible(p) && !p.lengths_a.defined() && !p.lengths_b.defined();
  }

  static void forward_backward(const Problem& p, const at::Tensor& grad, ProblemGrads& out) {
    const c10::cuda::CUDAGuard guard(p.scores.device());
    if (p.batch() == 0) return;
    AT_DISPATCH_FLOATING_TYPES(p.scores.scalar_type(), "smith_waterman_backward_cuda", [&] {
      if (p.affine()) {
        forward_backward_items<scalar_t, true>(p, grad, out);
      } else {
        forward_backward_items<scalar_t, false>(p, grad, out);
      }
    });
  }
};

}  // namespace

SOFTALIGN_LIBRARY_IMPL(CUDA, m) {
  SOFTALIGN_REGISTER_BACKEND(m, CudaBackend);
}

}  // namespace softalign
