// The striped adjoint in log space (docs/design.md, "Log space: the adjoint"): the forward's
// steps backwards over the values the saving forward left, each cell's weights recomputed from
// them (Weights), its pushes to the cells it was built from (CellAdjoint).
#pragma once

#include "../kernel_traits.cuh"

namespace softalign {
namespace stripes {


// Divides a cell's weights by their sum (Weights and PlainWeights with kDivide). They sum to 1 in
// exact arithmetic, but in float32 only for a v rounded by the log-space forward from these same
// terms, whose errors then cancel: any other v (the probability-space forward's, or even the exact
// one rounded once) leaves each cell's weights off by about ulp(v) / t, which the adjoint compounds
// along the paths (d g 3e-3 off on one item of a long linear pair, 1e-5 with the division, from any
// of those v; the log-space pair's own, 1.3e-4, but growing as t falls: d g 0.1-4% off at t =
// 0.1-0.01). So the linear adjoints divide (H100: the long linear adjoint 656 -> 660 us at (32,
// 1024^2)); the affine ones after a log-space forward do not: it cost the long affine adjoint
// 17-20% (1049 -> 1225 us), and it made the short affine adjoint's step loop 15% longer (SASS: 1370
// -> 1570 instructions), where many warps share an SM and instructions count. A sum of zero (a cell
// outside the item) keeps its zeros.
template <int K>
__device__ __forceinline__ void divide_by_sum(float (&w)[K]) {
  float sum = w[0];
#pragma unroll
  for (int k = 1; k < K; ++k) sum += w[k];
  const float inv_sum = dp::device::rcp(fmaxf(sum, FLT_MIN));
#pragma unroll
  for (int k = 0; k < K; ++k) w[k] *= inv_sum;
}

// The weights of one smax (docs/design.md, "Log space: the adjoint") from the value v it produced:
// w_k = exp((x_k - v) / t), one exp2 each, without the smax's max (and its sum: kDivide divides by
// it, divide_by_sum says where). x_k <= v up to rounding; the clamp at exp2(0) = 1 keeps the
// weights finite also in the cells of the skew outside the item (whose saved value and neighbours
// do not belong together), so that a zero adjoint e pushes zeros there. t = 0 (one-hot) and
// non-finite values take smax_weights, and only where e is not zero: a NaN or inf the sweep never
// reaches then stays where it is, as on the CPU.
template <bool kHard, bool kDivide>
struct Weights {
  float t;
  float scale;  // log2(e) / t

  template <int K>
  __device__ __forceinline__ void of(const float (&x)[K], float v, float e, float (&w)[K]) const {
    if (!kHard && fabsf(v) < INFINITY) {
#pragma unroll
      for (int k = 0; k < K; ++k) w[k] = dp::device::ex2(fminf((x[k] - v) * scale, 0.f));
      if constexpr (kDivide) divide_by_sum(w);
    } else if (e != 0.f) {
      dp::smax_weights(x, t, w);
    } else {
#pragma unroll
      for (int k = 0; k < K; ++k) w[k] = 0.f;
    }
  }
};

// Weights' exp2s without its branches, for the steps whose every cell has a finite or -inf value
// (t > 0; see the adjoint's step loop): -inf only comes out of terms that are all -inf, whose
// weights smax_weights makes zero, as here.
template <bool kDivide>
struct PlainWeights {
  float scale;  // log2(e) / t

  template <int K>
  __device__ __forceinline__ void of(const float (&x)[K], float v, float /*e*/,
                                    float (&w)[K]) const {
#pragma unroll
    for (int k = 0; k < K; ++k) {
      w[k] = v == -INFINITY ? 0.f : dp::device::ex2(fminf((x[k] - v) * scale, 0.f));
    }
    if constexpr (kDivide) divide_by_sum(w);
  }
  // Whether a value (as `of` gets it) takes these weights: not NaN, not +inf.
  __device__ static bool takes(float v) { return v == v && v != INFINITY; }
};

// The adjoint of one cell (docs/design.md, "Log space: the adjoint"): given its adjoint `e` and
// saved values `self` (per state) and the saved values of its predecessors, the pushes to the
// cells it was built from (diagonal, up, left; per state), the gradient of its score and of the
// penalties.
template <bool kAffine>
struct CellAdjoint {
  static constexpr int kStates = kAffine ? 3 : 1;
  float to_diag[kStates], to_up[kStates], to_left[kStates];
  float ds = 0.f;

  // Interior cell (j >= 1); `diag`, `up`, `left` are the saved values, per state. Wts: Weights or
  // PlainWeights.
  template <class Wts>
  __device__ __forceinline__ void interior(const float* e, const float* self, const float* diag,
                                           const float* up, const float* left, float s, float o,
                                           float ext, bool local, const Wts& weights,
                                           float& d_open, float& d_extend) {
    if constexpr (kAffine) {
      {  // Y = smax_t(A + o, X + o, Y + e) at (i, j - 1)
        using Terms = dp::AffineHorizontalTerms;
        float x[3], w[3];
        Terms::of(left[dp::kA], left[dp::kX], left[dp::kY], o, ext, x);
        weights.of(x, self[dp::kY], e[dp::kY], w);
        to_left[dp::kA] = e[dp::kY] * w[Terms::kOpenFromA];
        to_left[dp::kX] = e[dp::kY] * w[Terms::kOpenFromX];
        to_left[dp::kY] = e[dp::kY] * w[Terms::kExtend];
        d_open += to_left[dp::kA] + to_left[dp::kX];
        d_extend += to_left[dp::kY];
      }
      vertical(e[dp::kX], self[dp::kX], up, o, ext, weights, d_open, d_extend);
      {  // A = S + smax_t(0, A, X, Y at (i - 1, j - 1)): d A / d S = 1
        float x[4], w[4];
        dp::AffineMatchTerms::of(diag[dp::kA], diag[dp::kX], diag[dp::kY], local, x);
        weights.of(x, self[dp::kA] - s, e[dp::kA], w);
        to_diag[dp::kA] = e[dp::kA] * w[1];
        to_diag[dp::kX] = e[dp::kA] * w[2];
        to_diag[dp::kY] = e[dp::kA] * w[3];
        ds = e[dp::kA];
      }
    } else {
      using Terms = dp::LinearTerms;
      float x[4], w[4];
      Terms::of(diag[0], up[0], left[0], s, o, local, x);
      weights.of(x, self[0], e[0], w);
      to_diag[0] = ds = e[0] * w[Terms::kMatch];
      to_up[0] = e[0] * w[Terms::kUp];
      to_left[0] = e[0] * w[Terms::kLeft];
      d_open += to_up[0] + to_left[0];
    }
  }

  // Column 0 (docs/spec.md, "Linear gap" and "Affine gap"): global only, X[i][0] (affine) or
  // H[i][0] = H[i-1][0] + g.
  template <class Wts>
  __device__ __forceinline__ void column_zero(const float* e, const float* self, const float* up,
                                              float o, float ext, bool local, const Wts& weights,
                                              float& d_open, float& d_extend) {
#pragma unroll
    for (int st = 0; st < kStates; ++st) to_diag[st] = to_up[st] = to_left[st] = 0.f;
    if (local) return;
    if constexpr (kAffine) {
      vertical(e[dp::kX], self[dp::kX], up, o, ext, weights, d_open, d_extend);
    } else {
      to_up[0] = e[0];
      d_open += e[0];
    }
  }

 private:
  // X = smax_t(A + o, X + e) at (i - 1, j)
  template <class Wts>
  __device__ __forceinline__ void vertical(float ex, float value, const float* up, float o,
                                           float ext, const Wts& weights, float& d_open,
                                           float& d_extend) {
    if constexpr (kAffine) {
      using Terms = dp::AffineVerticalTerms;
      float x[2], w[2];
      Terms::of(up[dp::kA], up[dp::kX], o, ext, x);
      weights.of(x, value, ex, w);
      to_up[dp::kA] = ex * w[Terms::kOpen];
      to_up[dp::kX] = ex * w[Terms::kExtend];
      to_up[dp::kY] = 0.f;
      d_open += to_up[dp::kA];
      d_extend += to_up[dp::kX];
    }
  }
};

// ------------------------------------------------------------------------------ adjoint

template <bool kAffine, int G, int R, Ends kEnds, bool kHard, bool kDivide>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    backward_kernel(ProblemView<float> v, GradsView<float> gv, int64_t B, Geometry geo,
                    Workspace ws, const float* grad) {
  using Sw = Sweep<kAffine, G, R>;
  using Sh = typename Sw::Sh;
  constexpr int kW = Sw::kW;
  using Adj = CellAdjoint<kAffine>;
  constexpr int kStates = Sh::kStates, kRows = Sh::kRows, kGroups = Sh::kGroups;
  __shared__ float smem[kWarpsPerBlock][Sh::kWarpFloats];

  const int warp = threadIdx.x / 32, lane_id = threadIdx.x % 32;
  if (int64_t(blockIdx.x) * kWarpsPerBlock + warp >= geo.units) return;  // the whole warp
  const int grp = lane_id / G, l = lane_id % G;
  const int64_t unit = unit_of_warp(warp, ws);
  const unsigned taken = taken_groups(ws, unit);
  if (taken == 0) return;  // the whole warp
  const int stripe = geo.stripes - 1 - int(unit % geo.stripes);  // bottom-up
  const int64_t b = (unit / geo.stripes) * kGroups + grp;
  dp::Config<float> c = v.config;
  c.local = is_local(kEnds);  // a constant from here on
  constexpr bool soft = kEnds == Ends::kSoft;
  const int64_t N = v.N, W = geo.width;
  const int i0 = stripe * kRows;

  dp::Item<float> it;
  float o = 0.f, ext = 0.f, g = 0.f;
  int m = 0, n = 0, item_stripes = 0;
  End end;
  // The penalties' gradients of the stripe's cells: straight into the item's gradient when the
  // item has one stripe, else into ws.partials, which the host sums over the stripes in order.
  float* partial = b < B ? ws.partials + (b * geo.stripes + stripe) * 2 : nullptr;
  const bool whole_item = geo.stripes == 1;
  float* open_out = whole_item && b < B ? gv.open + b * gv.open_sb : partial;
  float* extend_out = kAffine && whole_item && b < B ? gv.extend + b * gv.extend_sb
                                                     : (partial ? partial + 1 : nullptr);
  if (b < B && (taken >> grp & 1u)) {
    it = v.item(b);
    o = it.open.at(1, 1);
    if constexpr (kAffine) ext = it.extend.at(1, 1);
    g = grad[b];
    item_stripes = (it.m + kRows - 1) / kRows;
    if (l == 0) partial[0] = partial[1] = 0.f;
    if (it.m == 0 || it.n == 0) {  // only boundaries: the general sweeps have them
      if (stripe == 0 && l == 0) {
        using Model = dp::Model<float, kAffine>;
        float* t = ws.scratch + b * ws.scratch_per_item;
        const typename Model::Tab V{t, it.m + 1, it.n + 1};
        const typename Model::Tab E{t + Model::Tab::size(it.m + 1, it.n + 1), 2, it.n + 1};
        dp::LocalEnd<float> e;
        Model::forward(it, c, V, e);  // V and the local end, for the adjoint
        dp::ItemGrads<float> ig = gv.item(b);
        ig.open = {open_out, 0, 0};
        ig.extend = {extend_out, 0, 0};
        Model::backward(it, c, V, e, g, E, ig);
      }
    } else if (stripe < item_stripes) {
      m = it.m;
      n = it.n;
      if (c.local) end = End::load(ws.ends + b * 4);
    }
  }
  const float* scores = m > 0 ? it.scores : v.scores;  // a valid address for every lane
  float* grads = m > 0 ? gv.scores + b * v.M * N : nullptr;
  const bool reads_below = m > 0 && stripe + 1 < item_stripes;
  const RingEntry* ring_in = reads_below ? ring_slot<kStates>(ws, geo, b, (stripe + 1) % 2) : nullptr;
  RingEntry* ring_out = m > 0 ? ring_slot<kStates>(ws, geo, b, stripe % 2) : nullptr;
  const unsigned tag = geo.stripes + 1 + stripe;  // after the forward's; the stripe below: tag + 1
  const float* values = ws.values + ((b * geo.stripes + stripe) * geo.steps) * Sh::kSlab;
  const float* above = ws.above + (b * geo.stripes + stripe) * kStates * W;
  const int steps = __reduce_max_sync(kFullMask, unsigned(m > 0 ? n + G : 0));
  __syncwarp();

  float* const warp_smem = &smem[warp][0];
  float* const my_below = Sw::edge_of(warp_smem, grp);
  const int first_row = i0 + l * R + 1;

  // The saved values of the lane's rows at column `step - l` (zero outside the forward's sweep,
  // which saved the warp's `steps` slabs).
  const auto load_rows = [&](int step, float (&dst)[kStates][R]) {
    const bool in = m > 0 && step >= 0 && step < steps;
#pragma unroll
    for (int st = 0; st < kStates; ++st)
#pragma unroll
      for (int r = 0; r < R; ++r)
        dst[st][r] = in ? values[int64_t(step) * Sh::kSlab + (st * R + r) * G + l] : 0.f;
  };
  // Lane 0's row above (the saved row above the stripe) at column j.
  const auto load_above = [&](int j, float (&dst)[kStates]) {
#pragma unroll
    for (int st = 0; st < kStates; ++st)
      dst[st] = (l == 0 && m > 0 && j >= 0 && j <= n) ? above[st * W + j] : 0.f;
  };

  // Saved values at the columns j, j - 1 of the lane's rows (slabs step, step - 1), and the
  // slabs step - 2 .. step - 1 - kDepth in flight (loaded kDepth iterations before they are
  // needed); the row above at j, j - 1 (lane 0: the saved row above, in flight the same way).
  // One slab ahead with four rows per lane, 4 / R otherwise. H200 A/B (the sweep in whole
  // chunks): the short pairs' linear adjoint, (65536, 32^2), 722 us with one, 801 us with two.
  // Two were better (1.45 -> 1.34 ms forward + backward) only while a skipped step cost every
  // slab in flight a register move, which waited for its load.
  // (With the plain steps below two ahead still gained nothing: 572 -> 574 us.)
  constexpr int kDepth = R >= 4 ? 1 : 4 / R;
  float cur[kStates][R], left[kStates][R], pipe[kDepth][kStates][R];
  float up_cur[kStates], up_left[kStates], above_pipe[kDepth][kStates];
  float from_right[kStates][R];  // pushes left from (i, j + 1)
  float diag_prev[kStates][R];   // pushes diagonal made by row r at column j + 1
  float below_up[kStates], below_diag[kStates], held_diag[kStates];  // from lane l + 1
#pragma unroll
  for (int st = 0; st < kStates; ++st) {
    below_up[st] = below_diag[st] = held_diag[st] = 0.f;
#pragma unroll
    for (int r = 0; r < R; ++r) from_right[st][r] = diag_prev[st][r] = 0.f;
  }
  // The long pairs' shape prefetches each next chunk's slabs (see the chunk loop).
  constexpr bool kPrefetchChunks = R == 1;
  static_assert(!kPrefetchChunks || Sh::kSlab % 4 == 0, "slabs of whole 16-byte pieces");
  // The sweep runs whole chunks: its steps from `steps` on lie outside every item (zero values,
  // zero adjoints), and with no step skipped the unrolled steps are straight-line code, whose
  // loads into the pipeline above need no register moves (a move waits for its load).
  const int last_chunk = (steps + kW - 1) / kW - 1;
  const int swept = (last_chunk + 1) * kW;
  load_rows(swept - 1, cur);
  load_rows(swept - 2, left);
#pragma unroll
  for (int d = 0; d < kDepth; ++d) {
    load_rows(swept - 3 - d, pipe[d]);
    load_above(swept - 2 - d, above_pipe[d]);  // lane 0's column is the step
  }
  {  // the row above at the first step's column: lane l - 1's last row (slab swept - 2), or lane 0's
    float up_from_left[kStates];
#pragma unroll
    for (int st = 0; st < kStates; ++st) up_from_left[st] = __shfl_up_sync(kFullMask, left[st][R - 1], 1, G);
    load_above(swept - 1, up_cur);
    if (l > 0) {
#pragma unroll
      for (int st = 0; st < kStates; ++st) up_cur[st] = up_from_left[st];
    }
  }
  float d_open = 0.f, d_extend = 0.f;
  // The soft end's seed g exp((v - best) / t) / soft_sum, as g / soft_sum * exp2((v - best) c).
  const float seed_scale = soft && m > 0 ? g / end.soft_sum : 0.f;
  const float scale = dp::device::exp2_scale(c.temperature);
  const float seed_exp2 = soft ? scale : 0.f;
  const Weights<kHard, kDivide> weights{c.temperature, kHard ? 0.f : scale};
  // Plain steps (see the step loop): all but the long pairs' affine adjoint, which lost 3% with
  // them (H200 A/B: (32, 1024^2) 1085 -> 1117 us, (1, 4096^2) 3727 -> 3851 us).
  constexpr bool kPlainSteps = !kHard && !(kAffine && G == 32 && R == 1);
  // Plain edges: the local affine adjoints sweep the skew's steps (lanes at columns j <= 0) plain
  // too, where the others take a branch per cell there. H200 A/B at (65536, 32^2):
  // affine 750 -> 726 us; linear 581 -> 593 us (its skew's cells, cheap on the branch, then
  // cost their weights' exp2s), so not linear.
  constexpr bool kPlainEdges = kPlainSteps && kAffine && is_local(kEnds);
  using Plain = PlainWeights<kDivide>;
  const Plain plain_weights{scale};

  // See move_tile. The long affine adjoint loads by row offsets: H200 A/B 1133 -> 1085
  // us at (32, 1024^2), 3817 -> 3735 us at (1, 4096^2); the linear one lost 2-4% with them.
  constexpr bool kOwnStoreOffsets = G == 32 && R == 1;
  constexpr bool kOwnLoadOffsets = kOwnStoreOffsets && !kAffine;
  // Chunks inside the item (Sweep::chunk_inside: a stripe's all but its first and last few) move
  // their scores in and d S out without the borders' checks and per-element offsets (about 400
  // instructions fewer a chunk). H200 kernels (two rounds): long linear
  // adjoints (32, 1024^2) 648 -> 613-619 us, (1, 4096^2) 2340-2356 -> 2234-2254 us, (128, 32,
  // 4096) 900 -> 821 us; affine (32, 1024^2) 1063 -> 1011-1022 us, (1, 4096^2) 3698 -> 3544 us.
  const auto load_tile = [&](int kk) {
    float* const tile = Sw::tile_of(warp_smem, grp, kk);
    if (Sw::chunk_inside(m, n, i0, kk)) {
      Sw::template move_tile<true, kOwnLoadOffsets, true>(tile, scores, nullptr, m, n, l, i0, kk,
                                                          N);
    } else {
      Sw::template move_tile<true, kOwnLoadOffsets>(tile, scores, nullptr, m, n, l, i0, kk, N);
    }
  };
  if (Sh::kBuffers == 2 && steps > 0) load_tile(last_chunk);
  for (int k = last_chunk; k >= 0; --k) {
    __syncwarp();  // every lane is done with the chunk before (its d S is out)
    float* const my_tile = Sw::tile_of(warp_smem, grp, k);
    // The scores first, as in the forward (the chunks run backwards here).
    const bool next = k > 0;
    if (Sh::kBuffers == 1) {
      load_tile(k);
    } else if (next) {
      load_tile(k - 1);
    }
    if (kPrefetchChunks && next && m > 0) {
      // The next chunk's saved slabs (those its steps load: from 2 + kDepth steps before it on,
      // one contiguous run) into L2, one copy-engine instruction per group, while this chunk is
      // swept: the long pairs' shape (one row per lane, a few warps per SM) stalls on those
      // loads. H200 A/B (against a 128-byte line per lane 8 steps ahead): adjoint
      // (32, 1024^2) 738 -> 678 us, (1, 4096^2) 2714 -> 2496 us. The short pairs' shapes lost
      // 17% with it ((65536, 32^2) 723 -> 846 us), as with the per-step lines before: more
      // warps hide their loads. The gain is fragile: the same prefetch written as a lambda
      // compiled to another schedule and gained 3% (725 us).
      const int first = max((k - 1) * kW - 2 - kDepth, 0), end = min(k * kW - 2 - kDepth, steps);
      if (l == 0 && end > first) {
        prefetch_l2(values + int64_t(first) * Sh::kSlab, (end - first) * Sh::kSlab * int(sizeof(float)));
      }
    }
    // The pushes from the stripe below at the columns lane G - 1 reads in this chunk (and one
    // more).
    ring_take<Sh::kAbove, G>(ring_in, tag + 1, l, my_below, [&](int q) -> int64_t {
      const int plane = q / (kW + 1), column = k * kW + q % (kW + 1) - (G - 1);
      return ring_in != nullptr && column >= 0 && column <= n ? plane * W + column : -1;
    });
    Sw::wait_for_tiles(next);
    __syncwarp();

    // Steps unrolled: 4 for the long pairs, 2 for the short ones; not kW (fewer registers live).
    // H200 A/B: the long pairs' adjoint ((32, 1024^2)) 682 us at 4, 720 at 8, 877 at 16, 787 at
    // 2; the short pairs' (with plain steps, (65536, 32^2)) linear 596 us
    // at 4, 572 at 2, 599 at 1, 666 at 8; affine 878, 759, 822, 986.
    constexpr int kUnroll = G < 32 ? 2 : 4;
#pragma unroll kUnroll
    for (int w = kW - 1; w >= 0; --w) {
      const int step = k * kW + w;
      const int j = step - l;
      // The row above at j - 1: lane l - 1's last row at slab step - 2, or the saved row.
#pragma unroll
      for (int st = 0; st < kStates; ++st) {
        const float from_left = __shfl_up_sync(kFullMask, pipe[0][st][R - 1], 1, G);
        up_left[st] = l > 0 ? from_left : above_pipe[0][st];
      }
      float next[kStates][R], above_new[kStates];  // slab step - 2 - kDepth, row above there
      load_rows(step - 2 - kDepth, next);
      load_above(j - 1 - kDepth, above_new);
      if (l == G - 1) {  // the first row of the stripe below, staged from the ring
#pragma unroll
        for (int st = 0; st < kStates; ++st) {
          below_up[st] = my_below[st * (kW + 1) + w];                // column j
          below_diag[st] = my_below[(kStates + st) * (kW + 1) + w + 1];  // column j + 1
        }
      }
      const bool column_inside = j >= 0 && j <= n;
      float push_up[kStates], push_diag[kStates];  // of the row just done, for the row above
#pragma unroll
      for (int st = 0; st < kStates; ++st) {
        push_up[st] = below_up[st];
        push_diag[st] = below_diag[st];
      }
      // The lane's rows at this step, bottom-up. kPlain: straight-line code, no branch per cell,
      // so that the compiler interleaves the rows' independent work (their weights); else a
      // branch per cell for column 0 and for the weights of non-finite values.
      const auto sweep_rows = [&](auto plain) {
        constexpr bool kPlain = decltype(plain)::value;
#pragma unroll
        for (int r = R - 1; r >= 0; --r) {
          const int i = first_row + r;
          // With plain edges (below), column 0 is the local boundary (A = X = Y = -inf), through
          // which nothing flows back (CellAdjoint::column_zero): its cells take no adjoint.
          const bool inside = column_inside && i <= m && (!kPlainEdges || j >= 1);
          float e[kStates];
#pragma unroll
          for (int st = 0; st < kStates; ++st) {
            e[st] = inside ? from_right[st][r] + push_up[st] + push_diag[st] : 0.f;
          }
          // The seeds (docs/spec.md, "Gradients").
          if constexpr (kEnds == Ends::kMax) {
            const bool seeded = i == end.i && j == end.j;  // a cell of the item: j >= 1, i <= m
            if constexpr (kPlain) {
              e[0] = seeded ? e[0] + g : e[0];
            } else if (seeded) {
              e[0] += g;
            }
          } else if constexpr (kEnds == Ends::kSoft) {
            // normalised: the seeds of all cells and of the empty alignment sum to g
            // fminf takes 0 for NaN: a +inf cell at a +inf best seeds 1 (LocalEnd::seed).
            const float seed =
                seed_scale * dp::device::ex2(fminf((cur[0][r] - end.best) * seed_exp2, 0.f));
            e[0] += inside && j >= 1 ? seed : 0.f;
          } else if (!(kPlain && kAffine) && inside && i == m && j == n) {  // smax_t(A, X, Y)
            if constexpr (kAffine) {  // at (m, n); never in a plain step
              float last[3] = {cur[0][r], cur[1][r], cur[2][r]}, wl[3];
              dp::smax_weights(last, c.temperature, wl);
#pragma unroll
              for (int st = 0; st < kStates; ++st) e[st] += g * wl[st];
            } else {
              e[0] += g;
            }
          }
          float vs[kStates], vd[kStates], vu[kStates], vl[kStates];
#pragma unroll
          for (int st = 0; st < kStates; ++st) {
            vs[st] = cur[st][r];
            vu[st] = r > 0 ? cur[st][r - 1] : up_cur[st];
            vd[st] = r > 0 ? left[st][r - 1] : up_left[st];
            vl[st] = left[st][r];
          }
          Adj a;
          if (kPlain || j >= 1) {
            const float s = my_tile[Sw::tile_at(r, w, l)];
            if constexpr (kPlain) {
              a.interior(e, vs, vd, vu, vl, s, o, ext, c.local, plain_weights, d_open, d_extend);
            } else {
              a.interior(e, vs, vd, vu, vl, s, o, ext, c.local, weights, d_open, d_extend);
            }
            my_tile[Sw::tile_at(r, w, l)] = a.ds;  // d S, written out with the chunk
          } else {
            a.column_zero(e, vs, vu, o, ext, c.local, weights, d_open, d_extend);
          }
#pragma unroll
          for (int st = 0; st < kStates; ++st) {
            from_right[st][r] = a.to_left[st];
            push_up[st] = a.to_up[st];
            push_diag[st] = diag_prev[st][r];
            diag_prev[st][r] = a.to_diag[st];
          }
        }
      };
      if constexpr (kPlainSteps) {
        // Plain steps: every lane at a column j >= 1 (step >= G; with plain edges any column,
        // the cells at j <= 0 taking a zero adjoint, so that their finite weights push zeros),
        // every weight's value finite or -inf (with affine, A's value less S), t > 0, and no lane
        // at the global affine end (its seed takes smax_weights). Whole warps, so that no lane
        // diverges.
        bool plain = kPlainEdges || step >= G;
#pragma unroll
        for (int r = 0; r < R; ++r) {
          if constexpr (kAffine) {
            const float s = my_tile[Sw::tile_at(r, w, l)];
            plain = plain && Plain::takes(cur[dp::kA][r] - s) &&
                    Plain::takes(cur[dp::kX][r]) && Plain::takes(cur[dp::kY][r]);
          } else {
            plain = plain && Plain::takes(cur[0][r]);
          }
        }
        if constexpr (kAffine && kEnds == Ends::kGlobal) {
          plain = plain && !(j == n && m >= first_row && m < first_row + R);
        }
        if (__all_sync(kFullMask, plain)) {
          sweep_rows(std::true_type{});
        } else {
          sweep_rows(std::false_type{});
        }
      } else {
        sweep_rows(std::false_type{});
      }
      // Row 0 of the lane: its pushes go to lane l - 1's last row, or (lane 0) to the ring, which
      // the stripe above reads, or with one stripe the global mode's sweep of row 0.
      // A branch, not ring_put_where: the long affine adjoint lost 5% with that (H200 A/B:
      // (32, 1024^2) 1071 -> 1126 us, (1, 4096^2) 3707 -> 3901 us).
      if ((Sh::kStacked || !is_local(kEnds)) && l == 0 && m > 0 && column_inside) {
#pragma unroll
        for (int st = 0; st < kStates; ++st) {
          ring_put(ring_out + st * W + j, push_up[st], tag);
          ring_put(ring_out + (kStates + st) * W + j, diag_prev[st][0], tag);
        }
      }
#pragma unroll
      for (int st = 0; st < kStates; ++st) {
        const float up_from_below = __shfl_down_sync(kFullMask, push_up[st], 1, G);
        const float diag_from_below = __shfl_down_sync(kFullMask, diag_prev[st][0], 1, G);
        below_up[st] = up_from_below;       // (i + 1, j - 1): next step's column
        below_diag[st] = held_diag[st];     // (i + 1, j)
        held_diag[st] = diag_from_below;
        up_cur[st] = up_left[st];
#pragma unroll
        for (int r = 0; r < R; ++r) {
          cur[st][r] = left[st][r];
          left[st][r] = pipe[0][st][r];
#pragma unroll
          for (int d = 0; d + 1 < kDepth; ++d) pipe[d][st][r] = pipe[d + 1][st][r];
          pipe[kDepth - 1][st][r] = next[st][r];
        }
#pragma unroll
        for (int d = 0; d + 1 < kDepth; ++d) above_pipe[d][st] = above_pipe[d + 1][st];
        above_pipe[kDepth - 1][st] = above_new[st];
      }
    }
    __syncwarp();
    if (Sw::chunk_inside(m, n, i0, k)) {
      Sw::template move_tile<false, kOwnStoreOffsets, true>(my_tile, nullptr, grads, m, n, l, i0, k,
                                                            N);
    } else {
      Sw::template move_tile<false, kOwnStoreOffsets>(my_tile, nullptr, grads, m, n, l, i0, k, N);
    }
  }

  // Row 0 (global): H[0][j] = H[0][j-1] + g, or Y[0][j] from row 0's A, X, Y at j - 1; lane 0
  // sweeps it leftwards with the pushes that stripe 0's first row left in the ring.
  if (!c.local && stripe == 0 && m > 0 && l == 0) {
    float carry[kStates] = {};
    for (int j = n; j >= 1; --j) {
      float e[kStates];
#pragma unroll
      for (int st = 0; st < kStates; ++st) {
        e[st] = ring_value(ring_out[st * W + j]) +
                (j + 1 <= n ? ring_value(ring_out[(kStates + st) * W + j + 1]) : 0.f) + carry[st];
        carry[st] = 0.f;
      }
      if constexpr (kAffine) {
        if (e[dp::kY] != 0.f) {
          float x[3], wy[3];
          dp::AffineHorizontalTerms::of(above[dp::kA * W + j - 1], above[dp::kX * W + j - 1],
                                        above[dp::kY * W + j - 1], o, ext, x);
          dp::smax_weights(x, c.temperature, wy);
          carry[dp::kY] = e[dp::kY] * wy[dp::AffineHorizontalTerms::kExtend];
          d_open += e[dp::kY] * (wy[dp::AffineHorizontalTerms::kOpenFromA] +
                                 wy[dp::AffineHorizontalTerms::kOpenFromX]);
          d_extend += carry[dp::kY];
        }
      } else if (e[0] != 0.f) {
        carry[0] = e[0];
        d_open += e[0];
      }
    }
  }

  // The penalties' gradients of the stripe, summed over the group in a fixed order.
#pragma unroll
  for (int delta = G / 2; delta >= 1; delta /= 2) {
    d_open += __shfl_xor_sync(kFullMask, d_open, delta, G);
    d_extend += __shfl_xor_sync(kFullMask, d_extend, delta, G);
  }
  if (m > 0 && l == 0) {
    *open_out = d_open;
    *extend_out = d_extend;
  }
}

}  // namespace stripes
}  // namespace softalign
