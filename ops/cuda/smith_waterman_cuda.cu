// The CUDA backend (TORCH_LIBRARY_IMPL): runs the kernel that dispatch.cu chooses for a call
// (dispatch.h's table): the general path (general/kernels.cuh, a thread per item, every dtype)
// or the striped kernels (launch/striped.h; float32, penalties constant per item), whose cells
// are recurrence.h's (log_space/) or prob_space.h's (prob_space/).
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <type_traits>

#include "../kernels.h"
#include "dispatch.h"
#include "general/kernels.cuh"
#include "launch/striped.h"

namespace softalign {
namespace {

template <typename T, bool kAffine>
void forward_items(const Problem& p, at::Tensor& score) {
  if constexpr (std::is_same_v<T, float>) {
    const dispatch::ForwardChoice choice = dispatch::choose_forward_kernel(p);
    if (choice.kernel != dispatch::ForwardKernel::kGeneral) {
      striped::forward<kAffine>(p, choice, score);
      return;
    }
  }
  forward_general<T, kAffine>(p, score);
}

template <typename T, bool kAffine>
void forward_backward_items(const Problem& p, const at::Tensor& grad, ProblemGrads& out) {
  if constexpr (std::is_same_v<T, float>) {
    const dispatch::BackwardChoice choice = dispatch::choose_backward_kernel(p);
    if (choice.kernel != dispatch::BackwardKernel::kGeneral) {
      striped::forward_backward<kAffine>(p, choice, grad, out);
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
    return dispatch::striped(p) && !p.lengths_a.defined() && !p.lengths_b.defined();
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
