// The short pairs' linear forward + adjoint at t > 0 in probability space, in one kernel
// (docs/design.md, "Probability space: the adjoint"): a warp sweeps its items forward as
// linear_forward.cuh's forward does,
// keeping every cell's z and E in shared memory (KeepCells, DenseScores: items of at most
// kKeepCols columns), then sweeps the same steps backwards, leaves d score / d S in E's
// place, and copies it out.
//
// The reverse. With Z = exp(H / t) and Z* the value the score reads (the end cell's Z; local soft,
// 1 + the sum of every cell's Z), B(i, j) = d Z* / d Z(i, j) obeys (prob_space.h's linear_adjoint)
//   B(i, j) = [seed] + G (B(i, j + 1) + B(i + 1, j)) + E(i + 1, j + 1) B(i + 1, j + 1),
// the seed being 1 at the end cell (local soft: at every cell). Each row carries
//   R(i, j) = B(i, j) 2^K(i, j) / Z*,   K(i, j) the exponent of the chunk that computed z(i, j),
// so that z(i, j) R(i, j) = Z(i, j) B(i, j) / Z*, the probability that an alignment passes
// through (i, j), is at most 1: R is at most 1 / z, below 2^96 (no cell of a chunk falls below
// 2^-96 of its start), and the factors from one row's scale to another's are the forward's own
// (Rows::from_above, the lane above's). The gradients are the edges' probabilities:
//   d score / d S(i, j) = E(i, j) Z(i - 1, j - 1) 2^-K(i, j) R(i, j)     (the diagonal edge)
//   d score / d g       = sum of G (Z(i - 1, j) + Z(i, j - 1)) 2^-K(i, j) R(i, j)   (gap edges),
// each Z in (i, j)'s scale rebuilt from the kept z's and k's exactly as the forward used it.
// Global mode's gaps along row 0 and column 0 are counted on the edges that leave them: an edge
// from (a, 0) or (0, a) carries the a gaps before it.
//
// Items the forward refuses (linear_forward.cuh's list; docs/design.md, "Refusal rules") and items
// of only boundaries are left to the log-space kernels: their groups' bits in their unit's
// `fallback` are set, and the host runs the saving forward and the adjoint on those items only. The
// warp's other items keep this kernel's results, so that none depends on its neighbours
// (docs/spec.md, "Dtypes and devices").
#pragma once

#include "linear_forward.cuh"

namespace softalign {
namespace stripes {
namespace scaled {

// One warp a block. Its shared memory: each item's scores (DenseScores; E after the forward, d S
// after the reverse), each item's kept z's, and every chunk's k of each lane's rows, as 16-bit
// integers (|k| stays below 1100: 5 chunks of at most 127 each, global rows starting at
// 32 kGapBound). No score tiles: the item's scores come in once, with a few plain copies, and
// its d S goes out the same way (H200: the striped tiles' loads, reloads and
// write-out took half of the kernel's 620 us at (65536, 32^2)).
template <int G, int R>
struct Fused {
  using Sw = Sweep<false, G, R, kSteps>;
  using Sh = typename Sw::Sh;
  static constexpr int kChunks = (kKeepCols + G + Sw::kW - 1) / Sw::kW;
  static constexpr int kScoreFloats = Sh::kGroups * kDenseItem;
  static constexpr int kKeptFloats = Sh::kGroups * kKeepItem;
  static constexpr int kWarpFloats = kScoreFloats + kKeptFloats + kChunks * R * 32 / 2;
};

// The item's m x n d S, times grad g, from its dense array to its row-major M x N block in
// global memory, by the G lanes of its group.
template <int G>
__device__ __forceinline__ void write_out(float* to, const float* from, float g, int m, int n,
                                          int64_t N, int l) {
  if (m == 0) return;
  if (N % 4 == 0 && n % 4 == 0 && (reinterpret_cast<uintptr_t>(to) & 15) == 0) {
    const int per_row = n / 4;
    for (int q = l; q < m * per_row; q += G) {
      const int i = q / per_row, j = (q % per_row) * 4;
      float4 d = *reinterpret_cast<const float4*>(from + i * kKeepCols + j);
      d.x *= g, d.y *= g, d.z *= g, d.w *= g;
      *reinterpret_cast<float4*>(to + int64_t(i) * N + j) = d;
    }
  } else {
    for (int q = l; q < m * n; q += G) {
      const int i = q / n, j = q % n;
      to[int64_t(i) * N + j] = from[i * kKeepCols + j] * g;
    }
  }
}

// A fused kernel's lane and its group's item: block `unit`'s group grp (lanes l = 0 .. G - 1)
// takes item b. An item the kernel cannot take (no cells, or gaps `gaps_fit` refuses: NaN too)
// is swept as a group without an item (m = n = 0); so is a group past the batch (b >= B), which
// is not refused. `bad` (that refusal, or a rule the kernel finds later) sends the item to the
// log-space kernels (`refuse`); a group refused after the sweep has its results dropped.
template <int G, int kGroups>
struct FusedItem {
  const int lane_id = threadIdx.x, grp = lane_id / G, l = lane_id % G;
  const int64_t unit = blockIdx.x, b = unit * kGroups + grp;
  dp::Item<float> it;
  int m = 0, n = 0;
  float g = 0.f;  // the score's incoming gradient
  bool bad = false;

  // Reads item b and its grad (b < B). gaps_fit(it) reads the item's gaps into the caller's
  // variables and says whether the kernel takes them (false for NaN: write it with <=). No
  // cells or gaps that do not fit: bad, m = n = 0, and the caller zeroes the gaps it read.
  template <class GapsFit>
  __device__ __forceinline__ void take(const ProblemView<float>& v, int64_t B, const float* grad,
                                       GapsFit gaps_fit) {
    if (b < B) {
      it = v.item(b);
      g = grad[b];
      const bool fit = gaps_fit(it);
      bad = it.m == 0 || it.n == 0 || !fit;
      m = bad ? 0 : it.m;
      n = bad ? 0 : it.n;
    }
  }
  // The item's scores: a valid address for every lane.
  __device__ __forceinline__ const float* scores(const ProblemView<float>& v) const {
    return m > 0 ? it.scores : v.scores;
  }
  // Its d S block (none without an item).
  __device__ __forceinline__ float* grads(const ProblemView<float>& v,
                                          const GradsView<float>& gv) const {
    return m > 0 ? gv.scores + b * v.M * v.N : nullptr;
  }
  // The warp's steps: its longest item's n + G (0: no item taken). Every lane of the warp
  // calls it.
  __device__ __forceinline__ int steps() const {
    return __reduce_max_sync(kFullMask, unsigned(m > 0 ? n + G : 0));
  }
  // The groups refused so far (a bit each), flagged in the unit's `fallback` for the log-space
  // kernels. Every lane of the warp calls it.
  __device__ __forceinline__ unsigned refuse(int* fallback) const {
    const unsigned refused = groups_where<G>(bad);
    if (lane_id == 0 && refused != 0) fallback[unit] = int(refused);
    return refused;
  }
  // Whether the item keeps this kernel's results; flags the refused groups (refuse), so every
  // lane of the warp calls it.
  __device__ __forceinline__ bool keeps_results(int* fallback) const {
    return !(refuse(fallback) >> grp & 1u) && m > 0;
  }
};

// A chunk of the reverse in the scales the forward had: each of the lane's rows' k (`kept_k`: the
// lane's k's, a chunk's rows at a time, 32 lanes apart) and its change e at the chunk's start
// (chunk kk - 1's to kk's), the factor from the row above (lane 0's first row: 1, its row above
// is DP row 0), 2^-e, and local soft's seed 2^(k - K*) / z* (inv_total = 1 / z*, K* = total_k).
template <int G, int R, bool kSoft>
struct ChunkScales {
  int k[R], e[R];
  // The lane above's last row's k and e (e_above: the linear kernel's; the affine one does not
  // read it, and ptxas drops its shuffle there).
  int k_above, e_above;
  float from_above[R], back[R], seed_soft[R];

  __device__ __forceinline__ ChunkScales(const int16_t* kept_k, int kk, int l, int total_k,
                                         float inv_total) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      k[r] = kept_k[(kk * R + r) * 32];
      e[r] = kk > 0 ? k[r] - kept_k[((kk - 1) * R + r) * 32] : 0;
    }
    k_above = __shfl_up_sync(kFullMask, k[R - 1], 1, G);
    e_above = __shfl_up_sync(kFullMask, e[R - 1], 1, G);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      from_above[r] = r == 0 ? (l == 0 ? 1.f : factor(k_above - k[0])) : factor(k[r - 1] - k[r]);
      back[r] = pow2_to_subnormal(-e[r]);
      seed_soft[r] = kSoft ? pow2_to_subnormal(k[r] - total_k) * inv_total : 0.f;
    }
  }
};

// Local max, the end of a fused kernel's item: each lane's first maximal row (its rows' largest
// A's, `acc` in the scales `ka`, brought to 2^top, and `best_j`, each row's first maximal
// column), then the group's row-major first maximum (End's merge), the empty alignment (0 at (0,
// 0)) first. Every lane of the warp calls it (its shuffles).
template <int G, class LaneRows, int R>
__device__ __forceinline__ End group_argmax(const LaneRows& rows, const int (&best_j)[R], int top,
                                            int first_row, const dp::Config<float>& c, float t) {
  float best = 0.f;
  int best_i = 0, best_jj = 0;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float x = scale_down(rows.acc[r], rows.ka[r] - top);
    const bool take = x > best;
    best = take ? x : best;
    best_i = take ? first_row + r : best_i;
    best_jj = take ? best_j[r] : best_jj;
  }
  End end;
  if (best > 0.f) {
    End cell;
    cell.best = log_space(best, top, t);
    cell.i = best_i;
    cell.j = best_jj;
    end.merge(cell, c, false);
  }
  end.merge_group<G>(c, false);
  return end;
}

template <int G, int R, Ends kEnds>
__global__ void __launch_bounds__(32)
    forward_backward_kernel(ProblemView<float> v, GradsView<float> gv, int64_t B,
                            const float* grad, float* score, int* fallback) {
  using F = Fused<G, R>;
  using Sw = typename F::Sw;
  using Sh = typename F::Sh;
  constexpr int kW = Sw::kW, kGroups = Sh::kGroups;
  static_assert(G * R == 32 && !Sh::kStacked, "an item's rows in one stripe");
  static_assert(kW == DenseScores::kSlabCols, "a chunk of steps waits for a slab of columns");
  constexpr bool kLocal = is_local(kEnds), kSoft = kEnds == Ends::kSoft;
  __shared__ __align__(16) float smem[F::kWarpFloats];  // 16-byte copies in and out

  FusedItem<G, kGroups> item;
  const int lane_id = item.lane_id, grp = item.grp, l = item.l;
  const int64_t b = item.b;
  dp::Config<float> c = v.config;
  c.local = kLocal;
  const float t = c.temperature, scale = dp::device::exp2_scale(t);
  const int64_t N = v.N;

  float gap_c = 0.f;
  item.take(v, B, grad, [&](const dp::Item<float>& it) {
    gap_c = it.open.at(1, 1) * scale;
    return fabsf(gap_c) <= float(kGapBound);
  });
  const int m = item.m, n = item.n;
  bool& bad = item.bad;
  gap_c = bad ? 0.f : gap_c;
  const float gap = dp::device::ex2(gap_c);
  const float* scores = item.scores(v);
  float* grads = item.grads(v, gv);
  const int steps = item.steps();
  if (steps == 0) {  // no item taken
    item.refuse(fallback);
    return;
  }

  float* const dense = smem + grp * kDenseItem;  // the item's S, then E, then d S
  float* const kept = smem + F::kScoreFloats + grp * kKeepItem;  // the item's z's
  int16_t* const kept_k =
      reinterpret_cast<int16_t*>(smem + F::kScoreFloats + F::kKeptFloats) + lane_id;
  const int first_row = l * R + 1;
  const int rows_inside = min(max(m - l * R, 0), R);
  DenseScores::load<G>(dense, scores, m, n, N, l);  // the sweep waits for it slab by slab

  // ---- forward
  Rows<R, kLocal> rows(first_row, gap_c);
  KeepCells<R> keep{kept, kept_k, {}};
#pragma unroll
  for (int r = 0; r < R; ++r) keep.best_j[r] = -1;
  float final_value = 0.f;
  bool has_final = false;
  DenseScores src{dense + (first_row - 1) * kKeepCols};
  OneStripe stripe;
  sweep<G, R, kEnds>(src, m, n, gap_c, gap, scale, t, steps, l, rows, bad, final_value, has_final,
                     keep, stripe);
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");  // short items: slabs the sweep never read

  // The score, and where the reverse starts: the end cell (i*, j*) and 1 / z there (global, local
  // max), or 2^-K* / z* with Z* = z* 2^K* the soft total (local soft).
  float item_score = final_value;
  int end_i = m, end_j = n;
  float total_z = 1.f;
  int total_k = 0;
  if constexpr (kLocal) {
    int top;
    const float total = rows_total<R, kSoft>(rows, top);
    bad |= !(total < INFINITY);  // NaN too
    if constexpr (kSoft) {
      total_k = top;
#pragma unroll
      for (int delta = G / 2; delta >= 1; delta /= 2) {
        total_k = max(total_k, __shfl_xor_sync(kFullMask, total_k, delta, G));
      }
      total_z = scale_down(total, top - total_k);
#pragma unroll
      for (int delta = G / 2; delta >= 1; delta /= 2) {
        total_z += __shfl_xor_sync(kFullMask, total_z, delta, G);
      }
      total_z += pow2_to_subnormal(-total_k);  // the empty alignment
      bad |= !(total_z < INFINITY);  // the lanes' sums, each finite, may not be
      item_score = log_space(total_z, total_k, t);
    } else {
      const End end = group_argmax<G>(rows, keep.best_j, top, first_row, c, t);
      item_score = end.best;
      end_i = end.i;
      end_j = end.j;
    }
  } else {
    item_score = __shfl_sync(kFullMask, final_value, (m - 1) / R, G);
  }
  // Items refused by their ends go on through the reverse (on values of their own, whatever
  // they are) and write nothing.
  const bool taken = item.keeps_results(fallback);
  if (taken && l == 0) score[b] = item_score;
  __syncwarp();  // every cell kept

  // The seeds: global and local max, 1 / z* at the end cell (on its lane); local soft,
  // 2^(K(i, j) - K*) / z* at every cell (per chunk, below). Not times grad: z R <= 1 is what keeps
  // R in range; grad scales d S on its way out, and d g. A soft seed of a chunk far below the
  // total (K* - K(i, j) beyond 126) is subnormal, but joins R(i, j) in its own cell's scale with
  // no factor after it: off by at most z 2^-150 < 2^-22 in probability (flushed, below 2^-149,
  // by at most z 2^-149), as R is wherever it rounds there (the carry below).
  float seed_z = 0.f;
  int seed_j[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const bool end_row = !kSoft && first_row + r == end_i;
    seed_j[r] = end_row ? end_j : -1;
    if (end_row) seed_z = 1.f / kept[(end_i - 1) * kKeepWidth + end_j];
  }
  const float inv_total = kSoft ? 1.f / total_z : 0.f;

  // ---- reverse: the forward's steps backwards, chunk by chunk, E from the forward's sweep
  const float* const z_rows = kept + (first_row - 1) * kKeepWidth;  // row r at r * kKeepWidth
  const float* const z_above = l > 0 ? z_rows - kKeepWidth : z_rows;  // lane 0: unused
  // Carried from column j + 1 (the step before), each row r's: R (G R into a chunk's last column,
  // below); E R in row r - 1's scale (its diagonal successor's share); the kept z of (i, j), which
  // row r + 1 takes as its up.
  float next_R[R], next_ER[R], z_up_next[R];
  float back_next[R];  // 2^-e of the chunk after this one (its k less this one's)
#pragma unroll
  for (int r = 0; r < R; ++r) next_R[r] = next_ER[r] = z_up_next[r] = 0.f, back_next[r] = 1.f;
  // From lane l + 1's first row, in this lane's last row's scale: R at column j (`below`), E R at
  // j + 1 (`below_diag`) and at j (`below_diag_next`, for the next step). The lane above's last
  // row's kept z at j (`z_above_next`).
  float below = 0.f, below_diag = 0.f, below_diag_next = 0.f, z_above_next = 0.f;
  // d score / d g: the gap edges' probabilities (times G at the end), global also the gaps along
  // row 0 and column 0 before the edges that leave them.
  float gap_edges = 0.f, gaps_before = 0.f;  // left edges without G; the rest with it

  const int last_chunk = (steps - 1) / kW;
  {  // the kept z's at the first column swept, as if carried
    const int j = min(max(last_chunk * kW + kW - 1 - l, 0), kKeepCols);
#pragma unroll
    for (int r = 0; r < R; ++r) z_up_next[r] = z_rows[r * kKeepWidth + j];
    z_above_next = z_above[j];
  }
  for (int kk = last_chunk; kk >= 0; --kk) {
    // What the reverse carries from the chunk after into this chunk's scales (the kept z's keep
    // theirs: each belongs to the chunk that computed it, the one of the cell that reads it).
    // R of (i, j + 1), the chunk after's first column, takes G before its 2^-e (the first step
    // below adds G R as it is). In this chunk's scale R(i, j + 1) is p / z: p the probability
    // through (i, j + 1), z its Z in this scale, which this chunk never held (its row rose by up
    // to 2^127 before the renormalization, e, and by G more): below 2^-126 once z > 2^126 p, a
    // subnormal, off by up to 2^-150. G times that put G 2^-150 into R(i, j), and the edges into
    // (i, j), whose z's are below 2^128 in this scale, turned it into probabilities off by up to
    // 2^(gap_c - 22): 2^-10 at gap_c = 12. With R first, d g came out 2.3e-4 off (local
    // soft, gaps paying 11.9 bits, m = 5, n = 7, t = 1: chunk 0 kept k = 0 up to z = 2^126; local
    // max 1.5e-4). G first, G R rounds in the
    // scale of the cell it joins: off by at most z 2^-150 < 2^-22 in probability, whatever G, as
    // any other value the reverse rounds.
#pragma unroll
    for (int r = 0; r < R; ++r) {
      next_R[r] = next_R[r] * gap * back_next[r];  // in this order: G R, then 2^-e
      next_ER[r] *= back_next[r == 0 ? 0 : r - 1];
    }
    below *= back_next[R - 1];
    below_diag *= back_next[R - 1];
    below_diag_next *= back_next[R - 1];
    // This chunk's scales, as the forward had them.
    const ChunkScales<G, R, kSoft> scales(kept_k, kk, l, total_k, inv_total);
    float gap_above[R];
#pragma unroll
    for (int r = 0; r < R; ++r) gap_above[r] = gap * scales.from_above[r];
    const float back_above = l == 0 ? 1.f : pow2_to_subnormal(-scales.e_above);
    const float row0_local = pow2_or_zero(-scales.k[0]);
    const int j0 = kk * kW - l;
    const bool interior = Sw::chunk_inside(m, n, 0, kk);
    const auto sweep_back = [&](auto inside_constant) {
      constexpr bool kInside = decltype(inside_constant)::value;
#pragma unroll
      for (int w = kW - 1; w >= 0; --w) {
        const int j = j0 + w;
        const bool column_inside = kInside || unsigned(j - 1) < unsigned(n);
        // Kept column j - 1 (any valid one outside the item: its cells are not inside).
        const int jl = kInside ? j - 1 : min(max(j - 1, 0), kKeepCols);
        // The row above the lane's first row at j and j - 1, as the forward used them less the
        // factor from_above[0]: the lane above's last row (renormalized, back_above, if the forward
        // computed it in the chunk before), or DP row 0 (lane 0).
        float z_up0, z_diag0;
        if (kLocal) {
          z_up0 = l == 0 ? row0_local : z_above_next * (w == 0 ? back_above : 1.f);
          z_diag0 = l == 0 ? row0_local : z_above[jl] * (w <= 1 ? back_above : 1.f);
        } else {
          z_up0 = l == 0 ? dp::device::ex2(fmaf(float(j), gap_c, -float(scales.k[0])))
                         : z_above_next * (w == 0 ? back_above : 1.f);
          z_diag0 = l == 0 ? dp::device::ex2(fmaf(float(j - 1), gap_c, -float(scales.k[0])))
                           : z_above[jl] * (w <= 1 ? back_above : 1.f);
        }
        z_above_next = z_above[jl];
        float now_R[R], now_ER[R], z_left[R];
#pragma unroll
        for (int r = 0; r < R; ++r) z_left[r] = z_rows[r * kKeepWidth + jl];
        float R_below = below;  // R of (i + 1, j) in row r's scale
#pragma unroll
        for (int r = R - 1; r >= 0; --r) {
          const float E = src.template at<kInside>(r, w, j);
          const bool inside = kInside || (column_inside && r < rows_inside);
          // B's recurrence from (i, j + 1), (i + 1, j + 1) (off the chain), then (i + 1, j).
          const float from_diag = r == R - 1 ? below_diag : next_ER[r + 1];
          const float seed = kSoft ? scales.seed_soft[r] : (j == seed_j[r] ? seed_z : 0.f);
          // R_below carries G; so does next_R at the chunk's last step (the chunk's scaling)
          const float value =
              w == kW - 1
                  ? dp::prob::linear_adjoint_scaled_right(R_below, next_R[r], from_diag, seed)
                  : dp::prob::linear_adjoint(R_below, gap, next_R[r], from_diag, seed);
          now_R[r] = inside ? value : 0.f;
          // In the row above's scale, times G for the up edge. gap_above is finite only where
          // the item's cells are (the refusals bound those rows' factors); below the item a row
          // overflows to inf with gaps that pay, keeps its k, and its factor clamps at 2^127:
          // G 2^127 = inf there, and 0 * inf. So zero outside, as now_R.
          // E R before its factor: R brought to a scale far below its own underflowed where
          // E R, at most 1 / d <= 2^126 (d: the forward's diagonal here), does not.
          const float GR_scaled = inside ? now_R[r] * gap_above[r] : 0.f;
          now_ER[r] = E * now_R[r] * scales.from_above[r];
          R_below = GR_scaled;
          // The edges into (i, j): the diagonal (d score / d S), and the gaps from above and the
          // left, each Z in the row above's scale (up, diag) or this row's (left).
          const float z_diag =
              r == 0 ? z_diag0 : z_left[r - 1] * (w == 0 ? scales.back[r - 1] : 1.f);
          const float z_up = r == 0 ? z_up0 : z_up_next[r - 1];
          const float left = z_left[r] * (w == 0 ? scales.back[r] : 1.f);
          const float match = z_diag * now_ER[r];  // E(i, j) is not read again
          if (kInside || unsigned(j - 1) < unsigned(kKeepCols)) src.rows[r * kKeepCols + j - 1] = match;
          const float left_edge = left * now_R[r], up_edge = z_up * GR_scaled;  // up: times G
          if constexpr (kLocal) {
            gap_edges += kInside ? left_edge : (inside ? left_edge : 0.f);
            gaps_before += kInside ? up_edge : (inside ? up_edge : 0.f);
          } else {  // from (i, 0) and (0, j): the i or j gaps before them too
            const int i = first_row + r;
            const float edges = left_edge * (j == 1 ? float(i + 1) : 1.f);
            const float before = fmaf(match, float((j == 1 ? i - 1 : 0) + (i == 1 ? j - 1 : 0)),
                                      up_edge * (i == 1 ? float(j + 1) : 1.f));
            gap_edges += inside ? edges : 0.f;
            gaps_before += inside ? before : 0.f;
          }
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
          next_R[r] = now_R[r];
          next_ER[r] = now_ER[r];
          z_up_next[r] = z_left[r];
        }
        // To lane l - 1's last row: R and E R of this lane's first row, in its scale.
        const float from_lane_below = __shfl_down_sync(kFullMask, R_below, 1, G);
        const float diag_from_lane_below = __shfl_down_sync(kFullMask, now_ER[0], 1, G);
        below = l == G - 1 ? 0.f : from_lane_below;
        below_diag = below_diag_next;
        below_diag_next = l == G - 1 ? 0.f : diag_from_lane_below;
      }
    };
    if (interior) {
      sweep_back(std::true_type{});
    } else {
      sweep_back(std::false_type{});
    }
#pragma unroll
    for (int r = 0; r < R; ++r) back_next[r] = scales.back[r];
  }
  __syncwarp();
  write_out<G>(grads, dense, item.g, taken ? m : 0, n, N, l);

  // d score / d g of the item, summed over the group in a fixed order.
  float d_gap = fmaf(gap, gap_edges, gaps_before) * item.g;
#pragma unroll
  for (int delta = G / 2; delta >= 1; delta /= 2) {
    d_gap += __shfl_xor_sync(kFullMask, d_gap, delta, G);
  }
  if (taken && l == 0) gv.open[b * gv.open_sb] = d_gap;
}

}  // namespace scaled
}  // namespace stripes
}  // namespace softalign
