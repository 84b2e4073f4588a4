// The affine forward without grad at t > 0 in probability space, of items one stripe tall (M <= 32:
// a half warp an item with 2 rows a lane, or, B <= 1024, a warp an item with a row a lane):
// linear_forward.cuh's forward for the affine gap model, on the same lanes, tiles, chunks and
// exponents (its header says how a row keeps z 2^k, and why nothing is checked per step). The
// design, its refusal rules and their argument:
// docs/design.md, "Probability space: the scaled cell" and "Refusal rules" (the rules were fuzzed,
// in a float32 emulation of this file, against the CPU backend in float64).
//
// With E = exp(s / t), O = exp(o / t), F = exp(e / t), the three states of
// docs/spec.md, "Affine gap" become (prob_space.h)
//   A = E (1 [local] + D_diag)   X = U_up   Y = L_left
//   D = A + X + Y                U = O A + F X           L = O (A + X) + F Y
// (D: the row below's diagonal; U: the row below's X; L: the next column's Y). A row's three
// states share its k, renormalised on D at each chunk's start; a lane hands down D and U of its
// last row (two shuffles a step) and keeps L. One exp2 a cell (E), about 16 FP operations.
// Boundaries: local, every state of row 0 and column 0 is 0; global, A(0, 0) = 1, X(i, 0) =
// O F^(i - 1), Y(0, j) = O F^(j - 1), the rest 0. Ends: local t ln(1 + sum A) (soft) or t ln
// max(1, A) (max); global t ln D(m, n).
//
// An item is refused (and swept again in log space by the same warp) when (the rules'
// names; each value's rounding stays relative unless it is subnormal in its row's scale):
//  gap    max(|o|, |e|) log2(e) / t beyond gap_bound(kW) (or NaN): a row's D falls by at most
//         min(O, F) a column, so no D of a chunk is below 2^-96 of its start;
//  score  some score inside with s log2(e) / t < -126 (ex2.ftz would flush E, which may be the
//         only way into a row; -inf too);
//  vgap   some U(i, j), i < m, below 2^-100 in its row's scale (U has no lower bound against the
//         row's D: Y never feeds X);
//  loses  neighbouring rows' k more than kFactorBound apart, or (local) the row above's more than
//         126 below (its factor would be clamped), or (global) the row above's D could leave
//         float's normal range in this row's scale within the chunk, or a row of the item
//         whose D reached 2^127 by a chunk's start (it keeps its k, and the factor below it
//         would be clamped);
//  diag   (global) the first step's diagonal not normal after the chunk's rescale (unless 0);
//  one    (local) some row inside past k = 120 (its 1 is dropped past 126, d's subnormal
//         rounding enters A) unless what that can lose is 2^-24 of the end;
//  end    local: the sum or max not finite, or a row's k more than kEndExponent above log2 of
//         the end (A's subnormal rounding against the end; only gaps that pay reach it);
//         global: D(m, n) outside [kTiny, inf);
//  near   the end's value (local max: the largest A, unclamped; local soft: 1 + sum A; global:
//         D(m, n)) within 2^(+-1/4) of 1: its score t ln(value), below t ln(2) / 4 in size, would
//         carry the value's rounding, t 2^-24 or more, whole (H100: local max at
//         t = 1e4 off by up to 0.0028 on small items; at t = 1e38 a (1, 1) item's 0.5 gave 0).
#pragma once

#include <climits>
#include <type_traits>

#include "linear_forward.cuh"

namespace softalign {
namespace stripes {
namespace scaled {

constexpr float kVgapFloor = 0x1p-100f;  // rule vgap: U at least this in its row's scale
constexpr float kScoreFloor = -126.f;    // rule score: s log2(e) / t at least this
constexpr int kEndExponent = 100;        // rule end: k - log2(end) at most this
constexpr int kOneExponent = 120;        // rule one: k beyond this drops or blurs the 1
constexpr float kNearExponent = 0.25f;   // rule near: |log2 of the end's value| at least this

// A lane's R rows between steps, affine: Rows' z is the row's D at the column just done (the
// next row's diagonal), k the exponent of all three states; y its L (the next column's Y); u the
// last row's U (the lane below's X). Rows::renormalize brings D to [1, 2) and its one, end and
// factors along; y and u follow here.
template <int R, bool kLocal>
struct AffineRows : Rows<R, kLocal, false> {  // local D may be as small as 2^-126: no 1 in it
  using Base = Rows<R, kLocal, false>;
  float y[R];
  float u;
  // The refusal rules' running extremes: s log2(e) / t of the lane's cells inside (score, one)
  // and, local, the largest k of its rows inside at any chunk that has cells of theirs ahead.
  float xmin = INFINITY, xmax = -INFINITY;
  int kmax;

  // log2 X(i, 0) = log2(O F^(i - 1)) (global): the row's k is its floor, so that column 0's
  // values (boundary_d) lie in [1, 2).
  __device__ static float log2_column_zero(int i, float o_c, float e_c) {
    return fmaf(float(i - 1), e_c, o_c);
  }
  // D(i, 0) = X(i, 0) in the row's scale, held below 2 (linear_forward.cuh's column_zero says why).
  __device__ static float boundary_d(int i, int k, float o_c, float e_c) {
    return kLocal ? 0.f
                  : fminf(dp::device::ex2(log2_column_zero(i, o_c, e_c) - float(k)),
                          0x1.fffffep0f);
  }

  __device__ AffineRows(int first_row, int rows_inside, float o_c, float e_c, float O, float F)
      : Base(first_row, 0.f) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int i = first_row + r;
      this->k[r] = this->ka[r] = kLocal ? 0 : int(floorf(log2_column_zero(i, o_c, e_c)));
      this->z[r] = boundary_d(i, this->k[r], o_c, e_c);
      y[r] = O * this->z[r];  // Y(i, 1) = O X(i, 0)
      if (r == R - 1) u = F * this->z[r];  // X(i + 1, 0), as the row below takes it
    }
    this->diag = 0.f;
    this->set_factors();
    kmax = rows_inside > 0 ? 0 : INT_MIN;  // local: k starts at 0
  }

  // Rows::renormalize, and y, u to the rows' new k; kmax (cells of the rows inside ahead).
  __device__ void renormalize(bool cells_ahead, bool ends_open, int rows_inside, int below,
                              bool& bad) {
    int before[R];
#pragma unroll
    for (int r = 0; r < R; ++r) before[r] = this->k[r];
    Base::renormalize(cells_ahead, ends_open, rows_inside, below, bad);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      y[r] *= pow2(before[r] - this->k[r]);  // a normal z's exponent: within [-126, 126]
      if constexpr (kLocal) {
        kmax = cells_ahead && r < rows_inside ? max(kmax, this->k[r]) : kmax;
      }
    }
    u *= pow2(before[R - 1] - this->k[R - 1]);
  }
};

// What the fused forward + adjoint keeps of an item of one stripe (affine_adjoint.cuh):
// each cell's A and X in the scale of the chunk that computed it (two planes in KeepCells'
// layout: row i, column j at (i - 1) * kKeepWidth + j), E in the score's place (DenseScores),
// every row's k at every chunk, (local max) each row's first maximal column and (global) D(m,
// n) in its row's scale, on the lane that has it.
template <int R>
struct AffineKeepCells {
  float* a;    // the group's item's A's
  float* x;    // its X's
  int16_t* k;  // the lane's: row r's k in chunk kk at (kk * R + r) * 32
  int best_j[R];
  float end_d;
};

// The sweep of a warp's items (one stripe), or of one stripe of a warp's item (RingStripe<2>: items
// of several stripes), affine, in probability space (linear_forward.cuh's sweep for the affine
// cell): leaves each lane's rows (their ends, local) and the rules' extremes in `rows`, global the
// value at (m, n) in `final_value` of the lane that has it; sets `bad` where the item is refused by
// the rules checked during the sweep (loses, diag, vgap, global end).
//
// A stripe below the first (docs/design.md, "Probability space: the scaled cell"): its
// lane 0 is a lane whose lane above is the stripe above's last, D and U of that row coming
// through the ring as H, a chunk's columns at a time (lane q: column kk kW + q), each brought to
// lane 0's scale (subnormal below 2^-126, as a factor's product) and handed to lane 0; the
// exponent of the chunk's first D stands for the lane above's k in rule loses. Its last lane
// leaves D and U of its row as H, the chunk's columns at the chunk's end.
template <int G, int R, Ends kEnds, class Scores, class Keep, class Stripe>
__device__ __forceinline__ void affine_sweep(Scores& src, int m, int n, float o_c, float e_c,
                                             float O, float F, float scale, float t, int steps,
                                             int l, AffineRows<R, is_local(kEnds)>& rows,
                                             bool& bad, float& final_value, bool& has_final,
                                             Keep& keep, Stripe& stripe) {
  using Sw = Sweep<false, G, R, Scores::kStepsPerChunk>;
  constexpr int kW = Sw::kW;
  constexpr bool kLocal = is_local(kEnds), kSoft = kEnds == Ends::kSoft;
  constexpr bool kStacked = kIsStacked<Stripe>;
  constexpr bool kKeeps = !std::is_same_v<Keep, KeepNothing>;
  static_assert(!kStacked || (G == 32 && kW <= G), "a warp a stripe, a lane a chunk's column");
  static_assert(!kKeeps || !kStacked, "kept: items of one stripe");
  const int first_row = stripe.i0 + l * R + 1;
  const int rows_inside = min(max(m - stripe.i0 - l * R, 0), R);
  const int rows_before_m = min(max(m - 1 - stripe.i0 - l * R, 0), R);  // i < m (rule vgap)
  bool reads_ring = false;
  [[maybe_unused]] float above[2][kW];  // lane 0's row above (D, U), this chunk, its scale
  [[maybe_unused]] float last[2][kW];   // lane G - 1's last row (D, U), this chunk, its k
  if constexpr (kStacked) {
    reads_ring = stripe.in != nullptr && l == 0;
    stripe.template request<kW>(0, n);
  }
  // Rows::loses: local rows only that the factor from the row above is not clamped (rule one bounds
  // what a subnormal diagonal or a dropped 1 costs; a clamped factor of 2^-126 for 2^-130 made A
  // 8.5 times too large: a row of k = 60 under one of k = -70); global ones that the row above's D,
  // falling by at most min(O, F) a column, stays normal through the chunk.
  const int below = kLocal ? 126 : 126 - kW * int(ceilf(fmaxf(fabsf(o_c), fabsf(e_c))));
  // Column 0 (and before it: lanes of G > kW reach it over several chunks), in each row's
  // scale: z of [1, 2) (global) or 0, so that a renormalisation keeps the row's k.
  float zero_d[R], zero_l[R], zero_u[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    zero_d[r] = AffineRows<R, kLocal>::boundary_d(first_row + r, rows.k[r], o_c, e_c);
    zero_l[r] = O * zero_d[r];
    zero_u[r] = F * zero_d[r];
  }
  float up_d = 0.f, up_u = 0.f, from_lane_above = 1.f;  // the lane above's last row, its factor

  src.first();
  for (int kk = 0; kk * kW < steps; ++kk) {
    __syncwarp();  // every lane is done with the chunk before
    const bool next = (kk + 1) * kW < steps;
    src.begin_chunk(kk, next);
    const int j0 = kk * kW - l;  // this lane's column at the chunk's first step
    const bool cells_ahead = rows_inside > 0 && j0 + kW - 1 >= 1 && j0 <= n;
    if (kk > 0) {
      const float diag_before = rows.diag;
      rows.renormalize(cells_ahead, j0 <= n, rows_inside, below, bad);
      // A row of the item whose D reached 2^127 keeps its k (Rows::renormalize leaves it): the
      // factors from it to the rows below would be clamped (rule loses; the emulation's fuzz,
      // seed 31: a row's D at 2^161 in k = 34, the row below's factor 2^-126 for 2^-128).
#pragma unroll
      for (int r = 0; r < R; ++r) bad |= r < rows_inside && j0 <= n + 1 && !(rows.z[r] < 0x1p127f);
      // The row above at column j0 - 1, the first step's diagonal (rule diag); local rows take
      // a subnormal one under rule one.
      if constexpr (!kLocal) {
        bad |= cells_ahead && j0 >= 1 && !(rows.diag >= 0x1p-126f || diag_before == 0.f);
      }
    }
    if constexpr (kKeeps) {
#pragma unroll
      for (int r = 0; r < R; ++r) keep.k[(kk * R + r) * 32] = int16_t(rows.k[r]);
    }
    up_d = __shfl_up_sync(kFullMask, rows.z[R - 1], 1, G);
    up_u = __shfl_up_sync(kFullMask, rows.u, 1, G);
    const int k_above = __shfl_up_sync(kFullMask, rows.k[R - 1], 1, G);
    from_lane_above = factor(k_above - rows.k[0]);
    // Lane 0's row above is DP row 0 (or the ring's, below): local all 0 (no factor to lose);
    // global D(0, j0 - 1) = O F^(j0 - 2) (j0 >= 2), 1 at column 0.
    if constexpr (kLocal) {
      bad |= cells_ahead && l > 0 && rows.loses(k_above - rows.k[0], rows.k[0], below);
    } else {
      const float row0_c = j0 - 1 >= 1 ? fmaf(float(j0 - 2), e_c, o_c) : 0.f;
      const int k_row0 = int(floorf(row0_c));
      bad |= cells_ahead && !reads_ring &&
             rows.loses((l == 0 ? k_row0 : k_above) - rows.k[0], rows.k[0], below);
    }
    if constexpr (kStacked) {
      // This chunk's columns of the row above, D and U as H (lane q: column kk kW + q), in lane
      // 0's scale, then to lane 0. Rule loses on the exponent of the chunk's first D (lane 0's),
      // where it is not 0 (local column 0); clamped: +inf (refused), NaN (the ends refuse it).
      const auto h = stripe.template take<kW>(kk * kW, n);
      stripe.template request<kW>((kk + 1) * kW, n);
      const float k_lane0 = float(__shfl_sync(kFullMask, rows.k[0], 0));
      const float first = floorf(h.v[0] * scale);
      bad |= reads_ring && cells_ahead && first > -INFINITY &&
             rows.loses(int(fminf(first, 1e6f)) - rows.k[0], rows.k[0], below);
      const bool column = stripe.lane < kW && kk * kW + stripe.lane <= n;
      // Subnormal in lane 0's scale where a lane above's would be (the factor's product keeps
      // them; rules one and vgap count on it): a flush lost up to 2^(k0 - 126) a cell.
      stripe.template share_with_lane0<kW>(
          {column ? ex2_to_subnormal(fmaf(h.v[0], scale, -k_lane0)) : 0.f,
           column ? ex2_to_subnormal(fmaf(h.v[1], scale, -k_lane0)) : 0.f},
          above);
    }
    const float o_k0 = o_c - float(rows.k[0]);  // DP row 0 in row 0's scale
    float umin[R];  // rule vgap, a row at a time: no select a cell inside the chunk
#pragma unroll
    for (int r = 0; r < R; ++r) umin[r] = INFINITY;
    src.wait(kk, next);
    __syncwarp();  // and every lane's copies
    const bool interior = Sw::chunk_inside(m, n, stripe.i0, kk);
    const auto sweep_chunk = [&](auto inside_constant) {
      constexpr bool kInside = decltype(inside_constant)::value;
#pragma unroll
      for (int w = 0; w < kW; ++w) {
        const int j = j0 + w;  // this lane's column at this step
        // DP row 0 at column j (lane 0's next diagonal): global O F^(j - 1), or 1 at j = 0.
        const float row0_d =
            kLocal ? 0.f
                   : dp::device::ex2(j >= 1 ? fmaf(float(j - 1), e_c, o_k0) : -float(rows.k[0]));
        float u = l == 0 ? 0.f : up_u * from_lane_above;  // X of the lane's first row
        float d = rows.diag;
        rows.diag = l == 0 ? row0_d : up_d * from_lane_above;
        if constexpr (kStacked) {
          u = reads_ring ? above[1][w] : u;
          rows.diag = reads_ring ? above[0][w] : rows.diag;
        }
        [[maybe_unused]] const bool column_inside = kInside || unsigned(j - 1) < unsigned(n);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const float x = src.template at<kInside>(r, w, j) * scale;
          const float E = dp::device::ex2(x);  // 1 outside the item (its tile holds 0)
          const float a = dp::prob::affine_match<kLocal>(E, d, rows.one[r]);
          if constexpr (kKeeps) {  // E in the score's place, A and X (u) of the cell
            const bool kept = kInside || unsigned(j - 1) < unsigned(kKeepCols);
            src.keep_E(r, j, E, kept);
            if (kept) {
              keep.a[(first_row - 1 + r) * kKeepWidth + j] = a;
              keep.x[(first_row - 1 + r) * kKeepWidth + j] = u;
            }
          }
          const dp::prob::AffineOut cell = dp::prob::affine_cell(a, u, rows.y[r], O, F);
          float U = cell.below;
          float D = cell.d;
          float L = cell.right;
          if (!kInside) {
            const bool at0 = j <= 0;
            D = at0 ? zero_d[r] : D;
            L = at0 ? zero_l[r] : L;
            U = at0 ? zero_u[r] : U;
          }
          const bool inside = kInside || (column_inside && r < rows_inside);
          rows.xmin = fminf(rows.xmin, kInside || inside ? x : INFINITY);
          rows.xmax = fmaxf(rows.xmax, kInside || inside ? x : -INFINITY);
          umin[r] = fminf(umin[r], kInside || column_inside ? U : INFINITY);
          if constexpr (kLocal) {  // docs/spec.md, "Score": local ends over A
            const float mine = a * rows.to_acc[r];
            const float add = inside ? mine : 0.f;
            if constexpr (kKeeps && !kSoft) keep.best_j[r] = add > rows.acc[r] ? j : keep.best_j[r];
            rows.acc[r] = kSoft ? rows.acc[r] + add : dp::device::max_nan(rows.acc[r], add);
          }
          const float old = rows.z[r];
          rows.z[r] = D;
          rows.y[r] = L;
          if (r + 1 < R) {
            u = U * rows.from_above[r + 1];
            d = old * rows.from_above[r + 1];
          } else {
            rows.u = U;
          }
        }
        if constexpr (!kLocal) {  // global: smax of the states at (m, n), t ln D
          if (j == n && m >= first_row && m < first_row + R) {
#pragma unroll
            for (int r = 0; r < R; ++r) {
              if (first_row + r == m) {
                bad |= !(rows.z[r] >= kTiny && rows.z[r] < INFINITY);  // NaN too
                final_value = log_space(rows.z[r], rows.k[r], t);
                if constexpr (kKeeps) keep.end_d = rows.z[r];
              }
            }
            has_final = true;
          }
        }
        if constexpr (kStacked) {
          last[0][w] = rows.z[R - 1];
          last[1][w] = rows.u;
        }
        up_d = __shfl_up_sync(kFullMask, rows.z[R - 1], 1, G);  // for the next step
        up_u = __shfl_up_sync(kFullMask, rows.u, 1, G);
      }
    };
    if (interior) {
      sweep_chunk(std::true_type{});
    } else {
      sweep_chunk(std::false_type{});
    }
#pragma unroll
    for (int r = 0; r < R; ++r) bad |= r < rows_before_m && !(umin[r] >= kVgapFloor);
    if constexpr (kStacked) {
      // The chunk's last row (lane G - 1's, at its columns kk kW - (G - 1) + q, in the k it kept
      // through the chunk) as H for the stripe below, column q by lane q; the shuffle of k
      // outside any branch (linear_forward.cuh's sweep says why).
      const auto mine = stripe.template share_from_last_lane<kW>(last, G - 1);
      const float d_mine = mine.v[0], u_mine = mine.v[1];
      const int k_last = __shfl_sync(kFullMask, rows.k[R - 1], G - 1);
      const int j = kk * kW - (G - 1) + stripe.lane;
      if (stripe.leaves_row && stripe.lane < kW && j >= 0 && j <= n) {
        stripe.put(j, {log_space(d_mine, k_last, t), log_space(u_mine, k_last, t)});
      }
    }
  }
}

// The largest of v over the G lanes of a group (float: NaN dropped, as fmaxf drops it).
template <int G, class T>
__device__ __forceinline__ T group_max(T v) {
#pragma unroll
  for (int delta = G / 2; delta >= 1; delta /= 2) {
    const T o = __shfl_xor_sync(kFullMask, v, delta, G);
    if constexpr (std::is_same_v<T, float>) {
      v = fmaxf(v, o);
    } else {
      v = max(v, o);
    }
  }
  return v;
}

// Rules end, one (and kNear: near) of a local item, against log2 of its end (every lane has it).
// Rule near reads local max's largest A before the empty alignment's 0 clamps it. Every lane of
// the warp calls it (its shuffles): `m > 0 && local_end_refuses(...)` hung the warps of an item
// with lengths 0 beside one without.
template <int G, bool kSoft, bool kNear, int R>
__device__ __forceinline__ bool local_end_refuses(const AffineRows<R, true>& rows,
                                                  float log2_end) {
  const int kmax = group_max<G>(rows.kmax);
  const float xmax = group_max<G>(rows.xmax);
  const bool far = !(float(kmax) - log2_end <= float(kEndExponent));  // NaN too
  const bool one = kmax > kOneExponent &&
                   !(xmax + 20.f + float(max(0, kmax - 149)) <= log2_end - 24.f);
  bool near = false;
  if constexpr (kNear) {
    float log2_value = log2_end;
    if constexpr (!kSoft) {
      int top_a;
      const float largest = rows_total<R, false>(rows, top_a);
      log2_value = group_max<G>(dp::device::lg2(largest) + float(top_a));  // -inf if none
    }
    near = fabsf(log2_value) < kNearExponent;
  }
  return far || one || near;
}

// Blocks an SM asked of ptxas (0: none). Local ends with a half warp an item: left to itself it
// took 80 registers and spilled 8 bytes (in the log-space redo: a value kept across the general
// sweep's division calls); asked for 6 blocks (at most 85 registers) it takes 80 and spills
// nothing (nvcc 13, sm_90a). The others spill nothing unasked (global 72 registers,
// a warp an item 72-96; asked for 1 block, some took 128).
constexpr int affine_min_blocks(int G, Ends ends) { return G == 16 && is_local(ends) ? 6 : 0; }

// Items of one stripe (M <= G R), penalties one value an item; the items it refuses the same
// warp sweeps again in log space (keep_or_redo). kStacked: items of several stripes (G = 32, R =
// 1, a warp a stripe, local chunks of kLongSteps; dispatch.cu takes it at t >=
// kLongStepsMinTemperature), whose refused items a log-space launch takes again (flagged in
// `redo`, as linear_forward.cuh's stacked forward flags them).
template <int G, int R, Ends kEnds, bool kStacked = false>
__global__ void __launch_bounds__(32 * kWarpsPerBlock, affine_min_blocks(G, kEnds))
    affine_forward_kernel(ProblemView<float> v, int64_t B, Geometry geo, Workspace ws,
                          float* score, int* redo) {
  // Items of several stripes: chunks of kLongSteps, local; global rows far below the diagonal
  // rise past float's range within 16 columns (in emulation: 256 x 256 at
  // t = 0.5, 21 of 32 refused; with chunks of 8 none), so global ones take kSteps.
  constexpr int kW = kStacked && is_local(kEnds) ? kLongSteps : kSteps;
  using Sh = typename Sweep<false, G, R, kW>::Sh;
  constexpr int kGroups = Sh::kGroups, kRows = Sh::kRows;
  static_assert(Sh::kBuffers == 2, "the next chunk's scores load while this one is swept");
  static_assert(kW * gap_bound(kW) <= 96, "no D of a chunk below 2^-96 (the top of the file)");
  static_assert(!kStacked || (Sh::kStacked && R == 1), "items of several stripes: a row a lane");
  constexpr bool kLocal = is_local(kEnds), kSoft = kEnds == Ends::kSoft;
  using Stripe = std::conditional_t<kStacked, RingStripe<2>, OneStripe>;
  // The warp's shared memory: this sweep's tiles, or the log-space sweep's (forward_unit) for the
  // items of one stripe it refuses.
  using LogSh = typename Sweep<true, G, R, forward_chunk_steps(true, G)>::Sh;
  constexpr int kSmemFloats =
      Sh::kWarpFloats > LogSh::kWarpFloats ? Sh::kWarpFloats : LogSh::kWarpFloats;
  __shared__ float smem[kWarpsPerBlock][kSmemFloats];

  const int warp = threadIdx.x / 32, lane_id = threadIdx.x % 32;
  if (int64_t(blockIdx.x) * kWarpsPerBlock + warp >= geo.units) return;  // the whole warp
  const int grp = lane_id / G, l = lane_id % G;
  const int64_t unit = unit_of_warp(warp, ws);
  const int stripe_index = kStacked ? int(unit % geo.stripes) : 0;  // else geo.stripes = 1
  const int64_t b = (kStacked ? unit / geo.stripes : unit) * kGroups + grp;
  const int i0 = stripe_index * kRows;
  dp::Config<float> c = v.config;
  c.local = kLocal;  // a constant from here on
  const float t = c.temperature, scale = dp::device::exp2_scale(t);  // exp(x / t) = exp2(x scale)

  dp::Item<float> it;
  int m = 0, n = 0, item_stripes = 0;
  float o_c = 0.f, e_c = 0.f;  // o log2(e) / t, e log2(e) / t
  bool bad = false;
  if (b < B) {
    it = v.item(b);
    item_stripes = (it.m + kRows - 1) / kRows;
    if (it.m == 0 || it.n == 0) {  // only boundaries: the general sweep has them
      if (stripe_index == 0 && l == 0) forward_boundary_item<true>(it, b, c, ws, score);
    } else if (!kStacked || stripe_index < item_stripes) {
      m = it.m;
      n = it.n;
      o_c = it.open.at(1, 1) * scale;
      e_c = it.extend.at(1, 1) * scale;
      // Rule gap (NaN too: two tests, as fmaxf would drop a NaN; every stripe of an item alike)
      bad = !(fabsf(o_c) <= float(gap_bound(kW)) && fabsf(e_c) <= float(gap_bound(kW)));
      o_c = bad ? 0.f : o_c;
      e_c = bad ? 0.f : e_c;
    }
  }
  const float O = dp::device::ex2(o_c), F = dp::device::ex2(e_c);
  const float* scores = m > 0 ? it.scores : v.scores;  // a valid address for every lane
  // Items refused by their gaps take no steps of their own; a warp of only such items (or
  // empty ones) goes straight to the log-space sweep.
  const int steps = __reduce_max_sync(kFullMask, unsigned(m > 0 && !bad ? n + G : 0));
  __syncwarp();

  float* const warp_smem = &smem[warp][0];
  float final_value = 0.f;
  bool has_final = false;
  End end;
  if (steps > 0) {
    const int rows_inside = min(max(m - i0 - l * R, 0), R);
    AffineRows<R, kLocal> rows(i0 + l * R + 1, rows_inside, o_c, e_c, O, F);
    TileScores<G, R, kW> src{warp_smem, scores, m, n, l, grp, i0, v.N};
    Stripe stripe{};
    if constexpr (kStacked) {
      const bool reads_row = stripe_index > 0;
      stripe.i0 = i0;
      // A slot of two planes (D, U; ring_slot<1>'s layout), inside the affine workspace's.
      stripe.in = reads_row ? ring_slot<1>(ws, geo, b, (stripe_index + 1) % 2) : nullptr;
      stripe.out = ring_slot<1>(ws, geo, b, stripe_index % 2);
      stripe.plane = geo.width;
      stripe.leaves_row = stripe_index + 1 < item_stripes;
      stripe.tag = stripe_index + 1;  // the stripe above wrote `stripe_index`
      stripe.lane = l;
      __shared__ __align__(16) float exchange[kWarpsPerBlock][Stripe::kExchangeFloats];
      stripe.exchange = &exchange[warp][0];
    }
    KeepNothing keep;
    affine_sweep<G, R, kEnds>(src, m, n, o_c, e_c, O, F, scale, t, steps, l, rows, bad,
                              final_value, has_final, keep, stripe);
    bad |= m > 0 && !(rows.xmin >= kScoreFloor);  // rule score (NaN scores: the ends)
    if constexpr (kLocal) {
      int top;
      end = lane_end<R, kSoft>(rows, t, top, bad);
      if (kSoft && l == 0 && stripe_index == 0) {
        End empty;  // best 0, soft sum 1
        empty.merge(end, c, kSoft);
        end = empty;
      }
      end.merge_group<G>(c, kSoft);
      // Items of several stripes against the stripe's end, at most the item's (so refusing
      // more); rule near on the item's score (below).
      const float log2_end = end.score(c, kSoft) / (t * dp::device::kLn2);
      const bool refuses = local_end_refuses<G, kSoft, !kStacked>(rows, log2_end);  // every lane
      bad |= m > 0 && refuses;
    } else {
      bad |= has_final && fabsf(final_value) < t * dp::device::kLn2 * kNearExponent;  // near
    }
  }
  if constexpr (kStacked) {
    // Rule near on the item's local score, by its last stripe (item_end merges the stripes'
    // ends); local max: a clamped score below t ln(2) / 4, 0 too.
    const auto near = [&](float item_score) {
      return fabsf(item_score) < t * dp::device::kLn2 * kNearExponent;
    };
    keep_or_flag<G, false>(bad, end, final_value, has_final, m, l, steps, b, unit, stripe_index,
                           item_stripes, n, c, kLocal, kSoft, geo, ws, score, redo, near);
  } else {
    keep_or_redo<true, G, R, kEnds>(bad, end, final_value, has_final, m, l, grp, b, unit, v, B,
                                    geo, ws, c, score, warp_smem);
  }
}

}  // namespace scaled
}  // namespace stripes
}  // namespace softalign
