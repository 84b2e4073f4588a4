// The traits of the striped schedule of the CUDA backend (docs/design.md, "GPU schedules"), for
// float32 with penalties constant per item: what every striped kernel shares (shapes, geometry,
// workspace, the ring between stripes, the local end, the lanes' rows and their score tiles).
// The kernels are log_space/'s (recurrence.h's cell) and prob_space/'s (prob_space.h's cell);
// this file only places cells on lanes.
//
// Geometry. A group of G lanes works on one item (32 / G items per warp); lane l owns R
// consecutive rows of a stripe of G * R rows and, at step w, the cell of column j = w - l: the
// cells of one step lie on an anti-diagonal, lane l one column behind lane l - 1 (forward) and
// one column ahead of it (adjoint, which runs the steps backwards). Values crossing rows within a
// stripe move by warp shuffles; scores (and, in the adjoint, their gradients) are staged through
// shared memory in chunks of steps (kChunkSteps; half that in the short pairs' linear forwards)
// so that global memory is read and written coalesced.
//
// Stripes. A warp takes one work unit: one stripe of its items. Units are handed out in order by
// an atomic ticket, so a unit only ever waits for units already running: stripe s reads the
// boundary row that stripe s - 1 leaves in a two-slot ring in global memory, chunk by chunk (or
// a few columns at a time: RingStream), waiting for each entry to carry the tag of its writer
// (the adjoint runs the stripes bottom-up and passes the pushes into the row above the same way).
// One long pair so keeps M / (G R) warps busy.
//
// What the adjoint needs from the forward: every DP value, saved one slab per step (the step's
// cells, [state][row][lane]: coalesced for both sweeps), the row above each stripe as lane 0
// read it, and the local end (best, soft sum, argmax).
#pragma once

#include <cfloat>
#include <type_traits>

#include "../views.h"

namespace softalign {
namespace stripes {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarpsPerBlock = 4;
// Steps per staged chunk (and per hand-over between stripes). H200 A/B of the long pairs' shape:
// 8 and 32 steps were 5-30% slower than 16.
constexpr int kChunkSteps = 16;
// The forwards of the short pairs' linear shapes (G < 32) sweep chunks of half that, two
// buffers (about the shared memory of one), so that a chunk's scores load while the one before
// is swept. H200 A/B at (65536, 32^2): forward 0.188 -> 0.177 ms, saving forward
// 334 -> 304 us. The adjoints keep 16 (with 8: 855 vs 718 us), and so does affine (forward 0.365
// vs 0.347 ms; saving forward 523 vs 530 us, no gain).
__host__ __device__ constexpr int forward_chunk_steps(bool affine, int G) {
  return !affine && G < 32 ? kChunkSteps / 2 : kChunkSteps;
}

// How the score reads the DP (docs/spec.md, "Score"). A template argument of the kernels, so that a
// cell only does the end tracking its mode needs.
enum class Ends {
  kMax,     // local, max reduction (or soft at t = 0): the best cell, and where it is
  kSoft,    // local, soft reduction, t > 0: an online log-sum-exp over the cells
  kGlobal,  // global: the value at (m, n)
};
__host__ __device__ constexpr bool is_local(Ends ends) { return ends != Ends::kGlobal; }

template <bool kAffine, int G, int R, int W = kChunkSteps>
struct Shape {
  static constexpr int kW = W;  // steps per chunk
  static constexpr int kStates = kAffine ? 3 : 1;
  static constexpr int kGroups = 32 / G;  // items per warp
  static constexpr int kRows = G * R;     // rows of a stripe
  // One group's scores for one chunk: lane l's row r at step w sits at (r * kW + w) * (G + 1) + l
  // (adjacent lanes, adjacent banks; the + 1 spreads the coalesced writes over the banks);
  // + G puts the groups of a warp on different banks.
  static constexpr int kTile = R * kW * (G + 1) + G;
  // Score tiles per group: a stripe of one row per lane (the long pairs' shape, a few warps per
  // SM) and the short chunks load the next chunk's scores while they sweep this one; the short
  // pairs' shapes otherwise keep one, so that more warps fit in shared memory.
  static constexpr int kBuffers = (G == 32 && R == 1) || kW < kChunkSteps ? 2 : 1;
  // The row above for lane 0 (forward: kStates values per step), or the pushes from the stripe
  // below for lane G - 1 (adjoint: up and diagonal, kStates each, one column more).
  static constexpr int kAbove = 2 * kStates * (kW + 1);
  static constexpr int kWarpFloats = kGroups * (kBuffers * kTile + kAbove);
  static constexpr int kSlab = kStates * kRows;  // saved values of one step of one group
  // Whether an item may span several stripes. The host gives the shapes of several items per
  // warp only items of one stripe (M <= kRows), so that their forwards leave the ring out. H200
  // A/B, forward (65536, 32^2): without the ring reads 0.162 -> 0.156 ms, without the
  // writes too 0.151 ms (affine 0.318 -> 0.311 ms). The short adjoints keep their ring reads:
  // without, the linear one took 95 registers instead of 114, ran 5 blocks per SM instead of 4 and
  // lost 9% (719 -> 785 us); their ring writes carry row 0's pushes in global mode.
  static constexpr bool kStacked = G == 32;
};

// Sizes shared by the launches of one call.
struct Geometry {
  int stripes;     // stripes of the tallest item: ceil(M / rows per stripe)
  int steps;       // N + G: the steps of a stripe
  int64_t units;   // work units: warps of items x stripes
  int64_t width;   // N + 1
};

// Global memory of one call (see the top of the file), per item b and stripe s.
struct Workspace {
  float* scratch;        // [b][scratch_per_item]: the ring (zeroed), or the general sweep's tables
  int64_t scratch_per_item;
  int* progress;         // [b][s]: a stripe's local end is stored; forward only, with stripes
  int* ticket;           // the next unit; null with one stripe (unit = warp index)
  float* values;         // [b][s][step][slab]: saved DP values; null in a forward without grad
  float* above;          // [b][s][state][N + 1]: the row above stripe s, as lane 0 read it
  float* stripe_ends;    // [b][s][4]: the local end of each stripe's cells
  float* ends;           // [b][4]: the item's local end: best, soft sum, argmax i, argmax j
  float* partials;       // [b][s][2]: d open, d extend summed over the stripe's cells
  // The saving forward and the adjoint: per unit, a bit for each group whose item they take
  // (null: all of them).
  const int* only_units;
};

// The ring of one item: two slots, each 2 * kStates planes of N + 1 entries (boundary values in
// the forward use kStates of them; the adjoint's pushes up and diagonal use all). An entry is a
// value and the tag of the stripe that wrote it, in one 64-bit word written and read whole: a
// reader polls the entries themselves, one round trip to L2, where a progress counter would take
// two (the counter, then the entries) and a fence in the writer. The host zeroes the ring; tags
// start at 1, and the adjoint's follow the forward's (the two launches share the ring).
using RingEntry = unsigned long long;
constexpr int kRingFloats = 2 * 2;  // floats of one slot per state and column: 2 planes, 64 bits
// Columns per batch of a RingStream and batches in flight. A stream reads up to column
// n + 32 + kChunkSteps - 1 + kRingAhead * kRingBatch (the whole chunks of a warp's n + 32 steps,
// and the batches requested from the last), past its plane's end; the host pads the workspace's
// end with kRingReadPast entries, so that the last item's reads stay inside it.
constexpr int kRingBatch = 4, kRingAhead = 2;
constexpr int kRingReadPast = 64;
static_assert(kChunkSteps % (kRingBatch * kRingAhead) == 0, "whole rounds of batches per chunk");
static_assert(kRingReadPast >= 32 + kChunkSteps + kRingAhead * kRingBatch, "the pad covers them");

template <int kStates>
__device__ __forceinline__ RingEntry* ring_slot(const Workspace& ws, const Geometry& geo,
                                                int64_t b, int slot) {
  return reinterpret_cast<RingEntry*>(ws.scratch + b * ws.scratch_per_item) +
         int64_t(slot) * 2 * kStates * geo.width;
}
// An entry's value and tag.
__device__ __forceinline__ float ring_value(RingEntry word) { return __uint_as_float(unsigned(word)); }
__device__ __forceinline__ unsigned ring_tag(RingEntry word) { return unsigned(word >> 32); }
__device__ __forceinline__ void ring_put(RingEntry* entry, float value, unsigned tag) {
  const RingEntry word = (RingEntry(tag) << 32) | __float_as_uint(value);
  asm volatile("st.relaxed.gpu.global.b64 [%0], %1;" ::"l"(entry), "l"(word) : "memory");
}
// The same where `put` holds: a predicated store, not a branch around it. The forwards put from
// one lane per step, and a branch there cost each step a divergent region and its reconvergence
// (H200 A/B, with the affine cell's column 0 by selects: the long affine forward
// (32, 1024^2) 0.577 -> 0.520 ms, (1, 4096^2) 2.01 -> 1.56 ms). The adjoint keeps the branch.
// No "memory" clobber: an entry orders nothing but itself (its reader polls its tag), so the
// compiler may move the step's plain loads (the next scores) across it; the long linear forwards
// gained 2-5% (H200: (1, 4096^2) 1.106 -> 1.088 ms), affine nothing.
__device__ __forceinline__ void ring_put_where(bool put, RingEntry* entry, float value, unsigned tag) {
  const RingEntry word = (RingEntry(tag) << 32) | __float_as_uint(value);
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.u32 p, %2, 0;\n @p st.relaxed.gpu.global.b64 [%0], %1;\n}"
      ::"l"(entry), "l"(word), "r"(unsigned(put)));
}
__device__ __forceinline__ RingEntry ring_load(const RingEntry* entry) {
  RingEntry word;
  asm volatile("ld.relaxed.gpu.global.b64 %0, [%1];" : "=l"(word) : "l"(entry) : "memory");
  return word;
}
// Stages kCount entries of the ring into shared memory, lane l of a group of G taking l, l + G,
// ...: dst[q] = the value at ring + where(q), or 0 where where(q) < 0 (no entry), once it carries
// `tag`. Every load is in flight at once; those not yet tagged are loaded again. The whole warp
// calls it and leaves it together: a lane that left the polling loop on its own kept the warp
// diverged through the sweep after it (H200, ncu: the long pairs' saving forward ran its steps
// twice, once per half warp, with emulated shuffles; 15 active threads per instruction).
template <int kCount, int G, class Where>
__device__ __forceinline__ void ring_take(const RingEntry* ring, unsigned tag, int l, float* dst,
                                          Where where) {
  constexpr int kPerLane = (kCount + G - 1) / G;
  int64_t at[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int q = l + i * G;
    at[i] = q < kCount ? where(q) : -1;
    if (q < kCount && at[i] < 0) dst[q] = 0.f;
  }
  while (true) {
    RingEntry word[kPerLane];
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) word[i] = at[i] >= 0 ? ring_load(ring + at[i]) : 0;
    bool waiting = false;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      if (at[i] < 0) continue;
      if (ring_tag(word[i]) == tag) {
        dst[l + i * G] = ring_value(word[i]);
        at[i] = -1;
      } else {
        waiting = true;
      }
    }
    if (!__any_sync(kFullMask, waiting)) break;
    __nanosleep(20);
  }
}
// Lane 0's entries of the ring in a forward: the row above, kBatch columns at a time, loaded
// kAhead batches before the steps that take them, so that the round trip to L2 overlaps the
// sweep and the stripe below starts soon after the columns it needs are written, rather than when
// a whole chunk of them is (with a chunk at once, stripe s waited for the 16th column of its
// chunk, which stripe s - 1 writes 47 steps after the first, and then for the round trip).
// Entries that were not yet written when loaded are loaded again when taken, the whole warp
// waiting. Columns past n are loaded too (the host pads the ring's end) but neither waited for
// nor used. Lanes that do not stream (stripe 0, lanes other than 0) load nothing and take
// whatever is in their words. Batch j0 / kBatch sits in slot (j0 / kBatch) % kAhead.
template <int kStates, int kBatch, int kAhead>
struct RingStream {
  const RingEntry* ring;  // plane 0 of the slot
  bool streaming;
  unsigned tag;
  int64_t plane;  // entries from one state to the next: N + 1
  int n;
  RingEntry word[kAhead][kBatch][kStates];  // the batches in flight

  // Starts loading columns j0 .. j0 + kBatch - 1 into a slot, two entries a load (16 bytes: the
  // host aligns each item's ring, j0 is a multiple of kBatch; H200: (1, 4096^2)
  // 1.151-1.154 -> 1.127-1.137 ms against one a load). Not volatile: nothing orders these loads
  // against the sweep's own memory accesses, and the scheduler may issue them early.
  __device__ void request(int slot, int j0) {
    static_assert(kBatch % 2 == 0 && kStates == 1, "pairs of entries, 16-byte aligned");
#pragma unroll
    for (int st = 0; st < kStates; ++st) {
      const RingEntry* at = ring + st * plane + j0;
#pragma unroll
      for (int q = 0; q < kBatch; q += 2) {
        if (streaming) {
          asm("ld.relaxed.gpu.global.v2.b64 {%0, %1}, [%2];"
              : "=l"(word[slot][q][st]), "=l"(word[slot][q + 1][st])
              : "l"(at + q));
        }
      }
    }
  }
  // Those columns' values (dst[q][st]), once every entry up to column n carries the tag.
  __device__ void take(int slot, int j0, float (&dst)[kBatch][kStates]) {
    RingEntry (&w)[kBatch][kStates] = word[slot];
    bool stale[kBatch][kStates];
    const auto check = [&] {
      bool any = false;
#pragma unroll
      for (int q = 0; q < kBatch; ++q)
#pragma unroll
        for (int st = 0; st < kStates; ++st) {
          stale[q][st] = streaming & (j0 + q <= n) & (ring_tag(w[q][st]) != tag);
          any |= stale[q][st];
        }
      return any;
    };
    bool waiting = check();
    while (__any_sync(kFullMask, waiting)) {
#pragma unroll
      for (int q = 0; q < kBatch; ++q)
#pragma unroll
        for (int st = 0; st < kStates; ++st)
          if (stale[q][st]) w[q][st] = ring_load(ring + st * plane + j0 + q);
      waiting = check();
    }
#pragma unroll
    for (int q = 0; q < kBatch; ++q)
#pragma unroll
      for (int st = 0; st < kStates; ++st) dst[q][st] = ring_value(w[q][st]);
  }
};

// `bytes` (a multiple of 16, from a 16-byte aligned address) into L2 by the copy engine (sm_90 on;
// nothing before): one instruction, no register waiting for it.
__device__ __forceinline__ void prefetch_l2(const float* from, int bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(from), "r"(bytes) : "memory");
#endif
}

// The warp's work unit: in order of the ticket when stripes wait for each other (a unit then
// only waits for units that are already running), else the warp's index.
__device__ __forceinline__ int64_t unit_of_warp(int warp, const Workspace& ws) {
  int64_t unit = int64_t(blockIdx.x) * kWarpsPerBlock + warp;
  if (ws.ticket != nullptr) {
    int t = 0;
    if (threadIdx.x % 32 == 0) t = atomicAdd(ws.ticket, 1);
    unit = __shfl_sync(kFullMask, t, 0);
  }
  return unit;
}

// The groups of the unit's warp whose items a launch takes: a bit each (Workspace::only_units).
__device__ __forceinline__ unsigned taken_groups(const Workspace& ws, int64_t unit) {
  return ws.only_units == nullptr ? ~0u : unsigned(ws.only_units[unit]);
}

// Progress counters: a release store after the writer's own writes, an acquire load before the
// reader's; one lane spins.
__device__ __forceinline__ void publish(int* progress, int value) {
  asm volatile("st.release.gpu.global.s32 [%0], %1;" ::"l"(progress), "r"(value) : "memory");
}
__device__ __forceinline__ int acquire(const int* progress) {
  int value;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(value) : "l"(progress) : "memory");
  return value;
}
__device__ __forceinline__ void wait_for(const int* progress, int needed) {
  while (acquire(progress) < needed) __nanosleep(20);
}

// The local end (docs/spec.md, "Score") of the cells seen so far: dp::LocalEnd's running max or
// log-sum-exp; the argmax is kept in row-major order whatever order the cells arrive in, so
// that lanes and stripes can merge their ends and agree with the row-major sweep on ties.
struct End {
  float best = 0.f;  // the empty alignment scores 0, at (0, 0)
  float soft_sum = 1.f;
  int i = 0, j = 0;

  __device__ static bool before(int i, int j, int oi, int oj) {
    return i < oi || (i == oi && j < oj);
  }
  // kWhere: keep the argmax too (the adjoint seeds it); else only the max.
  template <bool kWhere>
  __device__ void add(float v, int vi, int vj, const dp::Config<float>& c, bool soft) {
    if (!kWhere && !soft) {
      best = dp::device::max_nan(best, v);  // NaN sticks, as in LocalEnd::add
    } else if (soft) {  // LocalEnd::add's online log-sum-exp, in base 2
      const float scale = dp::device::exp2_scale(c.temperature);
      if (v > best) {
        soft_sum = soft_sum * dp::device::ex2((best - v) * scale) + 1.f;
        best = v;
      } else {  // v == best: exp(0) = 1, also for a second +inf cell (inf - inf is NaN)
        soft_sum += v == best ? 1.f : dp::device::ex2((v - best) * scale);
      }
    } else {  // selects, not a branch: the forward that saves calls it for every cell (H200
              // A/B: its kernel 3-7% faster than with a branch, linear and affine). A lane's
              // cells come in column order, rows in order within a column, so a tie is first
              // in row-major order only if its row is smaller (before(), for a later cell).
              // `|` and `&`, not `||` and `&&`: the compiler made the short circuits branches,
              // one per cell.
      // NaN sticks, and NaNs tie with each other (the row-major first NaN, as on the CPU).
      const bool first = vi < i;
      const bool take = (v > best) | ((v != v) & ((best == best) | first)) | ((v == best) & first);
      best = take ? v : best;
      i = take ? vi : i;
      j = take ? vj : j;
    }
  }
  // Two online log-sum-exps rescaled to the larger maximum, or the row-major first maximum.
  __device__ void merge(const End& o, const dp::Config<float>& c, bool soft) {
    if (soft) {
      const float top = dp::nan_max(best, o.best);
      // The maximum keeps its sum, also a +inf one (inf - inf would be NaN).
      const auto scale = [&](float x) {
        return x == top ? 1.f : dp::exp_((x - top) / c.temperature);
      };
      soft_sum = soft_sum * scale(best) + o.soft_sum * scale(o.best);
      best = top;
    } else if (best != best ? o.best != o.best && before(o.i, o.j, i, j)  // NaNs tie
                            : o.best != o.best || o.best > best ||
                                  (o.best == best && before(o.i, o.j, i, j))) {
      best = o.best;
      i = o.i;
      j = o.j;
    }
  }
  template <int G>
  __device__ void merge_group(const dp::Config<float>& c, bool soft) {
#pragma unroll
    for (int delta = G / 2; delta >= 1; delta /= 2) {
      End o;
      o.best = __shfl_xor_sync(kFullMask, best, delta, G);
      o.soft_sum = __shfl_xor_sync(kFullMask, soft_sum, delta, G);
      o.i = __shfl_xor_sync(kFullMask, i, delta, G);
      o.j = __shfl_xor_sync(kFullMask, j, delta, G);
      // Both lanes of a pair merge in the same order, so that all lanes end up equal.
      if ((threadIdx.x & delta) == 0) {
        merge(o, c, soft);
      } else {
        End mine = *this;
        *this = o;
        merge(mine, c, soft);
      }
    }
  }
  __device__ float score(const dp::Config<float>& c, bool soft) const {
    return soft ? best + c.temperature * dp::log_(soft_sum) : best;
  }
  __device__ void store(float* p) const {
    p[0] = best;
    p[1] = soft_sum;
    p[2] = __int_as_float(i);  // bits, not a conversion: exact past 2^24
    p[3] = __int_as_float(j);
  }
  __device__ static End load(const float* p) {
    End e;
    e.best = p[0];
    e.soft_sum = p[1];
    e.i = __float_as_int(p[2]);
    e.j = __float_as_int(p[3]);
    return e;
  }
};

// The temperature and its exp2 scale, worked out once per launch: per cell, the division sits in
// the t > 0 version of the step loop that the compiler makes, and is not hoisted out of it.
struct Temperature {
  float t, scale;
  __device__ explicit Temperature(float temperature)
      : t(temperature), scale(dp::device::exp2_scale(temperature)) {}
  template <int K>
  __device__ float smax(const float (&x)[K]) const {
    return dp::device::smax(x, t, scale);
  }
};

// The values of DP row 0 (docs/spec.md, "Linear gap" and "Affine gap": the boundaries), swept along
// the columns by lane 0 of stripe 0.
template <bool kAffine>
struct RowZero {
  static constexpr int kStates = kAffine ? 3 : 1;
  float v[kStates];

  __device__ void at_column(int j, float o, float e, const dp::Config<float>& c,
                            const Temperature& tp) {
    const float ninf = dp::neg_inf<float>();
    if constexpr (kAffine) {
      // local: all -inf; global: A[0][0] = 0, then only Y, Y[0][j] from Y/A/X[0][j-1]
      if (c.local || j == 0) {
        v[dp::kA] = (!c.local && j == 0) ? 0.f : ninf;
        v[dp::kX] = v[dp::kY] = ninf;
      } else {
        float x[3];
        dp::AffineHorizontalTerms::of(v[dp::kA], v[dp::kX], v[dp::kY], o, e, x);
        v[dp::kY] = tp.smax(x);
        v[dp::kA] = v[dp::kX] = ninf;
      }
    } else {
      // local: H[0][j] = 0; global: H[0][0] = 0, H[0][j] = H[0][j-1] + g
      v[0] = (c.local || j == 0) ? 0.f : v[0] + o;
    }
  }
};

// Lane l, row r of a stripe: the cell (i, j) from the row above (`up`, `diag`, per state) and
// the lane's value at column j - 1 (`left`, per state), written back into `left`; column_zero:
// j == 0, the boundary.
template <bool kAffine>
__device__ __forceinline__ void cell(bool column_zero, float s, float o, float e,
                                     const dp::Config<float>& c, const Temperature& tp,
                                     const float* diag, const float* up, float* left) {
  const float ninf = dp::neg_inf<float>();
  if constexpr (kAffine) {  // selects, not a branch, as linear's column 0 below
    float xa[4], xv[2], xh[3];
    dp::AffineMatchTerms::of(diag[dp::kA], diag[dp::kX], diag[dp::kY], c.local, xa);
    dp::AffineVerticalTerms::of(up[dp::kA], up[dp::kX], o, e, xv);
    dp::AffineHorizontalTerms::of(left[dp::kA], left[dp::kX], left[dp::kY], o, e, xh);
    const float a = s + tp.smax(xa), x = tp.smax(xv), y = tp.smax(xh);
    // column 0 (docs/spec.md, "Affine gap"): A = Y = -inf; X = -inf (local) or X/A[i-1][0]
    // (global), the same terms
    left[dp::kA] = column_zero ? ninf : a;
    left[dp::kX] = column_zero && c.local ? ninf : x;
    left[dp::kY] = column_zero ? ninf : y;
  } else {  // a select, not a branch: the lanes meet column 0 at different steps
    float x[4];
    dp::LinearTerms::of(diag[0], up[0], left[0], s, o, c.local, x);
    const float inside = tp.smax(x);
    // column 0 (docs/spec.md, "Linear gap"): H[i][0] = 0 (local) or H[i-1][0] + g (global)
    left[0] = column_zero ? (c.local ? 0.f : up[0] + o) : inside;
  }
}

// A lane's DP values between the forwards' steps (per state): its R rows at the column just done
// (`h`, the next cells' left), and the row above its first row at its column and the one before
// (`up`, `diag`). One step sweeps the R cells of the lane's column top-down.
template <bool kAffine, int R>
struct LaneRows {
  static constexpr int kStates = kAffine ? 3 : 1;
  float h[kStates][R];
  float up[kStates], diag[kStates];

  __device__ LaneRows() {
#pragma unroll
    for (int st = 0; st < kStates; ++st) {
      up[st] = diag[st] = 0.f;
#pragma unroll
      for (int r = 0; r < R; ++r) h[st][r] = 0.f;
    }
  }

  // The cells (rows r = 0 .. R - 1 of the lane) of one column: score(r) their scores, each(r,
  // values) after each cell; `u` is left holding the last row's values (for the lane below).
  template <class Score, class Each>
  __device__ __forceinline__ void step(bool column_zero, Score&& score, float o, float e,
                                       const dp::Config<float>& c, const Temperature& tp,
                                       float (&u)[kStates], Each&& each) {
    float d[kStates];  // above-left of the current row; `u` above it
#pragma unroll
    for (int st = 0; st < kStates; ++st) {
      u[st] = up[st];
      d[st] = diag[st];
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float s = score(r);
      float cur[kStates];
#pragma unroll
      for (int st = 0; st < kStates; ++st) cur[st] = h[st][r];
      cell<kAffine>(column_zero, s, o, e, c, tp, d, u, cur);
#pragma unroll
      for (int st = 0; st < kStates; ++st) {
        d[st] = h[st][r];
        h[st][r] = u[st] = cur[st];
      }
      each(r, cur);
    }
  }
  // The row above for the next step: the lane above's last row, by shuffle within a group of G
  // (column j of the row above is column j + 1's diagonal).
  template <int G>
  __device__ __forceinline__ void hand_down(const float (&u)[kStates]) {
#pragma unroll
    for (int st = 0; st < kStates; ++st) {
      diag[st] = up[st];
      up[st] = __shfl_up_sync(kFullMask, u[st], 1, G);
    }
  }
};
template <bool kAffine, int G, int R, int W = kChunkSteps>
struct Sweep {
  using Sh = Shape<kAffine, G, R, W>;
  static constexpr int kW = W;

  __device__ static int tile_at(int r, int w, int reader) {
    return (r * kW + w) * (G + 1) + reader;
  }

  // The group's tile of chunk k in the warp's shared memory, and its row above (forward) or
  // pushes from below (adjoint).
  __device__ static float* tile_of(float* warp_smem, int grp, int k) {
    return warp_smem + ((k % Sh::kBuffers) * Sh::kGroups + grp) * Sh::kTile;
  }
  __device__ static float* edge_of(float* warp_smem, int grp) {
    return warp_smem + Sh::kBuffers * Sh::kGroups * Sh::kTile + grp * Sh::kAbove;
  }

  // Moves chunk k (steps k * kW .. + kW - 1) of the group's item between its shared tile and
  // global memory: the G lanes of a group move their own item's rows, coalesced along the
  // columns, so that a lane holds one item's pointer and sizes (m = 0: nothing inside, zeros).
  // kLoad starts copying S in (cp.async, zero outside the item; one commit group per chunk,
  // waited for by wait_for_tiles), else writes d S out. kOwnOffsets works out each element's
  // offset on its own, the row offsets below otherwise; only the long pairs' adjoint takes it
  // (the linear one for both ways, the affine one to write d S out). kAllInside: every element
  // of the chunk lies inside the item (interior chunks), no check per element.
  // H200 A/B (the row offsets also for G = 32, R = 1): the long forwards gained 3-5% ((32,
  // 1024^2) 0.373 -> 0.355 ms) and their registers fell from 72-128 to 54-96, but the long
  // linear adjoint lost 8-10% ((32, 1024^2) 682 -> 740 us, (1, 4096^2) 2497 -> 2752 us).
  static_assert(kW % G == 0 || G % kW == 0, "a row of a chunk is a whole number of lanes or rows");
  template <bool kLoad, bool kOwnOffsets = false, bool kAllInside = false>
  __device__ static void move_tile(float* my_tile, const float* scores, float* grads, int m, int n,
                                   int l, int i0, int k, int64_t N) {
    // One element: its place in the item's S (kLoad) or d S (only read or written when
    // inside) and its slot in the tile.
    float* const item = kLoad ? const_cast<float*>(scores) : grads;
    const auto move = [&](float* slot, float* at, bool inside) {
      if constexpr (kLoad) {
        const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(slot));
        if constexpr (G == 32 && R == 1) {
          // The long pairs' shape fetches whole 128-byte lines into L2 (the rest of the line is
          // the next chunk's). H200 A/B (two runs): forwards without grad (32,
          // 1024^2) 0.363 -> 0.348 ms linear, 0.484 -> 0.446 affine; (1, 4096^2) 1.186 -> 1.106,
          // 1.503 -> 1.416 ms; saving forwards 2-9% faster, adjoints 0-1%. The short pairs'
          // kernels read 1.4x more from DRAM with it (ncu: adjoint 1.11 -> 1.38 GB) and lost
          // 5-8%: their L2 is thrashed, the lines evicted before the next chunk comes.
          asm volatile("cp.async.ca.shared.global.L2::128B [%0], [%1], 4, %2;\n" ::"r"(dst),
                       "l"(at), "r"(inside ? 4 : 0));
        } else {
          asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(at),
                       "r"(inside ? 4 : 0));
        }
      } else if (inside) {
        *at = *slot;
      }
    };
    if constexpr (kOwnOffsets && kAllInside) {
      // Element q lies kRowStep rows below element q - 1 and kRowStep columns to its left, in
      // the item and in the tile alike: its places are element 0's plus q times a constant, and
      // nothing is checked.
      static_assert(G == 32 && R == 1 && G % kW == 0, "one row per lane, a warp per stripe");
      constexpr int kRowStep = G / kW;
      const int lr = l / kW, lc = l % kW;  // element 0: row lr of the stripe, step lc
      float* const at = item + (int64_t(i0 + lr) * N + (k * kW + lc - lr - 1));
      const int64_t stride = kRowStep * (N - 1);
      float* const slot = my_tile + tile_at(0, lc, lr);
#pragma unroll
      for (int q = 0; q < kW; ++q) move(slot + q * kRowStep, at + q * stride, true);
    } else if constexpr (kOwnOffsets) {
      static_assert(G == 32 && R == 1, "one row per lane, a warp per stripe");
#pragma unroll 16
      for (int q = 0; q < R * kW; ++q) {
        // Element l + G q of the group's kRows x kW chunk: its row in the stripe and its step.
        const int row = (G * q) / kW + l / kW, w = l % kW;
        const int i = i0 + row + 1, j = k * kW + w - row;  // row is its reader, one row each
        const bool inside = i <= m && j >= 1 && j <= n;
        move(&my_tile[tile_at(0, w, row)], item + (inside ? int64_t(i - 1) * N + (j - 1) : 0),
             inside);
      }
    } else {
      // A lane's elements go row by row: element (a, b) is in row a kRowStep + lr of the
      // stripe, at step b G + lc of the chunk, so that its offset is a row's (one add per row)
      // plus a constant, and whether it is inside one compare per element.
      constexpr int kPerRow = G <= kW ? kW / G : 1;   // a lane's elements in one row
      constexpr int kRowStep = G <= kW ? 1 : G / kW;  // rows from one of them to the next
      constexpr int kLaneRows = R * kW / kPerRow;
      // The reader of row a kRowStep + lr (the lane that sweeps it, row / R) and its row there
      // (row % R) are constants per a, plus lr's share: with one row per lane all of it in the
      // reader, else (kRowStep = 2, R even) all of it in the row.
      static_assert(G <= kW || R == 1 || (kRowStep == 2 && R % 2 == 0), "rows of a lane's reader");
      const int lr = G <= kW ? 0 : l / kW, lc = G <= kW ? l : l % kW;
      const int j_lane = k * kW + lc;  // the column, less (b G - reader)
      const int rows_left = m - i0 - lr;  // the item's rows from the lane's first on
      const int64_t row_stride = kRowStep * N;  // elements from one of the lane's rows to the next
      // Rows in groups of kGroupRows, unrolled: within a group the reader is the group's first
      // (reader0) plus a constant, so that an element's places in global and shared memory are
      // the group's (`at`, `slot0`: two pointers stepped from one group to the next) plus
      // constants. Not all rows at once: a full unroll keeps every row's place live (the adjoints
      // took up to 255 registers). H200 A/B (against offsets worked out per row): the
      // long linear forward 2-4% faster ((1, 4096^2) 1.15-1.17 -> 1.13 ms, (32, 1024^2) 0.358-0.365
      // -> 0.348-0.349 ms), the others within the noise.
      constexpr int kGroupRows = 4;
      static_assert(kLaneRows % kGroupRows == 0 && kGroupRows * kRowStep % R == 0, "whole groups");
      constexpr int kReaderStep = kGroupRows * kRowStep / R;  // from a group's reader0 to the next
      int reader0 = R == 1 ? lr : 0;
      // Element (0, 0)'s place, plus reader0; slot0 the tile's, plus reader0.
      float* at = item + (int64_t(i0 + lr) * N + (j_lane - 1) - reader0);
      float* slot0 = my_tile + reader0;
#pragma unroll 1
      for (int a0 = 0; a0 < kLaneRows; a0 += kGroupRows) {
#pragma unroll
        for (int u = 0; u < kGroupRows; ++u) {
          const int row = (a0 + u) * kRowStep;  // + lr
          const int reader = u * kRowStep / R;  // + reader0
          const int r = R == 1 ? 0 : u * kRowStep % R + lr;
          const bool row_inside = kAllInside || row < rows_left;
#pragma unroll
          for (int b = 0; b < kPerRow; ++b) {
            const int w = b * G + lc;
            // j - j_lane + reader0: step w = b G + lc, column w - reader - reader0
            const int dj = b * G - reader;
            const bool inside =
                kAllInside || (row_inside && unsigned(j_lane - reader0 + dj - 1) < unsigned(n));
            move(slot0 + tile_at(r, w, reader), at + u * row_stride + dj, inside);
          }
        }
        at += kGroupRows * row_stride - kReaderStep;
        slot0 += kReaderStep;
        reader0 += kReaderStep;
      }
    }
    if constexpr (kLoad) asm volatile("cp.async.commit_group;\n" ::: "memory");
  }
  // Whether every cell of chunk kk lies inside the items of the warp (every lane's columns
  // 1 .. n, every row of the stripe up to m): its scores load, and its steps sweep, without the
  // borders' checks. The whole warp calls it.
  __device__ static bool chunk_inside(int m, int n, int i0, int kk) {
    return __all_sync(kFullMask, m > 0 && kk * kW - (G - 1) >= 1 && (kk + 1) * kW - 1 <= n &&
                                     i0 + Sh::kRows <= m);
  }
  // Starts chunk kk's scores of the group's item into its tile (move_tile), without the
  // per-element checks when the chunk lies inside the items (`inside`: chunk_inside's answer).
  __device__ static void load_scores(float* warp_smem, int grp, const float* scores, int m, int n,
                                     int l, int i0, int kk, int64_t N, bool inside) {
    float* const tile = tile_of(warp_smem, grp, kk);
    if (inside) {
      move_tile<true, false, true>(tile, scores, nullptr, m, n, l, i0, kk, N);
    } else {
      move_tile<true>(tile, scores, nullptr, m, n, l, i0, kk, N);
    }
  }
  // Waits until the tile of the chunk about to be swept is in: with two buffers the next
  // chunk's copies (started before) may still be in flight.
  __device__ static void wait_for_tiles(bool next_in_flight) {
    if (Sh::kBuffers == 2 && next_in_flight) {
      asm volatile("cp.async.wait_group 1;\n" ::: "memory");
    } else {
      asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    }
  }
};

// A stripe's local end (docs/spec.md, "Score"; the stripe's lanes merged), by one lane: an item of
// one stripe has its score (kSave: and its end, for the adjoint's seed); else each stripe leaves
// its end and the item's last stripe merges them in stripe order, waiting for each. Returns the
// item's score where this stripe stored it, else NaN.
template <bool kSave>
__device__ __forceinline__ float item_end(const End& end, int64_t b, int stripe, int item_stripes,
                                          int n, const dp::Config<float>& c, bool soft,
                                          const Geometry& geo, const Workspace& ws, float* score) {
  if (item_stripes == 1) {
    score[b] = end.score(c, soft);
    if (kSave) end.store(ws.ends + b * 4);
    return score[b];
  }
  end.store(ws.stripe_ends + (b * geo.stripes + stripe) * 4);
  publish(ws.progress + b * geo.stripes + stripe, n + 2);
  if (stripe != item_stripes - 1) return __int_as_float(0x7fffffff);
  End total;
  for (int s = 0; s < item_stripes; ++s) {
    wait_for(ws.progress + b * geo.stripes + s, n + 2);
    End part;
    const float* q = ws.stripe_ends + (b * geo.stripes + s) * 4;
    part.best = __ldcg(q);
    part.soft_sum = __ldcg(q + 1);
    part.i = __float_as_int(__ldcg(q + 2));
    part.j = __float_as_int(__ldcg(q + 3));
    if (s == 0) {
      total = part;
    } else {
      total.merge(part, c, soft);
    }
  }
  score[b] = total.score(c, soft);
  if (kSave) total.store(ws.ends + b * 4);
  return score[b];
}

// An item of only boundaries (m = 0 or n = 0): the general sweep's forward, by the calling lane,
// its table in the item's scratch; stores the score and returns the local end.
template <bool kAffine>
__device__ dp::LocalEnd<float> forward_boundary_item(const dp::Item<float>& it, int64_t b,
                                                     const dp::Config<float>& c,
                                                     const Workspace& ws, float* score) {
  using Model = dp::Model<float, kAffine>;
  const typename Model::Tab table{ws.scratch + b * ws.scratch_per_item, 2, it.n + 1};
  dp::LocalEnd<float> end;
  score[b] = Model::forward(it, c, table, end);
  return end;
}


}  // namespace stripes
}  // namespace softalign
