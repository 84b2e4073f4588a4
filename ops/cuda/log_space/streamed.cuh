// The short pairs' forward without grad, streamed: a group of G lanes sweeps several items back to
// back, so that the skew of the striped schedule (kernel_traits.cuh: N + G steps for N columns, the
// lanes idle while the anti-diagonal enters and leaves an item) is paid once per group rather than
// once per item (at N = 32: 48 steps an item for G = 16, 33 here). Same cells on the same lanes,
// the same tiles and cell math as the striped forward; only where an item starts differs.
// dispatch.cu takes it for the affine model (and says why not for the linear one).
//
// The stream. The group's item q (Deal::item: group g's are g, g + groups, ...) takes positions
// q (N + 1) .. q (N + 1) + N: column 0 (the boundary) and the columns 1 .. N, whatever its length
// (the columns past its n, the rows past its m are swept but belong to no item, as in the striped
// forward). At step w lane l is at position w - l: lane l - 1's position one step earlier, so the
// values it shuffles down are always of the same item and column. Every lane keeps its own item
// and column, the item's penalties and lengths (the next item's loaded ahead, at a chunk's
// start), and its share of the item's local end; on leaving an item a lane merges its share into
// the one lane l - 1 handed it the step before, in lane order, and lane G - 1 stores the score.
#pragma once

#include "../kernel_traits.cuh"

namespace softalign {
namespace stripes {

// What a lane needs of the item at a stream position; m = n = 0 outside the group's items.
struct StreamItem {
  float o = 0.f, e = 0.f;
  int m = 0, n = 0;

  // The lengths only (the tiles' loader), or the penalties too (the sweep).
  __device__ static StreamItem sizes(const ProblemView<float>& v, int64_t b, bool exists) {
    StreamItem s;
    if (exists) {
      s.m = v.m_of(b);
      s.n = v.n_of(b);
    }
    return s;
  }
  __device__ static StreamItem of(const ProblemView<float>& v, int64_t b, bool exists,
                                  bool affine) {
    StreamItem s;
    if (exists) {
      const dp::Item<float> it = v.item(b);
      s.o = it.open.at(1, 1);
      if (affine) s.e = it.extend.at(1, 1);
      s.m = it.m;
      s.n = it.n;
    }
    return s;
  }
};

// How the items of a call are dealt to the groups of lanes: one launch of as many groups as
// fit on the chip at once, group g taking items g, g + groups, g + 2 groups, ... (the groups
// running at any time read neighbouring items, as the striped forward's warps do), `per_group`
// of them, the first `extra` groups one more.
struct Deal {
  int64_t groups, per_group, extra;

  __host__ __device__ int count(int64_t group) const { return int(per_group + (group < extra)); }
  __host__ __device__ int64_t item(int64_t group, int q) const { return group + q * groups; }
};

// Whether the streamed forward takes a call of the short pairs' shape: at least two items per
// group, an item's N + 1 positions at least a group's G (a lane's positions in one chunk then
// span at most two items), and offsets within an item in 32 bits.
__host__ __device__ constexpr bool streams(int64_t per_group, int64_t M, int64_t N, int G) {
  return per_group >= 2 && N + 1 >= G && M * N < (int64_t(1) << 31);
}

template <bool kAffine, int G, int R, Ends kEnds>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    stream_kernel(ProblemView<float> v, Deal deal, Workspace ws, float* score) {
  using Sw = Sweep<kAffine, G, R, forward_chunk_steps(kAffine, G)>;
  using Sh = typename Sw::Sh;
  constexpr int kW = Sw::kW;
  static_assert(kW == G && G < 32, "a lane loads one step of each row of a chunk");
  constexpr int kStates = Sh::kStates, kGroups = Sh::kGroups;
  __shared__ float smem[kWarpsPerBlock][Sh::kWarpFloats];

  const int warp = threadIdx.x / 32, lane_id = threadIdx.x % 32;
  const int grp = lane_id / G, l = lane_id % G;
  const int64_t group = (int64_t(blockIdx.x) * kWarpsPerBlock + warp) * kGroups + grp;
  const int count = deal.count(group);
  // The group's item q, and whether it has one.
  const auto item_of = [&](int q) { return deal.item(group, q); };
  const auto exists = [&](int q) { return q >= 0 && q < count; };
  dp::Config<float> c = v.config;
  c.local = is_local(kEnds);  // a constant from here on
  constexpr bool soft = kEnds == Ends::kSoft;
  const int64_t M = v.M, N = v.N;
  const int P = int(N) + 1;  // positions per item

  // Items of only boundaries (m = 0 or n = 0): the general sweep has them, a lane each.
  for (int q = l; q < count; q += G) {
    const int64_t b = item_of(q);
    const dp::Item<float> it = v.item(b);
    if (it.m == 0 || it.n == 0) forward_boundary_item<kAffine>(it, b, c, ws, score);
  }
  // The whole warp runs the same steps (shuffles and staging are warp-wide): the last lane
  // leaves the last item at the end of step count P + G - 2.
  const int steps = __reduce_max_sync(kFullMask, unsigned(count > 0 ? count * P + G - 1 : 0));

  float* const warp_smem = &smem[warp][0];
  float* const my_above = Sw::edge_of(warp_smem, grp);
  const int first_row = l * R + 1;

  // The sweep's place: lane l starts at position -l (item -1, column P - l; lane 0 at item 0).
  int q = l == 0 ? 0 : -1, j = l == 0 ? 0 : P - l;
  StreamItem cur = StreamItem::of(v, item_of(q), exists(q), kAffine);
  StreamItem next = StreamItem::of(v, item_of(q + 1), exists(q + 1), kAffine);
  bool advanced = false;  // into `next`: the one after it is loaded at the next chunk's start
  End end, carry;  // this lane's share of the item's end; the shares merged up to this lane
  const float empty_sum = l == 0 ? 1.f : 0.f;  // the empty alignment, once per item
  end.soft_sum = empty_sum;
  LaneRows<kAffine, R> rows;
  RowZero<kAffine> row0;
  const Temperature tp(c.temperature);
  // Local: row 0 is one value per state (linear 0, affine -inf), the same at every column.
  float local_row0[kStates] = {};
  if constexpr (is_local(kEnds)) {
    row0.at_column(1, 0.f, 0.f, c, tp);
#pragma unroll
    for (int st = 0; st < kStates; ++st) local_row0[st] = row0.v[st];
  }

  // The loader's place: lane l's element of reader lane 0 in the next chunk to load lies at
  // position kk kW + l, item load_q and column load_j; reader rd's lies rd positions before, in
  // that item or the one before it (rd < G <= P), whose sizes the loader keeps as it moves on
  // (and the next item's, loaded ahead). Per chunk a pointer into each of the two items, per
  // reader a select of one, per element a 32-bit row offset from it. H200: with an
  // item's view and 64-bit offsets per reader the loader took 15 instructions an element and the
  // affine forward (65536, 32^2) 0.314-0.323 ms; with these 5, and 0.29 ms (Deal's balance too).
  const int Ni = int(N), item_floats = int(M * N);
  int load_q = 0, load_j = l;
  StreamItem load_prev, load_top = StreamItem::sizes(v, item_of(0), exists(0)),
                        load_next = StreamItem::sizes(v, item_of(1), exists(1));
  // Row 0, column 0 of an item (any valid address for one the group does not have).
  const auto item_scores = [&](int q) {
    return exists(q) ? v.scores + item_of(q) * int64_t(item_floats) : v.scores;
  };
  const auto load_tile = [&](int kk) {
    float* const tile = Sw::tile_of(warp_smem, grp, kk);
    // Column load_j of row 0 in the two items (in the one before: P columns further on)
    const float* const top = item_scores(load_q) + (load_j - 1);
    const float* const prev = item_scores(load_q - 1) + (load_j - 1 + P);
#pragma unroll
    for (int rd = 0; rd < G; ++rd) {  // the reader lane: rows rd R .. rd R + R - 1
      const bool in_prev = rd > load_j;
      const int m = in_prev ? load_prev.m : load_top.m, n = in_prev ? load_prev.n : load_top.n;
      const int jj = load_j - rd + (in_prev ? P : 0);
      const bool column_inside = unsigned(jj - 1) < unsigned(n);
      const float* const first = (in_prev ? prev : top) - rd;  // column jj of the item's row 0
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int i = rd * R + r;  // the element's row, less one
        const bool inside = column_inside && i < m;
        const unsigned dst =
            static_cast<unsigned>(__cvta_generic_to_shared(&tile[Sw::tile_at(r, l, rd)]));
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst),
                     "l"(first + i * Ni), "r"(inside ? 4 : 0));
      }
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
    load_j += kW;
    if (load_j >= P) {
      load_j -= P;
      ++load_q;
      load_prev = load_top;
      load_top = load_next;
      load_next = StreamItem::sizes(v, item_of(load_q + 1), exists(load_q + 1));
    }
  };

  if (Sh::kBuffers == 2 && steps > 0) load_tile(0);
  for (int k = 0; k * kW < steps; ++k) {
    __syncwarp();  // every lane is done with the chunk before
    float* const my_tile = Sw::tile_of(warp_smem, grp, k);
    const bool more = (k + 1) * kW < steps;
    if (advanced) {  // out of the steps: a lane leaves at most one item per chunk (P >= kW)
      next = StreamItem::of(v, item_of(q + 1), exists(q + 1), kAffine);
      advanced = false;
    }
    if (Sh::kBuffers == 1) {
      load_tile(k);
    } else if (more) {
      load_tile(k + 1);
    }
    // Global: lane 0's row above, DP row 0 of the items it passes in this chunk.
    if (!is_local(kEnds) && l == 0) {
      int jj = j;
      StreamItem at = cur;
      for (int w = 0; w < kW; ++w) {
        row0.at_column(jj, at.o, at.e, c, tp);
#pragma unroll
        for (int st = 0; st < kStates; ++st) my_above[st * kW + w] = row0.v[st];
        if (++jj == P) {
          jj = 0;
          at = next;
        }
      }
    }
    Sw::wait_for_tiles(more);
    __syncwarp();

    constexpr int kUnroll = kAffine ? 4 : 8;
#pragma unroll kUnroll
    for (int w = 0; w < kW; ++w) {
#pragma unroll
      for (int st = 0; st < kStates; ++st) {  // lane 0's row above; the others' came by shuffle
        const float above = is_local(kEnds) ? local_row0[st] : my_above[st * kW + w];
        rows.up[st] = l == 0 ? above : rows.up[st];
      }
      const bool column_inside = unsigned(j - 1) < unsigned(cur.n);
      float u[kStates];  // the last row's values
      const auto score_of = [&](int r) { return my_tile[Sw::tile_at(r, w, l)]; };
      rows.step(j == 0, score_of, cur.o, cur.e, c, tp, u, [&](int r, const float (&now)[kStates]) {
        const int i = first_row + r;
        const bool inside = column_inside && i <= cur.m;
        if constexpr (kEnds == Ends::kMax) {  // -inf outside: it never beats the empty alignment
          end.best = dp::device::max_nan(end.best, inside ? now[0] : -INFINITY);
        } else if constexpr (kEnds == Ends::kSoft) {
          if (inside) end.add<false>(now[0], i, j, c, soft);
        } else if (inside && i == cur.m && j == cur.n) {  // the global score, at (m, n)
          if constexpr (kAffine) {  // global score = smax_t(A[m][n], X[m][n], Y[m][n])
            score[item_of(q)] = dp::smax(now, c.temperature);
          } else {
            score[item_of(q)] = now[0];
          }
        }
      });
      // The next position; on leaving an item, the lane's end joins the shares of the lanes
      // before it (handed over by the shuffle below), and lane G - 1 stores the item's score.
      if (++j == P) {
        if constexpr (is_local(kEnds)) {
          if (l == 0) {
            carry = end;
          } else if constexpr (soft) {  // carry: lane l - 1's, shuffled in the step before
            carry.merge(end, c, soft);
          } else {
            carry.best = dp::device::max_nan(carry.best, end.best);
          }
          if (l == G - 1 && cur.m > 0 && cur.n > 0) score[item_of(q)] = carry.score(c, soft);
          end = End{};
          end.soft_sum = empty_sum;
        }
        j = 0;
        ++q;
        cur = next;
        advanced = true;
      }
      rows.template hand_down<G>(u);
      if constexpr (is_local(kEnds)) {
        carry.best = __shfl_up_sync(kFullMask, carry.best, 1, G);
        if constexpr (soft) carry.soft_sum = __shfl_up_sync(kFullMask, carry.soft_sum, 1, G);
      }
    }
  }
}

}  // namespace stripes
}  // namespace softalign
