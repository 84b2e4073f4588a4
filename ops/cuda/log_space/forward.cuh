// The striped forward in log space (docs/design.md, "Log space: the cell"): every gap model,
// mode and temperature; the forward that saves the DP for the adjoint (kSave); the redo of the
// items the probability-space forwards refuse (forward_unit). The schedule is kernel_traits.cuh's,
// the cell recurrence.h's.
#pragma once

#include "../kernel_traits.cuh"

namespace softalign {
namespace stripes {

// The forwards' sweep of one work unit by the calling warp (its shared memory: Sweep's
// Shape::kWarpFloats floats at warp_smem); `taken` has a bit per group of the warp, set for the
// groups whose items it sweeps, the others' left as they are. The body of forward_kernel, and the
// probability-space forwards' redo of the items they refuse (prob_space/).
template <bool kAffine, int G, int R, bool kSave, Ends kEnds>
__device__ __forceinline__ void forward_unit(const ProblemView<float>& v, int64_t B,
                                             const Geometry& geo, const Workspace& ws,
                                             float* score, float* const warp_smem, int64_t unit,
                                             unsigned taken) {
  using Sw = Sweep<kAffine, G, R, forward_chunk_steps(kAffine, G)>;
  using Sh = typename Sw::Sh;
  constexpr int kW = Sw::kW;
  constexpr int kStates = Sh::kStates, kRows = Sh::kRows, kGroups = Sh::kGroups;

  const int lane_id = threadIdx.x % 32;
  const int grp = lane_id / G, l = lane_id % G;
  const int stripe = int(unit % geo.stripes);
  const int64_t b = (unit / geo.stripes) * kGroups + grp;
  dp::Config<float> c = v.config;
  c.local = is_local(kEnds);  // a constant from here on
  constexpr bool soft = kEnds == Ends::kSoft;
  const int64_t N = v.N, W = geo.width;
  const int i0 = stripe * kRows;  // the stripe's rows are i0 + 1 .. i0 + kRows

  dp::Item<float> it;
  float o = 0.f, e = 0.f;  // penalties, constant per item on this path
  int m = 0, n = 0, item_stripes = 0;
  if (b < B && (taken >> grp & 1u)) {
    it = v.item(b);
    o = it.open.at(1, 1);
    if constexpr (kAffine) e = it.extend.at(1, 1);
    item_stripes = (it.m + kRows - 1) / kRows;
    if (it.m == 0 || it.n == 0) {  // only boundaries: the general sweep has them
      if (stripe == 0 && l == 0) {
        const dp::LocalEnd<float> end = forward_boundary_item<kAffine>(it, b, c, ws, score);
        if (kSave && is_local(kEnds)) End{end.best, end.soft_sum, end.best_i, end.best_j}.store(ws.ends + b * 4);
      }
    } else if (stripe < item_stripes) {
      m = it.m;
      n = it.n;
    }
  }
  const float* scores = m > 0 ? it.scores : v.scores;  // a valid address for every lane
  // The next stripe reads a row (never in the short pairs' shapes: Shape::kStacked).
  const bool leaves_row = Sh::kStacked && m > 0 && stripe + 1 < item_stripes;
  const bool reads_row = m > 0 && stripe > 0;
  RingEntry* ring_out = m > 0 ? ring_slot<kStates>(ws, geo, b, stripe % 2) : nullptr;
  const RingEntry* ring_in = reads_row ? ring_slot<kStates>(ws, geo, b, (stripe + 1) % 2) : nullptr;
  const unsigned tag = stripe + 1;  // of this stripe's entries; the stripe above wrote `stripe`
  float* values = kSave ? ws.values + ((b * geo.stripes + stripe) * geo.steps) * Sh::kSlab : nullptr;
  float* above_saved = kSave ? ws.above + (b * geo.stripes + stripe) * kStates * W : nullptr;
  // The whole warp runs the same steps (shuffles and staging are warp-wide).
  const int steps = __reduce_max_sync(kFullMask, unsigned(m > 0 ? n + G : 0));
  __syncwarp();
  // The saved slabs are read back only by the adjoint, after the whole forward: stored
  // evict-first (st.global.cs), so that they push less of the score rows out of L2. H200 A/B:
  // saving forward (65536, 32^2) 268 -> 244 us linear (ncu: DRAM reads 467 -> 405
  // MB), 519 -> 460 us affine; affine (32, 1024^2) 643 -> 603 us, (1, 4096^2) 2146 -> 1947 us.
  // Not the long linear one: 7-14% slower with it ((32, 1024^2) 370 -> 402 us).
  constexpr bool kEvictFirstSlabs = kAffine || G < 32;

  float* const my_above = Sw::edge_of(warp_smem, grp);
  const int first_row = i0 + l * R + 1;

  End end;
  end.soft_sum = l == 0 && stripe == 0 ? 1.f : 0.f;  // the empty alignment, once per item
  float final_value = 0.f;
  bool has_final = false;
  LaneRows<kAffine, R> rows;
  RowZero<kAffine> row0;
  const Temperature tp(c.temperature);

  // The linear model's stacked forward without grad streams lane 0's row above from the ring
  // (RingStream); the others take it a chunk at a time. H200 A/B (2-4 runs each),
  // one batch of 4 columns in flight: that forward gained 3-9% ((32, 1024^2) 0.372-0.393 ->
  // 0.365-0.371 ms, (1, 4096^2) 1.33-1.34 -> 1.21-1.27 ms; batches of 2 columns: 0.439, 1.656
  // ms; of 8: 0.38, 1.20 ms; chunks of 32 steps: 0.36, 1.25 ms); two batches in flight: (1,
  // 4096^2) 1.28-1.36 -> 1.16 ms, (32, 1024^2) 0.374-0.376 -> 0.348-0.367 ms (with one, the
  // streaming stripes stepped in 115-130 ns against stripe 0's 93: globaltimer stamps per
  // stripe). The saving forward lost 8-9% with one in flight (380 ->
  // 415 us, 1.30 -> 1.41 ms), the affine ones 3-10% (the affine forward's registers went from 80
  // to 125), and the linear adjoint, streaming the pushes from below, 18-23% (655 -> 807 us,
  // 2.38 -> 2.81 ms).
  constexpr bool kStreamRing = Sh::kStacked && !kAffine && !kSave;
  static_assert(kW % (kRingBatch * kRingAhead) == 0, "whole rounds of batches per chunk");
  RingStream<kStates, kRingBatch, kRingAhead> ring{
      ring_in, kStreamRing && l == 0 && ring_in != nullptr, tag - 1, W, n};
  float from_ring[kRingBatch][kStates];
  if constexpr (kStreamRing) {
#pragma unroll
    for (int a = 0; a < kRingAhead; ++a) ring.request(a, a * kRingBatch);
  }

  // Chunks inside the items (Sweep::chunk_inside) load their scores, and (see `interior`) sweep
  // their steps, without the borders' checks.
  const auto chunk_inside = [&](int kk) { return Sw::chunk_inside(m, n, i0, kk); };
  const auto load_tile = [&](int kk) {
    Sw::load_scores(warp_smem, grp, scores, m, n, l, i0, kk, N, chunk_inside(kk));
  };
  if (Sh::kBuffers == 2 && steps > 0) load_tile(0);
  for (int k = 0; k * kW < steps; ++k) {
    __syncwarp();  // every lane is done with the chunk before
    float* const my_tile = Sw::tile_of(warp_smem, grp, k);
    // The ring entry of this lane's column at the chunk's first step (state 0; a state is W on).
    RingEntry* const put_chunk = ring_out + (k * kW - l);
    // The scores first: they wait for nothing, so their copies overlap the wait for the row
    // above (and, with two buffers, the sweep of this chunk).
    const bool next = (k + 1) * kW < steps;
    if (Sh::kBuffers == 1) {
      load_tile(k);
    } else if (next) {
      load_tile(k + 1);
    }
    // The row above, for lane 0's steps of this chunk: DP row 0 (docs/spec.md, "Linear gap" and
    // "Affine gap"; a scan along the columns by lane 0) or the boundary row the stripe above left
    // in the ring. Every lane of every stripe calls ring_take (stripe 0 and items outside take no
    // entry): the call in a branch (`stripe > 0`, which the compiler cannot know is the same for
    // the whole warp) made it emulate every shuffle of the sweep after it (WARPSYNC.COLLECTIVE in
    // the SASS of the affine forwards and the linear saving forward).
    if constexpr (Sh::kStacked && !kStreamRing) {
      ring_take<kStates * kW, G>(ring_in, tag - 1, l, my_above, [&](int q) -> int64_t {
        const int j = k * kW + q % kW;
        return ring_in != nullptr && j <= n ? (q / kW) * W + j : -1;
      });
      __syncwarp();  // its zeros, before row 0's values
    }
    if (stripe == 0 && l == 0) {
      for (int w = 0; w < kW; ++w) {
        row0.at_column(k * kW + w, o, e, c, tp);
#pragma unroll
        for (int st = 0; st < kStates; ++st) my_above[st * kW + w] = row0.v[st];
      }
    }
    Sw::wait_for_tiles(next);
    __syncwarp();
    if (kSave && m > 0) {  // the row above, for the adjoint (lane 0's column is the step)
      for (int q = l; q < kStates * kW; q += G) {
        const int st = q / kW, j = k * kW + q % kW;
        if (j <= n) above_saved[st * W + j] = my_above[q];
      }
    }

    // Whole chunks, as the adjoint: the steps from `steps` on lie outside every item (no end, no
    // ring entry; the slabs the saving forward leaves there are never read). Steps unrolled: the
    // whole chunk with a warp per item (16; the saving forward only with one row per lane), and
    // in the short pairs' linear forward without grad (8); 4 otherwise. H200 A/B: against 4
    // everywhere, the forwards without grad gained 10-14% at 8 ((1, 4096^2)
    // 1.52 -> 1.36 ms, (32, 1024^2) 0.416 -> 0.378 ms) and affine 13% more at 16 ((1, 4096^2)
    // 2.27 -> 1.97 ms); the long saving forward 4-9% at 16 ((32, 1024^2) 540 -> 497 us
    // linear, 784 -> 749 us affine; at 8 unchanged). With 8, the short saving forward took 92
    // registers instead of 80 and lost 2% ((65536, 32^2) 298 -> 305 us), and the short affine
    // forward lost 2-4% (0.320 -> 0.326-0.332 ms).
    constexpr int kUnroll = G == 32 && (R == 1 || !kSave) ? kW : (kSave || kAffine) ? 4 : 8;
    // A chunk inside the items (chunk_inside) sweeps without the borders' checks (column 0, the
    // ends' and the ring's ranges). H200 A/B: the affine forward (1, 4096^2) 1.46
    // -> 1.38 ms, (32, 1024^2) 0.447 -> 0.425 ms, the short linear forward (65536, 32^2) 0.156
    // -> 0.148 ms, forward + backward 2-4% (its saving forward). Not the streaming forward: its
    // chunk lost a quarter of its instructions but the forward lost 2-15% ((128, 32, 4096) 95 ->
    // 97-99 ns a step, (1, 4096^2) 1.15 -> 1.25-1.35 ms; the compiler issued the ring's loads
    // later in that sweep).
    const bool interior = !kStreamRing && chunk_inside(k);
    const auto sweep = [&](auto inside_constant) {
      constexpr bool kInside = decltype(inside_constant)::value;
#pragma unroll kUnroll
      for (int w = 0; w < kW; ++w) {
        const int step = k * kW + w;
        const int j = step - l;  // this lane's column at this step
        if constexpr (kStreamRing) {
          if (w % kRingBatch == 0) {
            const int slot = (w / kRingBatch) % kRingAhead;  // = (step / kRingBatch) % kRingAhead
            ring.take(slot, step, from_ring);
            ring.request(slot, step + kRingAhead * kRingBatch);
          }
        }
#pragma unroll
        for (int st = 0; st < kStates; ++st) {  // lane 0's row above; the others' came by shuffle
          const float above =
              kStreamRing && stripe > 0 ? from_ring[w % kRingBatch][st] : my_above[st * kW + w];
          rows.up[st] = l == 0 ? above : rows.up[st];
        }
        const bool column_inside = kInside || (j >= 1 && j <= n);
        float u[kStates];  // the last row's values
        const auto score_of = [&](int r) { return my_tile[Sw::tile_at(r, w, l)]; };
        rows.step(!kInside && j == 0, score_of, o, e, c, tp, u,
                  [&](int r, const float (&cur)[kStates]) {
          const int i = first_row + r;
          if (kSave && (kInside || (m > 0 && step < geo.steps))) {
#pragma unroll
            for (int st = 0; st < kStates; ++st) {
              float* const slot = &values[int64_t(step) * Sh::kSlab + (st * R + r) * G + l];
              if constexpr (kEvictFirstSlabs) {
                __stcs(slot, cur[st]);
              } else {
                *slot = cur[st];
              }
            }
          }
          // Max ends take every cell, -inf outside the item (it never beats the empty alignment's
          // 0): no branch per cell.
          const bool inside = kInside || (column_inside && i <= m);
          if constexpr (kEnds == Ends::kMax && !kSave) {  // the common case: only the max
            end.best = dp::device::max_nan(end.best, inside ? cur[0] : -INFINITY);
          } else if constexpr (kEnds == Ends::kMax) {  // and where it is, for the adjoint's seed
            end.add<true>(inside ? cur[0] : -INFINITY, i, j, c, soft);
          } else if (inside) {
            if constexpr (is_local(kEnds)) {
              end.add<kSave>(cur[0], i, j, c, soft);  // A (affine) or H (linear)
            } else if (i == m && j == n) {
              if constexpr (kAffine) {  // global score = smax_t(A[m][n], X[m][n], Y[m][n])
                final_value = dp::smax(cur, c.temperature);
              } else {
                final_value = cur[0];
              }
              has_final = true;
            }
          }
        });
        if constexpr (Sh::kStacked) {
          const bool put = l == G - 1 && leaves_row && (kInside || (j >= 0 && j <= n));
#pragma unroll
          for (int st = 0; st < kStates; ++st) ring_put_where(put, put_chunk + w + st * W, u[st], tag);
        }
        rows.template hand_down<G>(u);
      }
    };
    if (interior) {
      sweep(std::true_type{});
    } else {
      sweep(std::false_type{});
    }
  }

  if constexpr (is_local(kEnds)) {
    end.merge_group<G>(c, soft);
    if (m > 0 && l == 0) {
      item_end<kSave>(end, b, stripe, item_stripes, n, c, soft, geo, ws, score);
    }
  } else if (has_final) {
    score[b] = final_value;
  }
}

template <bool kAffine, int G, int R, bool kSave, Ends kEnds>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    forward_kernel(ProblemView<float> v, int64_t B, Geometry geo, Workspace ws, float* score) {
  using Sh = typename Sweep<kAffine, G, R, forward_chunk_steps(kAffine, G)>::Sh;
  __shared__ float smem[kWarpsPerBlock][Sh::kWarpFloats];
  const int warp = threadIdx.x / 32;
  if (int64_t(blockIdx.x) * kWarpsPerBlock + warp >= geo.units) return;  // the whole warp
  const int64_t unit = unit_of_warp(warp, ws);
  const unsigned taken = taken_groups(ws, unit);
  if (taken == 0) return;  // the whole warp
  forward_unit<kAffine, G, R, kSave, kEnds>(v, B, geo, ws, score, &smem[warp][0], unit, taken);
}


}  // namespace stripes
}  // namespace softalign
