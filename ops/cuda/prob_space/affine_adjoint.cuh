// The short pairs' affine forward + adjoint at t > 0 in probability space, in one kernel:
// linear_adjoint.cuh's design for the affine model
// (docs/design.md, "Probability space: the adjoint"; a float32 emulation of it was fuzzed against
// the CPU backend). A warp sweeps its items forward as affine_forward.cuh's forward does, keeping
// every cell's A and X and E (AffineKeepCells, DenseScores: items of at most kKeepCols columns),
// then sweeps the same steps backwards, leaves d score / d S in E's place, and copies it out.
//
// The reverse. With Z* the value the score reads (local soft: 1 + the sum of every A; local
// max: the largest A; global: D(m, n)), the adjoints Abar = d Z* / d A, Xbar, Ybar obey, from
// the cells after (prob_space.h's affine_adjoint):
//   Abar = seed  + diag + O Xbar(i + 1, j) + O Ybar(i, j + 1)
//   Xbar = seedD + diag + F Xbar(i + 1, j) + O Ybar(i, j + 1)
//   Ybar = seedD + diag + F Ybar(i, j + 1),     diag = E(i + 1, j + 1) Abar(i + 1, j + 1),
// the seed 1 at every cell (soft), at the first maximal one (max) or at (m, n) (global, where
// seedD = 1 too; local, seedD = 0). Each row carries them as
// R_A = Abar 2^K / Z*, R_X, R_Y, K the exponent of the chunk that computed the cell, so that
// z_A R_A is the probability that an alignment passes through A(i, j): the forward's own factors
// between rows and chunks take them from one row's scale to another's, each adjoint times its
// weight (E, O, F) before any factor (rule "order": a factor first can flush it).
// The gradients, at grad 1:
//   d score / d S(i, j) = z_A R_A
//   d score / d o = sum z_A O R_X(i + 1, j) + (z_A + z_X) O R_Y(i, j + 1)   (edges into the item)
//   d score / d e = sum over alignments of their gap cells, less d o: the rows and columns an
//     alignment spans, less twice its matches (d S), each weighted by its probability: local,
//     (i + j) at the ends (z_A seed) less (i + j - 2) at the starts (E 2^-K R_A, the cell's 1);
//     global, m + n.
// Y is not kept: d e comes from the spans. Global's boundary runs (row 0 and column 0, from A(0,
// 0) = 1) add to d o: a row-0 run ends by the diagonal into (1, j), j >= 2 (d S(1, j), one open);
// a column-0 run at row i by the diagonal into (i + 1, 1) (one open) or by a turn into Y(i, 1)
// (two), each X(i, 0) times its adjoint.
//
// Refused (the log-space saving forward and adjoint take them, as linear_adjoint.cuh's): the
// forward's rules (affine_forward.cuh; docs/design.md, "Refusal rules"), and, local max, rule
// "tie": another cell's A within kTieMargin (2^-20) of the largest (float32's rounding could move
// the argmax, and d S with it).
#pragma once

#include <climits>

#include "affine_forward.cuh"
#include "linear_adjoint.cuh"

namespace softalign {
namespace stripes {
namespace scaled {

constexpr float kTieMargin = 0x1p-20f;  // rule tie: another A within this fraction of the largest

// One warp a block. Its shared memory: each item's scores (DenseScores; E after the forward, d S
// after the reverse), each item's kept A's and X's, and every chunk's k of each lane's rows, as
// 16-bit integers.
template <int G, int R>
struct AffineFused {
  using Sw = Sweep<false, G, R, kSteps>;
  using Sh = typename Sw::Sh;
  static constexpr int kChunks = (kKeepCols + G + Sw::kW - 1) / Sw::kW;
  static constexpr int kScoreFloats = Sh::kGroups * kDenseItem;
  static constexpr int kPlaneFloats = Sh::kGroups * kKeepItem;
  static constexpr int kWarpFloats = kScoreFloats + 2 * kPlaneFloats + kChunks * R * 32 / 2;
};

// A lane's total, local soft, as z 2^k with z in [1, 2) (0 and k = -1000 where it is 0): two
// lanes' totals near 2^127.5 at one exponent would sum to inf (hazard "merge").
__device__ __forceinline__ float lane_mantissa(float total, int top, int& k) {
  if (!(total > 0.f && total < INFINITY)) {
    k = -1000;
    return total;
  }
  int e;
  const float f = frexpf(total, &e);  // total = f 2^e, f in [0.5, 1)
  k = top + e - 1;
  return 2.f * f;
}

template <int G, int R, Ends kEnds>
__global__ void __launch_bounds__(32)
    affine_forward_backward_kernel(ProblemView<float> v, GradsView<float> gv, int64_t B,
                                   const float* grad, float* score, int* fallback) {
  using Fu = AffineFused<G, R>;
  using Sw = typename Fu::Sw;
  using Sh = typename Fu::Sh;
  constexpr int kW = Sw::kW, kGroups = Sh::kGroups;
  static_assert(G * R == 32, "an item's rows in one stripe");
  static_assert(kW == DenseScores::kSlabCols, "a chunk of steps waits for a slab of columns");
  constexpr bool kLocal = is_local(kEnds), kSoft = kEnds == Ends::kSoft;
  constexpr bool kMax = kEnds == Ends::kMax;
  __shared__ __align__(16) float smem[Fu::kWarpFloats];  // 16-byte copies in and out

  FusedItem<G, kGroups> item;
  const int lane_id = item.lane_id, grp = item.grp, l = item.l;
  const int64_t b = item.b;
  dp::Config<float> c = v.config;
  c.local = kLocal;
  const float t = c.temperature, scale = dp::device::exp2_scale(t);
  const int64_t N = v.N;

  float o_c = 0.f, e_c = 0.f;
  item.take(v, B, grad, [&](const dp::Item<float>& it) {
    o_c = it.open.at(1, 1) * scale;
    e_c = it.extend.at(1, 1) * scale;
    // rule gap (NaN too)
    return fabsf(o_c) <= float(gap_bound(kW)) && fabsf(e_c) <= float(gap_bound(kW));
  });
  const int m = item.m, n = item.n;
  bool& bad = item.bad;
  o_c = bad ? 0.f : o_c;
  e_c = bad ? 0.f : e_c;
  const float O = dp::device::ex2(o_c), F = dp::device::ex2(e_c);
  const float* scores = item.scores(v);
  float* grads = item.grads(v, gv);
  const int steps = item.steps();
  if (steps == 0) {  // no item taken
    item.refuse(fallback);
    return;
  }

  float* const dense = smem + grp * kDenseItem;  // the item's S, then E, then d S
  float* const kept_a = smem + Fu::kScoreFloats + grp * kKeepItem;
  float* const kept_x = kept_a + Fu::kPlaneFloats;
  int16_t* const kept_k =
      reinterpret_cast<int16_t*>(smem + Fu::kScoreFloats + 2 * Fu::kPlaneFloats) + lane_id;
  const int first_row = l * R + 1;
  const int rows_inside = min(max(m - l * R, 0), R);
  DenseScores::load<G>(dense, scores, m, n, N, l);  // the sweep waits for it slab by slab

  // ---- forward
  AffineRows<R, kLocal> rows(first_row, rows_inside, o_c, e_c, O, F);
  AffineKeepCells<R> keep{kept_a, kept_x, kept_k, {}, 0.f};
#pragma unroll
  for (int r = 0; r < R; ++r) keep.best_j[r] = -1;
  float final_value = 0.f;
  bool has_final = false;
  DenseScores src{dense + (first_row - 1) * kKeepCols};
  OneStripe stripe;
  affine_sweep<G, R, kEnds>(src, m, n, o_c, e_c, O, F, scale, t, steps, l, rows, bad,
                            final_value, has_final, keep, stripe);
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");  // short items: slabs the sweep never read
  bad |= m > 0 && !(rows.xmin >= kScoreFloor);  // rule score
  __syncwarp();  // every cell kept

  // The score, and where the reverse starts: local soft, Z* = z* 2^K* (1 + sum A); local max,
  // the first maximal cell (end_i, end_j) (none where the empty alignment wins); global, (m, n).
  float item_score;
  float total_z = 1.f;
  int total_k = 0;
  int end_i = 0, end_j = 0;
  float seed_z = 0.f;  // local max: 1 / z_A at the end cell; global: 1 / z_D there
  float best_z = 0.f;  // local max: z_A there, and its k (rule tie)
  int best_k = 0;
  if constexpr (!kLocal) {
    const int end_lane = max(m - 1, 0) / R;  // the lane of row m (every lane of an empty item: 0)
    item_score = __shfl_sync(kFullMask, final_value, end_lane, G);
    end_i = m;
    end_j = n;
    seed_z = has_final ? 1.f / keep.end_d : 0.f;  // on row m's lane (elsewhere no inf to mask)
    bad |= has_final && fabsf(final_value) < t * dp::device::kLn2 * kNearExponent;  // rule near
  } else {
    int top;
    const float total = rows_total<R, kSoft>(rows, top);
    bad |= !(total < INFINITY);  // NaN too
    if constexpr (kSoft) {
      int lane_k;
      const float lane_z = lane_mantissa(total, top, lane_k);
      total_k = max(group_max<G>(lane_k), -100);  // every lane 0: the empty alignment alone
      total_z = scale_down(lane_z, lane_k - total_k);
#pragma unroll
      for (int delta = G / 2; delta >= 1; delta /= 2) {
        total_z += __shfl_xor_sync(kFullMask, total_z, delta, G);
      }
      total_z += pow2_to_subnormal(-total_k);  // the empty alignment
      bad |= !(total_z < INFINITY);
      item_score = log_space(total_z, total_k, t);
    } else {
      const End end = group_argmax<G>(rows, keep.best_j, top, first_row, c, t);
      item_score = end.best;
      end_i = end.i;
      end_j = end.j;
      // z_A at the end cell and the k of the chunk that computed it, from its lane
      const int end_lane = max(end_i - 1, 0) / R;
      if (l == end_lane && end_i > 0) {
        best_z = kept_a[(end_i - 1) * kKeepWidth + end_j];
        best_k = kept_k[(((end_j + l) / kW) * R + (end_i - first_row)) * 32];
      }
      best_z = __shfl_sync(kFullMask, best_z, end_lane, G);
      best_k = __shfl_sync(kFullMask, best_k, end_lane, G);
      seed_z = 1.f / best_z;
    }
    const float log2_end =
        kSoft ? dp::device::lg2(total_z) + float(total_k) : item_score / (t * dp::device::kLn2);
    const bool refuses = local_end_refuses<G, kSoft, true>(rows, log2_end);  // every lane
    bad |= m > 0 && refuses;
  }

  // The seeds: local max, 1 / z_A at the end cell (on its lane); global, 1 / z_D there (of A,
  // X and Y); local soft, 2^(K(i, j) - K*) / z* at every cell (per chunk, below). Not times
  // grad: z R <= 1 is what keeps R in range.
  int seed_j[R];
#pragma unroll
  for (int r = 0; r < R; ++r) seed_j[r] = !kSoft && first_row + r == end_i ? end_j : -1;
  const float inv_total = kSoft ? 1.f / total_z : 0.f;
  const float tie_z = best_z * (1.f - kTieMargin);
  bool tie = false;

  // ---- reverse: the forward's steps backwards, chunk by chunk, E from the forward's sweep
  const float* const a_rows = kept_a + (first_row - 1) * kKeepWidth;  // row r at r * kKeepWidth
  const float* const x_rows = kept_x + (first_row - 1) * kKeepWidth;
  // Carried from column j + 1 (the step before), each row r's: O R_Y and F R_Y (its own scale);
  // E R_A in row r - 1's scale (the diagonal of the row above).
  float next_OY[R], next_FY[R], next_EA[R];
  float back_next[R];  // 2^-e of the chunk after this one (its k less this one's)
#pragma unroll
  for (int r = 0; r < R; ++r) next_OY[r] = next_FY[r] = next_EA[r] = 0.f, back_next[r] = 1.f;
  // From lane l + 1's first row, in this lane's last row's scale: O R_X and F R_X at column j
  // (`below_OX`, `below_FX`), E R_A at j + 1 (`below_diag`) and at j (`below_diag_next`).
  float below_OX = 0.f, below_FX = 0.f, below_diag = 0.f, below_diag_next = 0.f;
  // d score / d o, the spans (i + j) ends - (i + j - 2) starts, and sum d S
  float d_open = 0.f, spans = 0.f, sum_dS = 0.f;

  const int last_chunk = (steps - 1) / kW;
  for (int kk = last_chunk; kk >= 0; --kk) {
    // What the reverse carries from the chunk after, into this chunk's scales (weights first).
#pragma unroll
    for (int r = 0; r < R; ++r) {
      next_OY[r] *= back_next[r];
      next_FY[r] *= back_next[r];
      next_EA[r] *= back_next[r == 0 ? 0 : r - 1];
    }
    below_OX *= back_next[R - 1];
    below_FX *= back_next[R - 1];
    below_diag *= back_next[R - 1];
    below_diag_next *= back_next[R - 1];
    // This chunk's scales, as the forward had them (lane 0's factor from above is unused: its
    // row above is DP row 0, all 0).
    const ChunkScales<G, R, kSoft> scales(kept_k, kk, l, total_k, inv_total);
    float one[R], tie_at[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      one[r] = pow2_to_subnormal(-scales.k[r]);  // the cell's 1, local's start
      // rule tie: the largest A in this row's scale, less kTieMargin (never 0: A's of 0 tie
      // with nothing)
      tie_at[r] = !kMax || end_i == 0 ? INFINITY
                                      : fmaxf(ldexpf(tie_z, best_k - scales.k[r]), 0x1p-149f);
    }
    const int j0 = kk * kW - l;
    const bool interior = Sw::chunk_inside(m, n, 0, kk);
    const auto sweep_back = [&](auto inside_constant) {
      constexpr bool kInside = decltype(inside_constant)::value;
#pragma unroll
      for (int w = kW - 1; w >= 0; --w) {
        const int j = j0 + w;
        const bool column_inside = kInside || unsigned(j - 1) < unsigned(n);
        // Kept column j (any valid one outside the item: its cells are not inside).
        const int jk = kInside ? j : min(max(j, 0), kKeepCols);
        float OX = below_OX, FX = below_FX;  // O R_X, F R_X of (i + 1, j) in row r's scale
        float now_EA[R];
#pragma unroll
        for (int r = R - 1; r >= 0; --r) {
          const int i = first_row + r;
          const float E = src.template at<kInside>(r, w, j);
          const bool inside = kInside || (column_inside && r < rows_inside);
          const float diag = r == R - 1 ? below_diag : next_EA[r + 1];
          const float seed = kSoft ? scales.seed_soft[r] : (j == seed_j[r] ? seed_z : 0.f);
          const float seed_d = kLocal ? 0.f : seed;
          const float RA =
              inside ? SOFTALIGN_PROB_AFFINE_ADJOINT_A(seed, diag, OX, next_OY[r]) : 0.f;
          const float RX =
              inside ? SOFTALIGN_PROB_AFFINE_ADJOINT_X(seed_d, diag, FX, next_OY[r]) : 0.f;
          const float RY = inside ? SOFTALIGN_PROB_AFFINE_ADJOINT_Y(seed_d, diag, next_FY[r]) : 0.f;
          const float za = a_rows[r * kKeepWidth + jk];
          // X of column n (local: of row m too) reaches no A inside: the forward never read it
          // (dead), and it may be inf there
          const float zx = (!kLocal || i < m) && j < n ? x_rows[r * kKeepWidth + jk] : 0.f;
          const float dS = inside ? za * RA : 0.f;
          const float ER = E * RA;
          if (kInside || unsigned(j - 1) < unsigned(kKeepCols)) {
            src.rows[r * kKeepCols + j - 1] = dS;
          }
          // d o: the edges into (i + 1, j) (i < m) and (i, j + 1) (j < n), A and X apart (their
          // sum may overflow)
          // (OX is 0 where i = m and O R_Y where j = n: their cells' adjoints are masked; z_A
          // is finite inside a taken item, z_X masked where dead.)
          const float OY = next_OY[r];
          d_open = inside ? fmaf(za, OX, fmaf(za, OY, fmaf(zx, OY, d_open))) : d_open;
          sum_dS += dS;
          if constexpr (kLocal) {
            const float span = fmaf(za * seed, float(i + j), -(ER * one[r]) * float(i + j - 2));
            spans += inside ? span : 0.f;
          } else {
            d_open += inside && i == 1 && j >= 2 ? dS : 0.f;  // a row-0 run ends
            if constexpr (!kInside) {  // a column-0 run ends: into (i + 1, 1) or Y(i, 1)
              const float x0 = AffineRows<R, false>::boundary_d(i, scales.k[r], o_c, e_c);
              const bool ends = j == 0 && r < rows_inside;
              d_open += ends ? x0 * diag + 2.f * (x0 * next_OY[r]) : 0.f;
            }
          }
          if constexpr (kMax) {
            tie |= inside && za >= tie_at[r] && !(i == end_i && j == end_j);
          }
          // To the row above: E R_A (its diagonal, next step), O R_X and F R_X (this step), in
          // its scale; to this row's next step (column j - 1): O R_Y, F R_Y.
          now_EA[r] = ER * scales.from_above[r];
          OX = (O * RX) * scales.from_above[r];
          FX = (F * RX) * scales.from_above[r];
          next_OY[r] = O * RY;
          next_FY[r] = F * RY;
        }
#pragma unroll
        for (int r = 0; r < R; ++r) next_EA[r] = now_EA[r];
        // To lane l - 1's last row: this lane's first row's, in its scale.
        const float ox_up = __shfl_down_sync(kFullMask, OX, 1, G);
        const float fx_up = __shfl_down_sync(kFullMask, FX, 1, G);
        const float diag_up = __shfl_down_sync(kFullMask, now_EA[0], 1, G);
        below_OX = l == G - 1 ? 0.f : ox_up;
        below_FX = l == G - 1 ? 0.f : fx_up;
        below_diag = below_diag_next;
        below_diag_next = l == G - 1 ? 0.f : diag_up;
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
  bad |= tie;
  const bool taken = item.keeps_results(fallback);
  if (taken && l == 0) score[b] = item_score;
  __syncwarp();
  write_out<G>(grads, dense, item.g, taken ? m : 0, n, N, l);

  // d score / d o and d e of the item, summed over the group in a fixed order.
#pragma unroll
  for (int delta = G / 2; delta >= 1; delta /= 2) {
    d_open += __shfl_xor_sync(kFullMask, d_open, delta, G);
    spans += __shfl_xor_sync(kFullMask, spans, delta, G);
    sum_dS += __shfl_xor_sync(kFullMask, sum_dS, delta, G);
  }
  if constexpr (!kLocal) spans = float(m + n);
  const float d_extend = (spans - 2.f * sum_dS) - d_open;
  if (taken && l == 0) {
    gv.open[b * gv.open_sb] = d_open * item.g;
    gv.extend[b * gv.extend_sb] = d_extend * item.g;
  }
}

}  // namespace scaled
}  // namespace stripes
}  // namespace softalign
