// CUDA backend: two schedules of the one cell math of recurrence.h.
//  - General (every dtype, gap model, mode, reduction, penalty shape): one thread per item runs
//    sweep.h's row-major sweeps, its tables in global memory.
//  - Fast forward (float32, penalties constant per item, DESIGN "Scheduling on a GPU"): a group
//    of G lanes per item; lane l owns R consecutive rows of a stripe of G * R rows and sweeps the
//    columns one step behind lane l - 1; values crossing rows move by __shfl_up_sync; a stripe's
//    last row waits in global memory for the next stripe; scores are staged through shared memory
//    so that global reads are coalesced and shared reads are free of bank conflicts.
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cstdlib>
#include <algorithm>
#include <type_traits>
#include <vector>

#include "../kernels.h"
#include "stripes.cuh"

namespace softalign {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

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

// ------------------------------------------------------------ fast path: stripes.cuh

namespace fast {

// The striped kernels take float32 with penalties constant per item: shape (1|B, 1, 1).
bool eligible(const Problem& p) {
  static const bool force_general = std::getenv("SOFTALIGN_CUDA_GENERAL") != nullptr;
  const auto per_item = [](const at::Tensor& t) { return t.size(1) == 1 && t.size(2) == 1; };
  return !force_general && p.scores.scalar_type() == at::kFloat && per_item(p.gap_open) &&
         (!p.affine() || per_item(p.gap_extend));
}

// One call's launches of the striped kernels with G lanes per item and R rows per lane.
template <bool kAffine, int G, int R>
struct Launch {
  using Sh = stripes::Shape<kAffine, G, R>;
  static constexpr int kStates = Sh::kStates;
  static constexpr int kThreads = 32 * stripes::kWarpsPerBlock;

  const Problem& p;
  int64_t B, M, N;
  stripes::Geometry geo;
  std::vector<at::Tensor> keep;  // the workspace's tensors
  at::Tensor partials;           // [b][s][2]: d open, d extend per stripe

  explicit Launch(const Problem& problem) : p(problem) {
    B = p.batch();
    M = p.scores.size(1);
    N = p.scores.size(2);
    geo.stripes = static_cast<int>(std::max<int64_t>(1, ceil_div(M, Sh::kRows)));
    geo.steps = static_cast<int>(N + G);
    geo.units = ceil_div(B, Sh::kGroups) * geo.stripes;
    geo.width = N + 1;
  }

  float* floats(int64_t count) {
    keep.push_back(at::empty({std::max<int64_t>(count, 1)}, p.scores.options()));
    return keep.back().data_ptr<float>();
  }

  // launches: 1 (forward) or 2 (forward that saves, adjoint)
  std::vector<stripes::Workspace> workspaces(bool save) {
    stripes::Workspace ws{};
    const int64_t S = geo.stripes, W = geo.width;
    ws.scratch_per_item = int64_t(kStates) * std::max<int64_t>(4 * W, M + 3);
    ws.scratch = floats(B * ws.scratch_per_item);
    if (S > 1) ws.stripe_ends = floats(B * S * 4);
    if (save) {
      ws.values = floats(B * S * geo.steps * Sh::kSlab);
      ws.above = floats(B * S * kStates * W);
      ws.ends = floats(B * 4);
      ws.partials = floats(B * S * 2);
      partials = keep.back();
    }
    std::vector<stripes::Workspace> out(save ? 2 : 1, ws);
    if (S > 1) {  // progress counters and a ticket per launch, zeroed
      const int64_t per_launch = B * S + 1;
      keep.push_back(at::zeros({per_launch * int64_t(out.size())},
                               p.scores.options().dtype(at::kInt)));
      int* ints = keep.back().data_ptr<int>();
      for (size_t k = 0; k < out.size(); ++k) {
        out[k].progress = ints + k * per_launch;
        out[k].ticket = ints + k * per_launch + B * S;
      }
    }
    return out;
  }

  int64_t blocks() const { return ceil_div(geo.units, stripes::kWarpsPerBlock); }

  void forward(at::Tensor& score) {
    const stripes::Workspace ws = workspaces(false)[0];
    stripes::forward_kernel<kAffine, G, R, false>
        <<<blocks(), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
            view_of<float>(p), B, geo, ws, score.data_ptr<float>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }

  void forward_backward(const at::Tensor& grad, ProblemGrads& out) {
    const std::vector<stripes::Workspace> ws = workspaces(true);
    const auto stream = at::cuda::getCurrentCUDAStream();
    stripes::forward_kernel<kAffine, G, R, true><<<blocks(), kThreads, 0, stream>>>(
        view_of<float>(p), B, geo, ws[0], out.score.data_ptr<float>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    stripes::backward_kernel<kAffine, G, R><<<blocks(), kThreads, 0, stream>>>(
        view_of<float>(p), view_of<float>(out), B, geo, ws[1], grad.data_ptr<float>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    // The penalties' gradients: the stripes' partial sums, added in stripe order.
    const at::Tensor per_stripe = partials.narrow(0, 0, B * geo.stripes * 2).view({B, geo.stripes, 2});
    out.gap_open.view({B}).copy_(per_stripe.select(2, 0).sum(1));
    if (p.affine()) out.gap_extend.view({B}).copy_(per_stripe.select(2, 1).sum(1));
  }
};

// The lanes per item and rows per lane for a call: short pairs take one stripe, a warp for a
// few items or a quarter (half, affine) warp for many; long pairs a warp per stripe, of one row
// per lane when few pairs must keep many warps busy. The affine model keeps three states per
// row, so it takes fewer rows per lane.
template <bool kAffine, class Body>
void with_shape(const Problem& p, Body&& body) {
  const int64_t B = p.batch(), M = p.scores.size(1);
  constexpr int kRowsPerLane = kAffine ? 2 : 4;
  if (M <= 32 && B <= 1024) {
    Launch<kAffine, 32, 1> launch(p);
    body(launch);
  } else if (M <= 32) {
    Launch<kAffine, 32 / kRowsPerLane, kRowsPerLane> launch(p);
    body(launch);
  } else if (B * M >= (1 << 20)) {  // enough stripes to fill the chip: fewer, taller ones
    Launch<kAffine, 32, kRowsPerLane> launch(p);
    body(launch);
  } else {  // few long pairs: a row per lane, so that more warps share each pair
    Launch<kAffine, 32, 1> launch(p);
    body(launch);
  }
}

}  // namespace fast

// ------------------------------------------------------------ the backend

template <typename T, bool kAffine>
void forward_items(const Problem& p, at::Tensor& score) {
  if constexpr (std::is_same_v<T, float>) {
    if (fast::eligible(p)) {
      fast::with_shape<kAffine>(p, [&](auto& launch) { launch.forward(score); });
      return;
    }
  }
  forward_general<T, kAffine>(p, score);
}

template <typename T, bool kAffine>
void forward_backward_items(const Problem& p, const at::Tensor& grad, ProblemGrads& out) {
  if constexpr (std::is_same_v<T, float>) {
    if (fast::eligible(p)) {
      fast::with_shape<kAffine>(p, [&](auto& launch) { launch.forward_backward(grad, out); });
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

TORCH_LIBRARY_IMPL(softalign, CUDA, m) {
  SOFTALIGN_REGISTER_BACKEND(m, CudaBackend);
}

}  // namespace softalign
