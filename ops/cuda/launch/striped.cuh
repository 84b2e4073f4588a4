// The launch code of the striped kernels (kernel_traits.cuh's schedule): workspaces, the shape
// of a call (lanes per item, rows per lane) and the kernels' template arguments (how the score
// reads the DP, t = 0). It runs the kernel that dispatch.cu chose and decides nothing itself.
#pragma once

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <cstdlib>
#include <type_traits>
#include <vector>

#include "../log_space/adjoint.cuh"
#include "../log_space/forward.cuh"
#include "../log_space/streamed.cuh"
#include "../prob_space/affine_adjoint.cuh"
#include "../prob_space/affine_forward.cuh"
#include "../prob_space/linear_adjoint.cuh"
#include "../prob_space/linear_forward.cuh"
#include "striped.h"

namespace softalign {
namespace striped {

template <stripes::Ends kEnds>
using EndsConstant = std::integral_constant<stripes::Ends, kEnds>;

// Calls body with the call's Ends as a compile-time constant (a template switch, not a choice of
// kernel: each end has its own instantiation of every kernel).
template <class Body>
void with_ends(const dp::Config<float>& c, Body&& body) {
  using stripes::Ends;
  if (!c.local) {
    body(EndsConstant<Ends::kGlobal>{});
  } else if (c.soft_reduction && c.temperature > 0.f) {
    body(EndsConstant<Ends::kSoft>{});
  } else {
    body(EndsConstant<Ends::kMax>{});
  }
}

// The penalties' gradients of items of several stripes: item b's stripe partials added in stripe
// order by one thread, so that they do not depend on the batch (at::sum's tree depends on how
// many items it reduces: docs/spec.md, "Dtypes and devices": results do not depend on batch size).
template <bool kAffine>
__global__ void sum_stripe_partials(const float* partials, int64_t B, int stripes, float* open,
                                    float* extend) {
  const int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= B) return;
  const float* q = partials + b * stripes * 2;
  float o = 0.f, e = 0.f;
  for (int s = 0; s < stripes; ++s) {
    o += q[2 * s];
    if constexpr (kAffine) e += q[2 * s + 1];
  }
  open[b] = o;
  if constexpr (kAffine) extend[b] = e;
}

// One call's launches of the striped kernels with G lanes per item and R rows per lane.
template <bool kAffine, int G, int R>
struct Launch {
  using Sh = stripes::Shape<kAffine, G, R>;
  static constexpr int kStates = Sh::kStates;
  static constexpr int kThreads = 32 * stripes::kWarpsPerBlock;

  const Problem& p;
  ProblemView<float> view;
  int64_t B, M, N;
  stripes::Geometry geo;
  std::vector<at::Tensor> keep;  // the workspace's tensors
  at::Tensor partials;           // [b][s][2]: d open, d extend per stripe

  explicit Launch(const Problem& problem) : p(problem), view(view_of<float>(problem)) {
    B = p.batch();
    M = p.scores.size(1);
    N = p.scores.size(2);
    geo.stripes = static_cast<int>(std::max<int64_t>(1, ceil_div(M, Sh::kRows)));
    geo.steps = static_cast<int>(N + G);
    geo.units = ceil_div(B, Sh::kGroups) * geo.stripes;
    geo.width = N + 1;
    TORCH_INTERNAL_ASSERT(Sh::kStacked || geo.stripes == 1, "items of several stripes, G = ", G);
  }

  float* floats(int64_t count, bool zeroed = false) {
    const int64_t size = std::max<int64_t>(count, 1);
    keep.push_back(zeroed ? at::zeros({size}, p.scores.options())
                          : at::empty({size}, p.scores.options()));
    return keep.back().data_ptr<float>();
  }

  // launches: 1 (forward) or 2 (forward that saves, adjoint)
  std::vector<stripes::Workspace> workspaces(bool save) {
    stripes::Workspace ws{};
    const int64_t S = geo.stripes, W = geo.width;
    // Per item: the general sweep's tables (items of m = 0 or n = 0: 3 (N + 1) or M + 3 per
    // state), or the ring: two slots with several stripes, else the one the adjoint's row 0
    // sweep reads back. Its entries are 64-bit (an even count of floats per item keeps them
    // aligned, a multiple of four the pairs that RingStream loads) and, with several stripes,
    // zeroed (no stale tag may match).
    const int64_t ring = (S > 1 ? 2 : 1) * stripes::kRingFloats * W;
    ws.scratch_per_item = 4 * ceil_div(int64_t(kStates) * std::max({3 * W, M + 3, ring}), 4);
    ws.scratch = floats(B * ws.scratch_per_item + 2 * stripes::kRingReadPast, /*zeroed=*/S > 1);
    if (S > 1) ws.stripe_ends = floats(B * S * 4);
    if (save) {
      ws.values = floats(B * S * geo.steps * Sh::kSlab);
      ws.above = floats(B * S * kStates * W);
      ws.ends = floats(B * 4);
      ws.partials = floats(B * S * 2);
      partials = keep.back();
    }
    std::vector<stripes::Workspace> out(save ? 2 : 1, ws);
    if (S > 1) {  // zeroed: a ticket per launch; the forward's progress counters (stripe ends)
      keep.push_back(at::zeros({int64_t(out.size()) + B * S}, p.scores.options().dtype(at::kInt)));
      int* ints = keep.back().data_ptr<int>();
      for (size_t k = 0; k < out.size(); ++k) out[k].ticket = ints + k;
      out[0].progress = ints + out.size();
    }
    return out;
  }

  int64_t blocks() const { return ceil_div(geo.units, stripes::kWarpsPerBlock); }

  // Blocks of `kKernel` that the device holds at once (every SM full), worked out once.
  template <auto kKernel>
  static int64_t resident_blocks() {
    static const int per_sm = [] {
      int blocks = 0;
      C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kKernel, kThreads, 0));
      return std::max(blocks, 1);
    }();
    return int64_t(per_sm) * multiprocessors();
  }

  static int64_t multiprocessors() {
    return at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  }

  // The forward without grad that dispatch.cu chose (its table says why).
  void forward(dispatch::ForwardKernel kernel, at::Tensor& score) {
    using dispatch::ForwardKernel;
    const stripes::Workspace ws = workspaces(false)[0];
    switch (kernel) {
      case ForwardKernel::kProbOneStripe:
      case ForwardKernel::kProbOneStripeLong:
        // The items it refuses go to log space by the same warps.
        if constexpr (!kAffine && (G < 32 || R == 1)) {
          const bool long_steps = kernel == ForwardKernel::kProbOneStripeLong;
          with_ends(view.config, [&](auto ends) {
            constexpr stripes::Ends kEnds = decltype(ends)::value;
            using stripes::scaled::forward_kernel, stripes::scaled::kLongSteps;
            constexpr auto one_stripe = forward_kernel<G, R, kEnds, false, stripes::scaled::kSteps>;
            constexpr auto one_stripe_long =
                forward_kernel<G, R, kEnds, false, G == 32 ? kLongSteps : stripes::scaled::kSteps>;
            (long_steps ? one_stripe_long : one_stripe)<<<blocks(), kThreads, 0,
                                                          at::cuda::getCurrentCUDAStream()>>>(
                view, B, geo, ws, score.data_ptr<float>(), nullptr);
            C10_CUDA_KERNEL_LAUNCH_CHECK();
          });
          return;
        }
        break;
      case ForwardKernel::kProbStacked:
        // The items it refuses flagged in `redo` for a second, log-space launch, with a
        // workspace of its own (a fresh ring, progress counters and ticket).
        if constexpr (!kAffine && Sh::kStacked && R == 1) {
          at::Tensor redo = at::zeros({geo.units}, p.scores.options().dtype(at::kInt));
          stacked_scaled_forward<false>(ws, score.data_ptr<float>(), redo.data_ptr<int>());
          log_space_forward<false>(workspaces(false)[0], redo.data_ptr<int>(),
                                   score.data_ptr<float>());
          return;
        }
        break;
      case ForwardKernel::kProbAffineOneStripe:
        // The items it refuses swept again in log space by the same warps.
        if constexpr (kAffine && ((G == 16 && R == 2) || (G == 32 && R == 1))) {
          with_ends(view.config, [&](auto ends) {
            stripes::scaled::affine_forward_kernel<G, R, decltype(ends)::value>
                <<<blocks(), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
                    view, B, geo, ws, score.data_ptr<float>(), nullptr);
            C10_CUDA_KERNEL_LAUNCH_CHECK();
          });
          return;
        }
        break;
      case ForwardKernel::kProbAffineStacked:
        // The items it refuses flagged for a second, log-space launch.
        if constexpr (kAffine && Sh::kStacked && R == 1) {
          at::Tensor redo = at::zeros({geo.units}, p.scores.options().dtype(at::kInt));
          with_ends(view.config, [&](auto ends) {
            stripes::scaled::affine_forward_kernel<G, R, decltype(ends)::value, true>
                <<<blocks(), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
                    view, B, geo, ws, score.data_ptr<float>(), redo.data_ptr<int>());
            C10_CUDA_KERNEL_LAUNCH_CHECK();
          });
          log_space_forward<false>(workspaces(false)[0], redo.data_ptr<int>(),
                                   score.data_ptr<float>());
          return;
        }
        break;
      case ForwardKernel::kStreamed:
        // As many groups as the device holds at once, each taking B / groups items or one more.
        if constexpr (kAffine && G < 32) {
          with_ends(view.config, [&](auto ends) {
            constexpr auto kernel = stripes::stream_kernel<kAffine, G, R, decltype(ends)::value>;
            const int64_t blocks = resident_blocks<kernel>();
            const int64_t groups = blocks * stripes::kWarpsPerBlock * Sh::kGroups;
            const stripes::Deal deal{groups, B / groups, B % groups};
            TORCH_INTERNAL_ASSERT(stripes::streams(deal.per_group, M, N, G));
            kernel<<<blocks, kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
                view, deal, ws, score.data_ptr<float>());
            C10_CUDA_KERNEL_LAUNCH_CHECK();
          });
          return;
        }
        break;
      case ForwardKernel::kLogSpace:
        log_space_forward<false>(ws, nullptr, score.data_ptr<float>());
        return;
      case ForwardKernel::kGeneral:
        break;
    }
    TORCH_INTERNAL_ASSERT(false, "forward kernel ", int(kernel), " chosen for the shape ", G,
                          " x ", R);
  }

  // Groups of the streamed forward that the device holds at once (dispatch.cu's rule).
  static int64_t streamed_groups(const dp::Config<float>& config) {
    int64_t groups = 0;
    if constexpr (kAffine && G < 32) {
      with_ends(config, [&](auto ends) {
        constexpr auto kernel = stripes::stream_kernel<kAffine, G, R, decltype(ends)::value>;
        groups = resident_blocks<kernel>() * stripes::kWarpsPerBlock * Sh::kGroups;
      });
    }
    return groups;
  }

  // The stacked forward in probability space (items of several stripes, a warp a stripe:
  // prob_space/linear_forward.cuh), which flags the items it refuses in `redo`; kSave: it leaves
  // what the log-space adjoint reads.
  template <bool kSave>
  void stacked_scaled_forward(const stripes::Workspace& ws, float* score, int* redo) {
    with_ends(view.config, [&](auto ends) {
      constexpr stripes::Ends kEnds = decltype(ends)::value;
      using stripes::scaled::kLongSteps;
      // Local items may take chunks of kLongestSteps (the kernel's choice, per warp): global rows
      // rise too fast for them (prob_space/linear_forward.cuh).
      constexpr int kLongest =
          stripes::is_local(kEnds) ? stripes::scaled::kLongestSteps : kLongSteps;
      stripes::scaled::forward_kernel<G, R, kEnds, true, kLongSteps, kLongest, kSave>
          <<<blocks(), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(view, B, geo, ws, score,
                                                                        redo);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  }

  // The forward in log space (kSave: the one that saves for the adjoint), of every item or of
  // those flagged in `only_units`.
  template <bool kSave>
  void log_space_forward(stripes::Workspace ws, const int* only_units, float* score) {
    ws.only_units = only_units;
    with_ends(view.config, [&](auto ends) {
      stripes::forward_kernel<kAffine, G, R, kSave, decltype(ends)::value>
          <<<blocks(), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(view, B, geo, ws, score);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  }

  // The forward and backward that dispatch.cu chose (its table says why).
  void forward_backward(dispatch::BackwardKernel kernel, const at::Tensor& grad,
                        ProblemGrads& out) {
    using dispatch::BackwardKernel;
    switch (kernel) {
      case BackwardKernel::kProbFused:
        // Forward and adjoint in probability space, one kernel (linear_adjoint.cuh,
        // affine_adjoint.cuh); the items it refuses go to log space (a bit each in `refused`,
        // per unit).
        if constexpr (G * R == 32 && (G < 32 || kAffine)) {
          at::Tensor refused = at::zeros({geo.units}, p.scores.options().dtype(at::kInt));
          with_ends(view.config, [&](auto ends) {
            constexpr stripes::Ends kEnds = decltype(ends)::value;
            const auto stream = at::cuda::getCurrentCUDAStream();
            if constexpr (!kAffine) {
              stripes::scaled::forward_backward_kernel<G, R, kEnds><<<geo.units, 32, 0, stream>>>(
                  view, view_of<float>(out), B, grad.data_ptr<float>(),
                  out.score.data_ptr<float>(), refused.data_ptr<int>());
            } else {
              stripes::scaled::affine_forward_backward_kernel<G, R, kEnds>
                  <<<geo.units, 32, 0, stream>>>(view, view_of<float>(out), B,
                                                 grad.data_ptr<float>(),
                                                 out.score.data_ptr<float>(),
                                                 refused.data_ptr<int>());
            }
            C10_CUDA_KERNEL_LAUNCH_CHECK();
          });
          log_space_forward_backward(grad, out, refused.data_ptr<int>());
          return;
        }
        break;
      case BackwardKernel::kProbStacked:
        // The saving forward in probability space (linear_forward.cuh, SaveLog), leaving what
        // the log-space one leaves; the items it refuses are swept again by the log-space saving
        // forward; then the log-space adjoint takes every item, its weights divided by their sum
        // (log_space/adjoint.cuh, divide_by_sum).
        if constexpr (!kAffine && G == 32 && R == 1) {
          std::vector<stripes::Workspace> ws = workspaces(true);
          // A ring, progress counters and ticket of its own; the saved values are the adjoint's.
          stripes::Workspace scaled_ws = workspaces(false)[0];
          scaled_ws.values = ws[0].values;
          scaled_ws.above = ws[0].above;
          scaled_ws.ends = ws[0].ends;
          at::Tensor redo = at::zeros({geo.units}, p.scores.options().dtype(at::kInt));
          stacked_scaled_forward<true>(scaled_ws, out.score.data_ptr<float>(),
                                       redo.data_ptr<int>());
          log_space_forward<true>(ws[0], redo.data_ptr<int>(), out.score.data_ptr<float>());
          log_space_adjoint<true>(ws[1], nullptr, grad, out);
          return;
        }
        break;
      case BackwardKernel::kLogSpace:
        log_space_forward_backward(grad, out, nullptr);
        return;
      case BackwardKernel::kGeneral:
        break;
    }
    TORCH_INTERNAL_ASSERT(false, "backward kernel ", int(kernel), " chosen for the shape ", G,
                          " x ", R);
  }

  // The saving forward and the adjoint in log space, of every item or of those flagged in
  // `only_units` (a bit per group of each unit's warp).
  void log_space_forward_backward(const at::Tensor& grad, ProblemGrads& out,
                                  const int* only_units) {
    std::vector<stripes::Workspace> ws = workspaces(true);
    log_space_forward<true>(ws[0], only_units, out.score.data_ptr<float>());
    // Linear divides too (H100: the long linear adjoint 656 -> 660 us, 2340 -> 2344 us
    // at (32, 1024^2), (1, 4096^2)); affine does not: it cost the long affine adjoint 17-20%.
    log_space_adjoint<!kAffine>(ws[1], only_units, grad, out);
  }

  // The adjoint (of the items flagged in `only_units`, or every item), then the penalties'
  // gradients of items of several stripes. kDivide: its weights divided by their sum, for saved
  // values of the probability-space forward (log_space/adjoint.cuh, divide_by_sum).
  template <bool kDivide>
  void log_space_adjoint(stripes::Workspace ws, const int* only_units, const at::Tensor& grad,
                         ProblemGrads& out) {
    ws.only_units = only_units;
    const auto stream = at::cuda::getCurrentCUDAStream();
    const bool hard = view.config.temperature == 0.f;
    with_ends(view.config, [&](auto ends) {
      constexpr stripes::Ends kEnds = decltype(ends)::value;
      const auto adjoint = [&](auto hard_constant) {
        stripes::backward_kernel<kAffine, G, R, kEnds, decltype(hard_constant)::value, kDivide>
            <<<blocks(), kThreads, 0, stream>>>(view, view_of<float>(out), B, geo, ws,
                                                 grad.data_ptr<float>());
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      };
      if constexpr (kEnds == stripes::Ends::kSoft) {  // t > 0 by definition
        adjoint(std::false_type{});
      } else if (hard) {
        adjoint(std::true_type{});
      } else {
        adjoint(std::false_type{});
      }
    });
    // The penalties' gradients of items of several stripes: the stripes' partial sums, added in
    // stripe order (with one stripe the adjoint wrote them).
    if (geo.stripes > 1) {
      constexpr int kSumThreads = 128;
      sum_stripe_partials<kAffine><<<ceil_div(B, kSumThreads), kSumThreads, 0, stream>>>(
          partials.data_ptr<float>(), B, geo.stripes, out.gap_open.data_ptr<float>(),
          kAffine ? out.gap_extend.data_ptr<float>() : nullptr);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
  }
};

// Calls body with the Launch of the shape dispatch.cu chose (dispatch.h: lanes per item, rows
// per lane).
template <bool kAffine, class Body>
void with_shape(const Problem& p, dispatch::LaneShape shape, Body&& body) {
  constexpr int kRowsPerLane = kAffine ? 2 : 4;
  if (shape.lanes == 32 && shape.rows == 1) {
    Launch<kAffine, 32, 1> launch(p);
    body(launch);
  } else if (shape.lanes == 32 / kRowsPerLane && shape.rows == kRowsPerLane) {
    Launch<kAffine, 32 / kRowsPerLane, kRowsPerLane> launch(p);
    body(launch);
  } else if (shape.lanes == 32 && shape.rows == kRowsPerLane) {
    Launch<kAffine, 32, kRowsPerLane> launch(p);
    body(launch);
  } else {
    TORCH_INTERNAL_ASSERT(false, "no striped kernels of ", shape.lanes, " x ", shape.rows);
  }
}

template <bool kAffine>
void forward(const Problem& p, const dispatch::ForwardChoice& choice, at::Tensor& score) {
  with_shape<kAffine>(p, choice.shape, [&](auto& launch) { launch.forward(choice.kernel, score); });
}

template <bool kAffine>
void forward_backward(const Problem& p, const dispatch::BackwardChoice& choice,
                      const at::Tensor& grad, ProblemGrads& out) {
  with_shape<kAffine>(p, choice.shape,
                      [&](auto& launch) { launch.forward_backward(choice.kernel, grad, out); });
}

}  // namespace striped
}  // namespace softalign
