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
#include <type_traits>

#include "../kernels.h"

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
  const T s = Model::forward(it, v.config, V, end);
  score[b] = s;
  Model::backward(it, v.config, V, end, s, grad[b], E, gv.item(b));  // this thread owns item b
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

// ------------------------------------------------------------ fast forward: lanes own rows

namespace fast {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarpsPerBlock = 4;

// G lanes per item, R rows per lane; kW steps share one staging of the scores.
template <bool kAffine, int G, int R>
struct Shape {
  static constexpr int kStates = kAffine ? 3 : 1;
  static constexpr int kGroups = 32 / G;  // items per warp
  static constexpr int kRows = G * R;     // rows of a stripe
  static constexpr int kW = 16;
  // One group's scores for one chunk: lane l's row r at step w sits at (r * kW + w) * (G + 1) + l
  // (adjacent lanes, adjacent banks; the + 1 spreads the coalesced writes over the banks);
  // + G puts the groups of a warp on different banks.
  static constexpr int kTile = R * kW * (G + 1) + G;
  static constexpr int kAbove = kStates * kW;  // the row above the stripe, for lane 0
  static constexpr int kWarpFloats = kGroups * (kTile + kAbove);
};

struct Group {
  const float* scores;  // S[b]
  float* above;         // the item's boundary row: state st, column j at st * (N + 1) + j
  int m, n;             // 0 for an item the fast sweep skips
};

// The local end (SPEC "Score") of the cells a group's lanes saw, merged over the group.
template <int G>
__device__ dp::LocalEnd<float> merge_ends(dp::LocalEnd<float> e, const dp::Config<float>& c) {
#pragma unroll
  for (int delta = G / 2; delta >= 1; delta /= 2) {
    const float best = __shfl_xor_sync(kFullMask, e.best, delta, G);
    const float sum = __shfl_xor_sync(kFullMask, e.soft_sum, delta, G);
    if (e.soft(c)) {  // two online logsumexps: rescale both to the larger maximum
      const float top = dp::nan_max(e.best, best);
      // A lone +inf maximum keeps its sum (inf - inf would be NaN); two +inf give NaN, as
      // LocalEnd::add gives for a second +inf cell.
      const auto scale = [&](float x, float other) {
        return x == top && other != top ? 1.f : dp::exp_((x - top) / c.temperature);
      };
      e.soft_sum = e.soft_sum * scale(e.best, best) + sum * scale(best, e.best);
      e.best = top;
    } else {
      e.best = dp::nan_max(e.best, best);  // NaN sticks, as in LocalEnd::add
    }
  }
  return e;
}

// The values of DP row 0 (SPEC boundaries), swept along the columns by lane 0 of stripe 0.
template <bool kAffine>
struct RowZero {
  static constexpr int kStates = kAffine ? 3 : 1;
  float v[kStates];

  __device__ void at_column(int j, float o, float e, const dp::Config<float>& c) {
    const float ninf = dp::neg_inf<float>();
    if constexpr (kAffine) {
      // local: all -inf; global: A[0][0] = 0, then only Y, Y[0][j] from Y/A/X[0][j-1]
      if (c.local || j == 0) {
        v[dp::kA] = (!c.local && j == 0) ? 0.f : ninf;
        v[dp::kX] = v[dp::kY] = ninf;
      } else {
        float x[3];
        dp::AffineHorizontalTerms::of(v[dp::kA], v[dp::kX], v[dp::kY], o, e, x);
        v[dp::kY] = dp::smax(x, c.temperature);
        v[dp::kA] = v[dp::kX] = ninf;
      }
    } else {
      // local: H[0][j] = 0; global: H[0][0] = 0, H[0][j] = H[0][j-1] + g
      v[0] = (c.local || j == 0) ? 0.f : v[0] + o;
    }
  }
};

// Lane l, row r of a stripe: the cell (i, j) from the row above (`up`, `diag`, per state) and
// the lane's value at column j - 1 (`left`, per state), written back into `left`.
template <bool kAffine>
__device__ __forceinline__ void cell(int j, float s, float o, float e,
                                     const dp::Config<float>& c, const float* diag,
                                     const float* up, float* left) {
  const float ninf = dp::neg_inf<float>();
  if constexpr (kAffine) {
    if (j == 0) {  // SPEC column 0: A = Y = -inf; X = -inf (local) or X/A[i-1][0] (global)
      float xv[2];
      dp::AffineVerticalTerms::of(up[dp::kA], up[dp::kX], o, e, xv);
      left[dp::kX] = c.local ? ninf : dp::smax(xv, c.temperature);
      left[dp::kA] = left[dp::kY] = ninf;
      return;
    }
    float xa[4], xv[2], xh[3];
    dp::AffineMatchTerms::of(diag[dp::kA], diag[dp::kX], diag[dp::kY], c.local, xa);
    dp::AffineVerticalTerms::of(up[dp::kA], up[dp::kX], o, e, xv);
    dp::AffineHorizontalTerms::of(left[dp::kA], left[dp::kX], left[dp::kY], o, e, xh);
    left[dp::kA] = s + dp::smax(xa, c.temperature);
    left[dp::kX] = dp::smax(xv, c.temperature);
    left[dp::kY] = dp::smax(xh, c.temperature);
  } else {
    if (j == 0) {  // SPEC column 0: H[i][0] = 0 (local) or H[i-1][0] + g (global)
      left[0] = c.local ? 0.f : up[0] + o;
      return;
    }
    float x[4];
    dp::LinearTerms::of(diag[0], up[0], left[0], s, o, c.local, x);
    left[0] = dp::smax(x, c.temperature);
  }
}

template <bool kAffine, int G, int R>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    forward_fast_kernel(ProblemView<float> v, int64_t B, float* rows, int64_t rows_per_item,
                        float* score) {
  using Sh = Shape<kAffine, G, R>;
  constexpr int kStates = Sh::kStates, kW = Sh::kW, kRows = Sh::kRows;
  __shared__ float smem[kWarpsPerBlock][Sh::kWarpFloats];
  __shared__ Group groups[kWarpsPerBlock][Sh::kGroups];

  const int warp = threadIdx.x / 32, lane_id = threadIdx.x % 32;
  const int grp = lane_id / G, l = lane_id % G;
  const int64_t b = (int64_t(blockIdx.x) * kWarpsPerBlock + warp) * Sh::kGroups + grp;
  const dp::Config<float> c = v.config;
  const int64_t N = v.N;

  dp::Item<float> it;
  float o = 0.f, e = 0.f;  // penalties, constant per item on this path
  bool swept = false;
  if (b < B) {
    it = v.item(b);
    o = it.open.at(1, 1);
    if constexpr (kAffine) e = it.extend.at(1, 1);
    swept = it.m > 0 && it.n > 0;
    if (!swept && l == 0) {  // an empty side: only boundaries, which the general sweep has
      using Model = dp::Model<float, kAffine>;
      const typename Model::Tab table{rows + b * rows_per_item, 2, it.n + 1};
      dp::LocalEnd<float> end;
      score[b] = Model::forward(it, c, table, end);
    }
  }
  const int m = swept ? it.m : 0, n = swept ? it.n : 0;
  if (l == 0) groups[warp][grp] = {it.scores, b < B ? rows + b * rows_per_item : nullptr, m, n};
  // The whole warp runs the same steps (shuffles and staging are warp-wide).
  const int stripes = __reduce_max_sync(kFullMask, unsigned((m + kRows - 1) / kRows));
  const int steps = __reduce_max_sync(kFullMask, unsigned(n + G));
  __syncwarp();

  float* tile = &smem[warp][0];
  float* above_tile = tile + Sh::kGroups * Sh::kTile;
  const float* my_tile = tile + grp * Sh::kTile;
  const float* my_above = above_tile + grp * Sh::kAbove;

  dp::LocalEnd<float> end;
  end.soft_sum = l == 0 ? 1.f : 0.f;  // the empty alignment, counted once per group
  float final_value = 0.f;
  bool has_final = false;

  for (int stripe = 0; stripe < stripes; ++stripe) {
    const int i0 = stripe * kRows;  // the stripe's rows are i0 + 1 .. i0 + kRows
    const int first_row = i0 + l * R + 1;
    const bool leaves_row = i0 + kRows < m;  // a next stripe reads this one's last row
    float h[kStates][R];  // the lane's rows at the column just done (the next cell's left)
    float up[kStates], diag[kStates];  // the row above the lane's first row, columns j, j - 1
#pragma unroll
    for (int st = 0; st < kStates; ++st) {
      up[st] = diag[st] = 0.f;
#pragma unroll
      for (int r = 0; r < R; ++r) h[st][r] = 0.f;
    }
    RowZero<kAffine> row0;
    for (int k = 0; k * kW < steps; ++k) {
      // Stage the chunk's scores (coalesced along columns) and, past stripe 0, the row above.
      __syncwarp();
#pragma unroll
      for (int q = 0; q < R * kW; ++q) {
        const int idx = lane_id + 32 * q;
        const int row = idx / kW, w = idx % kW;  // a row of the warp's stripes; a step
        const int g = row / kRows, rr = row % kRows;
        const int reader = rr / R, r = rr % R;  // the lane that reads it, and its row
        const Group info = groups[warp][g];
        const int i = i0 + rr + 1, j = k * kW + w - reader;
        float s = 0.f;
        if (i <= info.m && j >= 1 && j <= info.n) s = info.scores[int64_t(i - 1) * N + (j - 1)];
        tile[g * Sh::kTile + (r * kW + w) * (G + 1) + reader] = s;
      }
      if (stripe > 0) {
        for (int idx = lane_id; idx < Sh::kGroups * Sh::kAbove; idx += 32) {
          const int g = idx / Sh::kAbove, st = (idx % Sh::kAbove) / kW, w = idx % kW;
          const Group info = groups[warp][g];
          const int j = k * kW + w;
          above_tile[idx] = info.m > 0 && j <= info.n ? info.above[st * (N + 1) + j] : 0.f;
        }
      }
      __syncwarp();

#pragma unroll
      for (int w = 0; w < kW; ++w) {
        const int j = k * kW + w - l;  // this lane's column at this step
        if (l == 0) {
          if (stripe == 0) {
            row0.at_column(j, o, e, c);
#pragma unroll
            for (int st = 0; st < kStates; ++st) up[st] = row0.v[st];
          } else {
#pragma unroll
            for (int st = 0; st < kStates; ++st) up[st] = my_above[st * kW + w];
          }
        }
        float u[kStates], d[kStates];  // above and above-left of the current row
#pragma unroll
        for (int st = 0; st < kStates; ++st) {
          u[st] = up[st];
          d[st] = diag[st];
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const int i = first_row + r;
          const float s = my_tile[(r * kW + w) * (G + 1) + l];
          float cur[kStates];
#pragma unroll
          for (int st = 0; st < kStates; ++st) cur[st] = h[st][r];
          cell<kAffine>(j, s, o, e, c, d, u, cur);
#pragma unroll
          for (int st = 0; st < kStates; ++st) {
            d[st] = h[st][r];
            h[st][r] = u[st] = cur[st];
          }
          if (j >= 1 && j <= n && i <= m) {
            if (c.local) end.add(cur[0], i, j, c);  // A (affine) or H (linear)
            if (!c.local && i == m && j == n) {
              if constexpr (kAffine) {  // SPEC: global score = smax_t(A[m][n], X[m][n], Y[m][n])
                final_value = dp::smax(cur, c.temperature);
              } else {
                final_value = cur[0];
              }
              has_final = true;
            }
          }
        }
        if (l == G - 1 && leaves_row && j >= 0 && j <= n) {
#pragma unroll
          for (int st = 0; st < kStates; ++st) groups[warp][grp].above[st * (N + 1) + j] = u[st];
        }
#pragma unroll
        for (int st = 0; st < kStates; ++st) {
          diag[st] = up[st];  // column j of the row above is column j + 1's diagonal
          up[st] = __shfl_up_sync(kFullMask, u[st], 1, G);
        }
      }
    }
  }

  if (c.local) {
    const dp::LocalEnd<float> total = merge_ends<G>(end, c);
    if (swept && l == 0) score[b] = total.score(c);
  } else if (has_final) {
    score[b] = final_value;
  }
}

// The fast path takes float32 with penalties constant per item: shape (1|B, 1, 1).
bool eligible(const Problem& p) {
  static const bool force_general = std::getenv("SOFTALIGN_CUDA_GENERAL") != nullptr;
  const auto per_item = [](const at::Tensor& t) { return t.size(1) == 1 && t.size(2) == 1; };
  return !force_general && p.scores.scalar_type() == at::kFloat && per_item(p.gap_open) &&
         (!p.affine() || per_item(p.gap_extend));
}

template <bool kAffine, int G, int R>
void launch(const Problem& p, at::Tensor& score) {
  constexpr int kStates = Shape<kAffine, G, R>::kStates;
  constexpr int kItemsPerBlock = kWarpsPerBlock * Shape<kAffine, G, R>::kGroups;
  const int64_t B = p.batch(), N = p.scores.size(2);
  const int64_t rows_per_item = int64_t(kStates) * 2 * (N + 1);
  at::Tensor rows = at::empty({B * rows_per_item}, p.scores.options());
  forward_fast_kernel<kAffine, G, R><<<ceil_div(B, kItemsPerBlock), 32 * kWarpsPerBlock, 0,
                                       at::cuda::getCurrentCUDAStream()>>>(
      view_of<float>(p), B, rows.data_ptr<float>(), rows_per_item, score.data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <bool kAffine>
void forward(const Problem& p, at::Tensor& score) {
  if (p.scores.size(1) <= 32) {
    launch<kAffine, 8, 4>(p, score);  // short pairs: 4 items per warp, one stripe each
  } else {
    launch<kAffine, 32, 4>(p, score);
  }
}

}  // namespace fast

// ------------------------------------------------------------ the backend

template <typename T, bool kAffine>
void forward_items(const Problem& p, at::Tensor& score) {
  if constexpr (std::is_same_v<T, float>) {
    if (fast::eligible(p)) {
      fast::forward<kAffine>(p, score);
      return;
    }
  }
  forward_general<T, kAffine>(p, score);
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
        forward_backward_general<scalar_t, true>(p, grad, out);
      } else {
        forward_backward_general<scalar_t, false>(p, grad, out);
      }
    });
  }
};

}  // namespace

TORCH_LIBRARY_IMPL(softalign, CUDA, m) {
  SOFTALIGN_REGISTER_BACKEND(m, CudaBackend);
}

}  // namespace softalign
