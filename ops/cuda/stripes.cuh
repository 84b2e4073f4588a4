// The striped schedule of the CUDA backend (DESIGN "Scheduling on a GPU"), for float32 with
// penalties constant per item: the forward, the forward that saves the DP for the adjoint, and
// the adjoint sweep. The cell math is recurrence.h's; this file only places cells on lanes.
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
// Steps per staged chunk (and per hand-over between stripes). H200 A/B of the long pairs' shape
// (session 5): 8 and 32 steps were 5-30% slower than 16.
constexpr int kChunkSteps = 16;
// The forwards of the short pairs' linear shapes (G < 32) sweep chunks of half that, two
// buffers (about the shared memory of one), so that a chunk's scores load while the one before
// is swept. H200 A/B (session 7, (65536, 32^2)): forward 0.188 -> 0.177 ms, saving forward
// 334 -> 304 us. The adjoints keep 16 (with 8: 855 vs 718 us), and so does affine (forward 0.365
// vs 0.347 ms; saving forward 523 vs 530 us, no gain).
__host__ __device__ constexpr int forward_chunk_steps(bool affine, int G) {
  return !affine && G < 32 ? kChunkSteps / 2 : kChunkSteps;
}

// How the score reads the DP (SPEC "Score"). A template argument of the kernels, so that a cell
// only does the end tracking its mode needs.
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
  // A/B (session 11), forward (65536, 32^2): without the ring reads 0.162 -> 0.156 ms, without the
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
// (H200 A/B session 13, with the affine cell's column 0 by selects: the long affine forward
// (32, 1024^2) 0.577 -> 0.520 ms, (1, 4096^2) 2.01 -> 1.56 ms). The adjoint keeps the branch.
// No "memory" clobber: an entry orders nothing but itself (its reader polls its tag), so the
// compiler may move the step's plain loads (the next scores) across it; the long linear forwards
// gained 2-5% (H200, session 25 call 5: (1, 4096^2) 1.106 -> 1.088 ms), affine nothing.
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
  // host aligns each item's ring, j0 is a multiple of kBatch; H200, session 15: (1, 4096^2)
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

// The local end (SPEC "Score") of the cells seen so far: dp::LocalEnd's running max or
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

// The values of DP row 0 (SPEC boundaries), swept along the columns by lane 0 of stripe 0.
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
    // SPEC column 0: A = Y = -inf; X = -inf (local) or X/A[i-1][0] (global), the same terms
    left[dp::kA] = column_zero ? ninf : a;
    left[dp::kX] = column_zero && c.local ? ninf : x;
    left[dp::kY] = column_zero ? ninf : y;
  } else {  // a select, not a branch: the lanes meet column 0 at different steps
    float x[4];
    dp::LinearTerms::of(diag[0], up[0], left[0], s, o, c.local, x);
    const float inside = tp.smax(x);
    // SPEC column 0: H[i][0] = 0 (local) or H[i-1][0] + g (global)
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

// Divides a cell's weights by their sum (Weights and PlainWeights with kDivide). They sum to 1 in
// exact arithmetic, but in float32 only for a v rounded by the log-space forward from these same
// terms, whose errors then cancel: any other v (the probability-space forward's, or even the exact
// one rounded once) leaves each cell's weights off by about ulp(v) / t, which the adjoint
// compounds along the paths (d g 3e-3 off on tools/adjoint_weights_precision.py's item, 1e-5 with
// the division, from any of those v; the log-space pair's own, 1.3e-4, but growing as t falls:
// session 34's review, d g 0.1-4% off at t = 0.1-0.01). So the linear adjoints divide (H100,
// session 35: the long linear adjoint 656 -> 660 us at (32, 1024^2)); the affine ones after a
// log-space forward do not: it cost the long affine adjoint 17-20% (1049 -> 1225 us), and it made
// the short affine adjoint's step loop 15% longer (SASS: 1370 -> 1570 instructions), where many
// warps share an SM and instructions count. A sum of zero (a cell outside the item) keeps its
// zeros.
template <int K>
__device__ __forceinline__ void divide_by_sum(float (&w)[K]) {
  float sum = w[0];
#pragma unroll
  for (int k = 1; k < K; ++k) sum += w[k];
  const float inv_sum = dp::device::rcp(fmaxf(sum, FLT_MIN));
#pragma unroll
  for (int k = 0; k < K; ++k) w[k] *= inv_sum;
}

// The weights of one smax (DESIGN "weights") from the value v it produced: w_k = exp((x_k - v) / t),
// one exp2 each, without the smax's max (and its sum: kDivide divides by it, divide_by_sum says
// where). x_k <= v up to rounding; the clamp at exp2(0) = 1 keeps the weights finite also in the
// cells of the skew outside the item (whose saved value and neighbours do not belong together),
// so that a zero adjoint e pushes zeros there. t = 0 (one-hot) and non-finite values take smax_weights, and only where e is not
// zero: a NaN or inf the sweep never reaches then stays where it is, as on the CPU.
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

// The adjoint of one cell (DESIGN "One cell, forward and backward"): given its adjoint `e` and
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

  // Column 0 (SPEC boundaries): global only, X[i][0] (affine) or H[i][0] = H[i-1][0] + g.
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
  // H200 A/B (session 11, the row offsets also for G = 32, R = 1): the long forwards gained 3-5%
  // ((32, 1024^2) 0.373 -> 0.355 ms) and their registers fell from 72-128 to 54-96, but the long
  // linear adjoint lost 8-10% ((32, 1024^2) 682 -> 740 us, (1, 4096^2) 2497 -> 2752 us), as it
  // had in session 6.
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
          // the next chunk's). H200 A/B (session 16, two runs): forwards without grad (32,
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
      // took up to 255 registers). H200 A/B (session 15, against offsets worked out per row): the
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

// A stripe's local end (SPEC "Score"; the stripe's lanes merged), by one lane: an item of one
// stripe has its score (kSave: and its end, for the adjoint's seed); else each stripe leaves its
// end and the item's last stripe merges them in stripe order, waiting for each. Returns the
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

// ------------------------------------------------------------------------------ forward

// The forwards' sweep of one work unit by the calling warp (its shared memory: Sweep's
// Shape::kWarpFloats floats at warp_smem); `taken` has a bit per group of the warp, set for the
// groups whose items it sweeps, the others' left as they are. The body of forward_kernel, and the
// scaled forward's redo of the items it refuses (scaled.cuh).
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
  // evict-first (st.global.cs), so that they push less of the score rows out of L2. H200 A/B
  // (session 16): saving forward (65536, 32^2) 268 -> 244 us linear (ncu: DRAM reads 467 -> 405
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
  // (RingStream); the others take it a chunk at a time. H200 A/B (session 13, 2-4 runs each),
  // one batch of 4 columns in flight: that forward gained 3-9% ((32, 1024^2) 0.372-0.393 ->
  // 0.365-0.371 ms, (1, 4096^2) 1.33-1.34 -> 1.21-1.27 ms; batches of 2 columns: 0.439, 1.656
  // ms; of 8: 0.38, 1.20 ms; chunks of 32 steps: 0.36, 1.25 ms); two batches in flight: (1,
  // 4096^2) 1.28-1.36 -> 1.16 ms, (32, 1024^2) 0.374-0.376 -> 0.348-0.367 ms (with one, the
  // streaming stripes stepped in 115-130 ns against stripe 0's 93: globaltimer stamps per
  // stripe, branch wip/session13-times). The saving forward lost 8-9% with one in flight (380 ->
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
    // The row above, for lane 0's steps of this chunk: DP row 0 (SPEC boundaries, a scan along
    // the columns by lane 0) or the boundary row the stripe above left in the ring.
    // Every lane of every stripe calls ring_take (stripe 0 and items outside take no entry): the
    // call in a branch (`stripe > 0`, which the compiler cannot know is the same for the whole
    // warp) made it emulate every shuffle of the sweep after it (WARPSYNC.COLLECTIVE in the
    // SASS of the affine forwards and the linear saving forward).
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
    // everywhere (session 10), the forwards without grad gained 10-14% at 8 ((1, 4096^2)
    // 1.52 -> 1.36 ms, (32, 1024^2) 0.416 -> 0.378 ms) and affine 13% more at 16 ((1, 4096^2)
    // 2.27 -> 1.97 ms); the long saving forward 4-9% at 16 (session 11: (32, 1024^2) 540 -> 497 us
    // linear, 784 -> 749 us affine; at 8 unchanged). With 8, the short saving forward took 92
    // registers instead of 80 and lost 2% ((65536, 32^2) 298 -> 305 us), and the short affine
    // forward lost 2-4% (0.320 -> 0.326-0.332 ms).
    constexpr int kUnroll = G == 32 && (R == 1 || !kSave) ? kW : (kSave || kAffine) ? 4 : 8;
    // A chunk inside the items (chunk_inside) sweeps without the borders' checks (column 0, the
    // ends' and the ring's ranges). H200 A/B (session 15): the affine forward (1, 4096^2) 1.46
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
              if constexpr (kAffine) {  // SPEC: global score = smax_t(A[m][n], X[m][n], Y[m][n])
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
  // One slab ahead with four rows per lane, 4 / R otherwise. H200 A/B (session 8, the sweep in
  // whole chunks): the short pairs' linear adjoint, (65536, 32^2), 722 us with one, 801 us with
  // two. Session 6 had found two better (1.45 -> 1.34 ms forward + backward) while a skipped step
  // cost every slab in flight a register move, which waited for its load.
  // (Session 12, with the plain steps below: two ahead still gained nothing, 572 -> 574 us.)
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
  // them (H200 A/B session 12: (32, 1024^2) 1085 -> 1117 us, (1, 4096^2) 3727 -> 3851 us).
  constexpr bool kPlainSteps = !kHard && !(kAffine && G == 32 && R == 1);
  // Plain edges: the local affine adjoints sweep the skew's steps (lanes at columns j <= 0) plain
  // too, where the others take a branch per cell there. H200 A/B (session 19, (65536, 32^2)):
  // affine 750 -> 726 us; linear 581 -> 593 us (its skew's cells, cheap on the branch, then
  // cost their weights' exp2s), so not linear.
  constexpr bool kPlainEdges = kPlainSteps && kAffine && is_local(kEnds);
  using Plain = PlainWeights<kDivide>;
  const Plain plain_weights{scale};

  // See move_tile. The long affine adjoint loads by row offsets: H200 A/B (session 11) 1133 -> 1085
  // us at (32, 1024^2), 3817 -> 3735 us at (1, 4096^2); the linear one lost 2-4% with them.
  constexpr bool kOwnStoreOffsets = G == 32 && R == 1;
  constexpr bool kOwnLoadOffsets = kOwnStoreOffsets && !kAffine;
  // Chunks inside the item (Sweep::chunk_inside: a stripe's all but its first and last few) move
  // their scores in and d S out without the borders' checks and per-element offsets (about 400
  // instructions fewer a chunk). H200 kernels (session 31 call 1, two rounds): long linear
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
      // loads. H200 A/B (session 9, against a 128-byte line per lane 8 steps ahead): adjoint
      // (32, 1024^2) 738 -> 678 us, (1, 4096^2) 2714 -> 2496 us. The short pairs' shapes lost
      // 17% with it ((65536, 32^2) 723 -> 846 us), as with the per-step lines before: more
      // warps hide their loads. The gain is fragile: the same prefetch written as a lambda
      // compiled to another schedule and gained 3% (725 us).
      const int first = max((k - 1) * kW - 2 - kDepth, 0), end = min(k * kW - 2 - kDepth, steps);
      if (l == 0 && end > first) {
        prefetch_l2(values + int64_t(first) * Sh::kSlab, (end - first) * Sh::kSlab * int(sizeof(float)));
      }
    }
    // The pushes from the stripe below at the columns lane G - 1 reads in this chunk (and one more).
    ring_take<Sh::kAbove, G>(ring_in, tag + 1, l, my_below, [&](int q) -> int64_t {
      const int plane = q / (kW + 1), column = k * kW + q % (kW + 1) - (G - 1);
      return ring_in != nullptr && column >= 0 && column <= n ? plane * W + column : -1;
    });
    Sw::wait_for_tiles(next);
    __syncwarp();

    // Steps unrolled: 4 for the long pairs, 2 for the short ones; not kW (fewer registers live).
    // H200 A/B: the long pairs' adjoint (session 11, (32, 1024^2)) 682 us at 4, 720 at 8, 877 at
    // 16, 787 at 2; the short pairs' (session 12, with plain steps, (65536, 32^2)) linear 596 us
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
          // The seeds (SPEC "Gradients").
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
          } else if (!(kPlain && kAffine) && inside && i == m && j == n) {  // SPEC: smax_t(A, X, Y)
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
      // A branch, not ring_put_where: the long affine adjoint lost 5% with that (H200 A/B
      // session 13: (32, 1024^2) 1071 -> 1126 us, (1, 4096^2) 3707 -> 3901 us).
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
