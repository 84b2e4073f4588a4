// The linear forward without grad at t > 0 in probability space
// (docs/design.md, "Probability space: the scaled cell"): of items one stripe tall (M <= 32: a
// quarter warp an item with 4 rows a lane, or, B <= 1024, a warp an item with a row a lane), and of
// items of several stripes (a warp a stripe of 32 rows, when the call gives the chip enough warps:
// dispatch.cu). The same cells on the same lanes, tiles and steps as the log-space forward
// (log_space/forward.cuh), each evaluated as Z = exp(H / t) rather than as H (prob_space.h). The
// cell
//   H = smax_t(0 [local], H_diag + s, H_up + g, H_left + g)   (docs/spec.md, "Linear gap")
// is then the linear recurrence
//   Z = 1 [local] + E Z_diag + G (Z_up + Z_left),   E = exp(s / t), G = exp(g / t):
// one exp2 a cell (E) and two FMAs on the dependence chain, where the log-space cell takes three
// exp2s, a log2 and a chain of about 85 cycles (measured on H100 by a latency probe). Boundaries: Z
// = 1 at column 0 and row 0 (local), Z = G^i, G^j there (global). Ends: the soft end is t ln(1 +
// sum of the cells' Z), the max end t ln max(1, Z) (exp is monotone), the global one t ln Z(m, n).
//
// Range. Z leaves float's range within a few hundred cells, so each row of a lane keeps its
// values as z 2^k: a float z and an int k per row. At each chunk's start (every kW steps, the
// whole warp at once, no branch) every row's z is brought to [1, 2) by a change of its k; in
// between, a value from the row above is brought to this row's k by one multiply by
// 2^(k_above - k), a factor that is constant through the chunk (the lane above's last row comes
// by shuffle, its k once a chunk). A local row's end (soft sum or max of its cells) keeps an
// exponent of its own, at least the row's. Nothing is checked per cell or per step.
//
// What it refuses (docs/design.md, "Refusal rules"). Every cell is a sum of products of
// non-negative floats, so rounding stays relative (about an ulp a term) while no value overflows,
// no factor between rows is clamped and no value that matters underflows. An item is refused, and
// swept again in log space (by the same warp, log_space/forward.cuh's forward_unit on the same
// tiles; items of several stripes by a second launch) when:
//  - its score is inf or NaN (or, global, Z(m, n) below kTiny). An inf or NaN cell of an item
//    reaches its end: every later cell is at least G times the one before it (G > 0), every
//    local cell is in the end. So +inf and NaN scores, and scores that take a value past
//    float's range within one chunk (a rise of 2^128 in its 8, 16 or 32 columns), are refused,
//    by the ends.
//  - |g| log2(e) / t is beyond gap_bound(kW) (12 with chunks of 8 steps, 6 with 16, 3 with 32):
//    a value falls by at most G a column, so with z >= 1 at a chunk's start no cell of the chunk
//    is below 2^(-kW gap_bound) = 2^-96.
//  - two rows' exponents drift so far apart that their factor would be clamped, or that the
//    row above's values could fall out of float's normal range in this row's scale before the
//    chunk ends (Rows::loses), or the first step's diagonal is below float's normal range.
// A score's E may underflow: Z >= G^2 Z_diag, so what E Z_diag loses is at most 2^-102 of Z.
// -inf scores give E = 0, as in log space. A local row's end drops (pow2_to_subnormal) cells at
// most 2^-149 of its running sum's scale, which may rise by 2^128 within a chunk: at most 2^-21
// of the sum, and only until the next chunk.
#pragma once

#include "../../prob_space.h"
#include "../log_space/forward.cuh"

namespace softalign {
namespace stripes {
namespace scaled {

// Steps per chunk (a renormalisation, a tile of scores and, items of several stripes, a ring
// hand-over each): kSteps, or kLongSteps in the kernels of a warp an item or a stripe at
// temperatures from kLongStepsMinTemperature on (dispatch.cu), and kLongestSteps in the stacked
// kernels for local items at temperatures from kLongestStepsMinTemperature on whose gaps allow it
// (the kernel chooses per warp). With one warp a scheduler the chunk's boundary, 3-4 times the
// instructions of its steps (Nsight Compute: 360 against 85 in the stacked kernel, 180 against 85
// with one stripe), sets the step's time; longer chunks cut it, but leave each row less room to
// rise before the next renormalisation (2^128 in kW columns) and allow less of a gap (gap_bound).
// Rows' largest rises in kW columns, N(0, 1) scores, gap -1, 256 x 1024, in powers of two: local
// 66-82 (kW = 32, t = 1), 91-142 (kW = 32, t = 0.5), 41-50 (kW = 16, t = 1); global rows rise
// faster (the paths into a deep row's first columns multiply): 210-223 (kW = 32, t = 1), 120-126
// (kW = 16, t = 1). So global items keep chunks of 16.
constexpr int kSteps = 8;
constexpr int kLongSteps = 16;
constexpr int kLongestSteps = 32;
constexpr float kLongStepsMinTemperature = 0.5f;
constexpr float kLongestStepsMinTemperature = 1.f;
// |g| log2(e) / t at most, with chunks of `steps` steps.
__host__ __device__ constexpr int gap_bound(int steps) { return 96 / steps; }
constexpr int kGapBound = gap_bound(kSteps);
constexpr int kFactorBound = 120;  // k_above - k at most
constexpr float kTiny = 0x1p-100f;  // a global score's Z(m, n) at least

// 2^e for e in [-126, 127] (built from its exponent bits).
__device__ __forceinline__ float pow2(int e) { return __int_as_float((e + 127) << 23); }
// 2^e clamped to [2^-126, 2^127]: the factor between two rows (refused beyond kFactorBound).
__device__ __forceinline__ float factor(int e) { return pow2(min(max(e, -126), 127)); }
// 2^e, or 0 below 2^-126: what a value that far below the ones it joins is worth beside them.
__device__ __forceinline__ float pow2_or_zero(int e) { return e < -126 ? 0.f : pow2(min(e, 127)); }
// 2^e down to 2^-149 (a subnormal, still exact), else 0: the scale of a row's cells (at most
// 2^128 in its own) in its end, a sum of at least 1; what it drops is at most 2^-21 of that sum,
// for one chunk (the next renormalisation brings k up with the values).
__device__ __forceinline__ float pow2_to_subnormal(int e) {
  return e >= -126 ? pow2(min(e, 127)) : e >= -149 ? __int_as_float(1 << (e + 149)) : 0.f;
}
// 2^y, down to 2^-149 (a subnormal, where ex2.approx.ftz flushes below 2^-126): a value brought
// into a row's scale keeps what a product by the factor between rows would keep.
__device__ __forceinline__ float ex2_to_subnormal(float y) {
  return y < -126.f ? dp::device::ex2(y + 64.f) * 0x1p-64f : dp::device::ex2(y);
}
// x 2^e for e <= 0 by two exact factors (one rounding, graceful underflow): a sum moved to a
// larger exponent. A single factor, 0 below 2^-126, lost whole sums that had risen within a chunk.
__device__ __forceinline__ float scale_down(float x, int e) {
  const int first = max(e, -126);
  return x * pow2(first) * pow2(max(e - first, -126));
}

// t ln(z 2^k): a value of probability space back in log space (H, or an end's score).
__device__ __forceinline__ float log_space(float z, int k, float t) {
  return t * dp::device::kLn2 * (dp::device::lg2(z) + float(k));
}

// The groups of G lanes (a bit each, group g at bit g) any of whose lanes says `bad`: the items a
// warp refuses, which the log-space sweeps take instead, item by item
// (docs/spec.md, "Dtypes and devices": an item's result does not depend on which other items share
// the batch).
template <int G>
__device__ __forceinline__ unsigned groups_where(bool bad) {
  const unsigned lanes = __ballot_sync(kFullMask, bad);
  if constexpr (G == 32) {
    return lanes != 0u;
  } else {
    unsigned groups = 0;
#pragma unroll
    for (int g = 0; g < 32 / G; ++g) {
      if ((lanes >> (g * G)) & ((1u << G) - 1u)) groups |= 1u << g;
    }
    return groups;
  }
}

// A lane's R rows between steps (probability space): row r's value at the column just done is
// z[r] 2^k[r]; `diag` is the row above the lane's first row at that column, in row 0's scale.
// kAtLeastOne: every value of a row is at least 1 (the linear model's local rows: each cell has
// the empty alignment's 1), which lets Rows::loses leave a factor between rows unchecked below.
template <int R, bool kLocal, bool kAtLeastOne = kLocal>
struct Rows {
  float z[R];
  int k[R];
  float one[R];         // local: 1 (the cell's empty alignment) in row r's scale, 2^-k[r]
  float from_above[R];  // r >= 1: 2^(k[r - 1] - k[r])
  float acc[R];         // local: the soft sum or max of row r's cells inside the item, / 2^ka[r]
  int ka[R];            // >= k[r]
  float to_acc[R];      // 2^(k[r] - ka[r])
  float diag = 1.f;

  // Before the first step: Z = 1 (local); global, each row's k is its column 0's (G^i, i =
  // first_row + r), so that column 0 (reached within the first chunk) keeps every k.
  __device__ Rows(int first_row, float gap_c) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      z[r] = one[r] = to_acc[r] = 1.f;
      k[r] = ka[r] = kLocal ? 0 : int(floorf(float(first_row + r) * gap_c));
      acc[r] = 0.f;
    }
    set_factors();
  }
  __device__ void set_factors() {
#pragma unroll
    for (int r = 0; r < R; ++r) from_above[r] = factor(r == 0 ? 0 : k[r - 1] - k[r]);
  }

  // Whether the factor 2^dk from the row above to a row of exponent k, at a chunk's start (the
  // row above's z in [1, 2)), could lose some of what the row above brings to it in the chunk:
  // dk beyond kFactorBound, or so low that the row above's values, which fall by at most G a
  // column, could leave float's normal range in this row's scale (`below`: 126 - kW |g|
  // log2(e) / t) and then, times a large E, matter. A row of values at least 1 (kAtLeastOne)
  // whose k is at most 102 keeps them normal anyway: they are at least 1, 2^-k in its scale.
  __device__ static bool loses(int dk, int k, int below) {
    return dk > kFactorBound || (dk < -below && !(kAtLeastOne && k <= 102));
  }

  // At a chunk's start: every row's z to [1, 2), its k changed to match (those outside
  // [2^-126, 2^127) as they are: outside the item, or about to be refused); its 1, its end's
  // scale and the factors between rows to match. Refuses the item (`bad`) when a factor would
  // be clamped while cells of the item lie ahead in this lane's rows. `ends_open`: the item's last
  // column is not behind the lane yet. A row's end follows its k only while its cells may still
  // come: below the item or past its last column the values go on (with G > 1, a gap that pays,
  // they grow by G a column), and an end scaled with them would flush the sum it holds, or, as a
  // lane's top exponent, every other row's (local scores came out 0 or -inf that way).
  __device__ void renormalize(bool cells_ahead, bool ends_open, int rows_inside, int below,
                              bool& bad) {
    const int k0 = k[0];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const unsigned bits = __float_as_uint(z[r]);
      const bool normal = bits - 0x00800000u < 0x7e800000u;  // in [2^-126, 2^127)
      const int e = normal ? int(bits >> 23) - 127 : 0;
      z[r] = normal ? __uint_as_float((bits & 0x007fffffu) | 0x3f800000u) : z[r];
      k[r] += e;
      if constexpr (kLocal) {
        one[r] = pow2_or_zero(-k[r]);
        if (ends_open && r < rows_inside) {
          acc[r] = scale_down(acc[r], ka[r] - max(ka[r], k[r]));  // as is unless k passed ka
          ka[r] = max(ka[r], k[r]);
        }
        to_acc[r] = pow2_to_subnormal(k[r] - ka[r]);  // a closed end adds nothing more
      }
    }
    diag *= pow2(k0 - k[0]);  // |k0 - k[0]| <= 126: a normal z's exponent
    set_factors();
#pragma unroll
    for (int r = 1; r < R; ++r) {
      bad |= cells_ahead && r < rows_inside && loses(k[r - 1] - k[r], k[r], below);
    }
  }
};

// What a sweep keeps for the fused forward + adjoint (linear_adjoint.cuh): nothing (the forward
// without grad), or KeepCells.
struct KeepNothing {};

// Items of at most kKeepCols columns keep every cell: z of row i (1 .. 32) at column j (0 .. n),
// in the scale of the chunk that computed it, at (i - 1) * kKeepWidth + j of the item's kKeepItem
// floats (+ 8: the groups of a warp on different banks); the k of every row in every chunk; and
// (Ends::kMax) the column of each row's first maximum.
constexpr int kKeepCols = 32;
constexpr int kKeepWidth = kKeepCols + 1;
constexpr int kKeepItem = 32 * kKeepWidth + 8;
template <int R>
struct KeepCells {
  float* z;  // the group's item's cells
  int16_t* k;  // the lane's: row r's k in chunk kk at (kk * R + r) * 32
  int best_j[R];
};

// SaveLog: what the stacked forward that saves (items of several stripes, forward + backward)
// leaves for the log-space adjoint (log_space/adjoint.cuh's backward_kernel), in the log-space
// saving forward's places and form: each cell's H = t ln(z 2^k) in its step's slab, the row above
// the stripe as lane 0 took it (the ring's H; stripe 0: DP row 0), and each row's first maximal
// column (max ends, for the adjoint's seed).
template <int R>
struct SaveLog {
  float* values;  // the stripe's slabs: step s's at s * Shape::kSlab, row r of lane l at r G + l
  float* above;   // the stripe's row above, column j at j
  int steps;      // slabs in the workspace (Geometry::steps)
  float gap;      // g: global DP row 0 is H(0, j) = j g
  int best_j[R];
};
template <class Keep>
constexpr bool kSavesLog = false;
template <int R>
constexpr bool kSavesLog<SaveLog<R>> = true;

// Where a sweep reads each cell's score. TileScores: the striped forward's tiles, a chunk of
// steps at a time, the next chunk's loading while this one is swept.
template <int G, int R, int kChunk = kSteps>
struct TileScores {
  static constexpr int kStepsPerChunk = kChunk;
  using Sw = Sweep<false, G, R, kChunk>;
  float* warp_smem;
  const float* scores;
  int m, n, l, grp, i0;  // i0: the stripe's rows are i0 + 1 .. i0 + G R
  int64_t N;
  float* tile = nullptr;

  __device__ void load(int kk) const {
    Sw::load_scores(warp_smem, grp, scores, m, n, l, i0, kk, N, Sw::chunk_inside(m, n, i0, kk));
  }
  __device__ void first() const { load(0); }
  __device__ void begin_chunk(int kk, bool next) {
    tile = Sw::tile_of(warp_smem, grp, kk);
    if (next) load(kk + 1);
  }
  __device__ void wait(int /*kk*/, bool next) const { Sw::wait_for_tiles(next); }
  template <bool kInside>
  __device__ float at(int r, int w, int /*j*/) const {
    return tile[Sw::tile_at(r, w, l)];
  }
  __device__ void keep_E(int /*r*/, int /*j*/, float /*E*/, bool /*in_range*/) const {}
};

// DenseScores: the item's scores in shared memory, row i - 1 at (i - 1) * kKeepCols (zero outside
// the item), loaded before the sweep (DenseScores::load) in slabs of kSlabCols columns, chunk kk
// of the sweep waiting for slab kk only; the sweep leaves E in their place.
constexpr int kDenseItem = 32 * kKeepCols + 8;  // + 8: the groups of a warp on different banks
struct DenseScores {
  static constexpr int kStepsPerChunk = kSteps;
  static constexpr int kSlabCols = 8, kSlabs = kKeepCols / kSlabCols;
  float* rows;  // the lane's first row

  // Starts the copy of the item's m x n scores (of a row-major M x N block at `from`) into its
  // 32 x kKeepCols array `to`, zero elsewhere, by the G lanes of its group (lane l of G): one
  // commit group a slab.
  template <int G>
  __device__ static void load(float* to, const float* from, int m, int n, int64_t N, int l) {
    const bool vectors = N % 4 == 0 && (reinterpret_cast<uintptr_t>(from) & 15) == 0;
    for (int slab = 0; slab < kSlabs; ++slab) {
      if (vectors) {  // 16 bytes a copy, the part past n zero-filled
        constexpr int kPerRow = kSlabCols / 4;
        static_assert((32 * kPerRow) % G == 0, "whole rounds of the group");
#pragma unroll
        for (int q = l; q < 32 * kPerRow; q += G) {
          const int i = q / kPerRow, j = slab * kSlabCols + (q % kPerRow) * 4;
          const int bytes = i < m ? 4 * min(max(n - j, 0), 4) : 0;
          const float* at = bytes > 0 ? from + int64_t(i) * N + j : from;
          const unsigned dst =
              static_cast<unsigned>(__cvta_generic_to_shared(to + i * kKeepCols + j));
          asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(at),
                       "r"(bytes));
        }
      } else {
#pragma unroll 4
        for (int q = l; q < 32 * kSlabCols; q += G) {
          const int i = q / kSlabCols, j = slab * kSlabCols + q % kSlabCols;
          const bool inside = i < m && j < n;
          const float* at = inside ? from + int64_t(i) * N + j : from;
          const unsigned dst =
              static_cast<unsigned>(__cvta_generic_to_shared(to + i * kKeepCols + j));
          asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(at),
                       "r"(inside ? 4 : 0));
        }
      }
      asm volatile("cp.async.commit_group;\n" ::: "memory");
    }
  }
  __device__ void first() const {}
  __device__ void begin_chunk(int, bool) const {}
  // Chunk kk reads columns below (kk + 1) kSlabCols (kW = kSlabCols): slabs 0 .. kk.
  __device__ void wait(int kk, bool) const {
    static_assert(kSlabs == 4, "the waits below");
    if (kk == 0) {
      asm volatile("cp.async.wait_group 3;\n" ::: "memory");
    } else if (kk == 1) {
      asm volatile("cp.async.wait_group 2;\n" ::: "memory");
    } else if (kk == 2) {
      asm volatile("cp.async.wait_group 1;\n" ::: "memory");
    } else {
      asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    }
  }
  // Column j of row r (any column of the row outside 1 .. kKeepCols: its cells are not inside).
  template <bool kInside>
  __device__ float at(int r, int /*w*/, int j) const {
    return rows[r * kKeepCols + (kInside ? j - 1 : min(max(j - 1, 0), kKeepCols - 1))];
  }
  __device__ void keep_E(int r, int j, float E, bool in_range) const {
    if (in_range) rows[r * kKeepCols + j - 1] = E;
  }
};

// Which rows of its item a sweep takes. OneStripe: all of them (the short pairs' shapes).
// StackedStripe: one stripe of an item of several (a warp an item, G = 32; kernel_traits.cuh's
// "Stripes"), its neighbours' rows passed through the ring as the log-space stripes pass them, as
// H, a chunk's columns at a time, column q by lane q: a chunk costs the warp one load, one exp2
// and one lg2 and the hand-overs to lane 0 and from lane G - 1. H200, kernel times
// of that design (its hand-overs by shuffles) against lane 0 taking 8 entries and lane 31
// leaving one a step, both converted by the whole warp: (8, 8192^2) 3.27 -> 2.79 ms, (256,
// 256^2) 105 -> 91 us, (32, 1024^2) 307 -> 290 us, (1, 4096^2) 1.085 -> 1.081 ms. Lane 31
// leaving its 8 at the chunk's end made (1, 4096^2) 1.27 ms. The hand-overs now go through a few
// floats of the warp's shared memory (share_with_lane0, share_from_last_lane): H100, 0-5% off the
// long forwards against shuffles.
struct OneStripe {
  static constexpr int i0 = 0;
};
// RingStripe<kPlanes>: kPlanes values a column through the ring (linear: H; affine: H of D and
// of U), plane p at `plane` entries after plane 0.
template <int kPlanes>
struct RingStripe {
  int i0;                   // the stripe's rows are i0 + 1 .. i0 + 32 R
  const RingEntry* in;      // the slot the stripe above writes; null for the first stripe
  RingEntry* out;           // this stripe's slot
  int64_t plane;            // entries from one plane to the next (kPlanes > 1)
  bool leaves_row;          // a stripe below reads this one's last row
  unsigned tag;             // of this stripe's entries (the stripe above's: tag - 1)
  int lane;                 // lane q < kW takes and leaves column q of each chunk's columns
  float* exchange;          // the warp's kExchangeFloats of shared memory, 16-byte aligned
  RingEntry word[kPlanes] = {};  // the entries of this lane's column of the next chunk, as loaded

  // A chunk's columns of a plane, to lane 0 and from lane G - 1, each way through a half. Each
  // helper below stores into its half before its __syncwarp; what keeps the next chunk's stores
  // from overtaking another lane's loads of the chunk before is the __syncwarp of the other
  // helper and the chunk's own: a caller that uses one helper twice in a row needs one between.
  static constexpr int kExchangeFloats = 2 * kPlanes * kLongestSteps;

  struct Values {
    float v[kPlanes];
  };

  // Starts loading column c0 + lane of the row above (lanes below kW of a stripe below the first,
  // columns up to n: the ring's pad, kRingReadPast entries, is shorter than the columns past n that
  // the last chunks of 32 steps would reach, 32 + 2 kW - 3, as compute-sanitizer's memcheck found).
  template <int kW>
  __device__ void request(int c0, int n) {
    if (in != nullptr && lane < kW && c0 + lane <= n) {
#pragma unroll
      for (int p = 0; p < kPlanes; ++p) {
        asm("ld.relaxed.gpu.global.b64 %0, [%1];" : "=l"(word[p]) : "l"(in + p * plane + c0 + lane));
      }
    }
  }
  // The values of column c0 + lane (requested before), once every lane's entries up to column n
  // carry the stripe above's tag.
  template <int kW>
  __device__ Values take(int c0, int n) {
    const bool mine = in != nullptr && lane < kW && c0 + lane <= n;
    bool stale = mine && stale_planes();
    while (__any_sync(kFullMask, stale)) {
      if (stale) {
#pragma unroll
        for (int p = 0; p < kPlanes; ++p) {
          if (ring_tag(word[p]) != tag - 1) word[p] = ring_load(in + p * plane + c0 + lane);
        }
      }
      stale = mine && stale_planes();
    }
    Values h;
#pragma unroll
    for (int p = 0; p < kPlanes; ++p) h.v[p] = ring_value(word[p]);
    return h;
  }
  // Lane q's `mine` (q < kW: its column of the chunk) as every lane's above[p][q], where lane 0
  // reads the row above: a store a lane and kW / 4 16-byte loads a plane, in place of kW
  // shuffles a plane (the chunk's boundary).
  template <int kW>
  __device__ void share_with_lane0(const Values& mine, float (&above)[kPlanes][kW]) const {
    static_assert(kW % 4 == 0 && kW <= kLongestSteps, "a chunk of whole 16-byte vectors");
    float* const half = exchange;
    if (lane < kW) {
#pragma unroll
      for (int p = 0; p < kPlanes; ++p) half[p * kW + lane] = mine.v[p];
    }
    __syncwarp();
#pragma unroll
    for (int p = 0; p < kPlanes; ++p) {
#pragma unroll
      for (int q = 0; q < kW; q += 4) {
        const float4 f = *reinterpret_cast<const float4*>(half + p * kW + q);
        above[p][q] = f.x, above[p][q + 1] = f.y, above[p][q + 2] = f.z, above[p][q + 3] = f.w;
      }
    }
  }
  // Lane `last_lane`'s last[p][q] (its last row at the chunk's step q) as lane q's value (q <
  // kW; 0 elsewhere): kW / 4 16-byte stores a plane and a load, in place of kW shuffles and
  // selects a plane.
  template <int kW>
  __device__ Values share_from_last_lane(const float (&last)[kPlanes][kW], int last_lane) const {
    static_assert(kW % 4 == 0 && kW <= kLongestSteps, "a chunk of whole 16-byte vectors");
    float* const half = exchange + kPlanes * kLongestSteps;
    if (lane == last_lane) {
#pragma unroll
      for (int p = 0; p < kPlanes; ++p) {
#pragma unroll
        for (int q = 0; q < kW; q += 4) {
          *reinterpret_cast<float4*>(half + p * kW + q) =
              make_float4(last[p][q], last[p][q + 1], last[p][q + 2], last[p][q + 3]);
        }
      }
    }
    __syncwarp();
    Values h;
#pragma unroll
    for (int p = 0; p < kPlanes; ++p) h.v[p] = lane < kW ? half[p * kW + lane] : 0.f;
    return h;
  }
  // Column j of this stripe's last row for the stripe below.
  __device__ void put(int j, const Values& h) const {
#pragma unroll
    for (int p = 0; p < kPlanes; ++p) ring_put(out + p * plane + j, h.v[p], tag);
  }

 private:
  __device__ bool stale_planes() const {
    bool stale = false;
#pragma unroll
    for (int p = 0; p < kPlanes; ++p) stale |= ring_tag(word[p]) != tag - 1;
    return stale;
  }
};
using StackedStripe = RingStripe<1>;
template <class Stripe>
constexpr bool kIsStacked = !std::is_same_v<Stripe, OneStripe>;

// The sweep of a warp's items (the striped forward's cells, lanes, tiles and steps) in
// probability space: leaves each lane's rows (their ends, local) in `rows`, global the value at
// (m, n) in `final_value` of the lane that has it; sets `bad` where the item is refused.
template <int G, int R, Ends kEnds, class Scores, class Keep, class Stripe>
__device__ __forceinline__ void sweep(Scores& src, int m, int n, float gap_c, float gap,
                                      float scale, float t, int steps, int l,
                                      Rows<R, is_local(kEnds)>& rows, bool& bad,
                                      float& final_value, bool& has_final, Keep& keep,
                                      Stripe& stripe) {
  using Sw = Sweep<false, G, R, Scores::kStepsPerChunk>;
  constexpr int kW = Sw::kW;
  constexpr bool kLocal = is_local(kEnds), kSoft = kEnds == Ends::kSoft;
  constexpr bool kSaves = kSavesLog<Keep>;
  constexpr bool kKeeps = !std::is_same_v<Keep, KeepNothing> && !kSaves;
  constexpr bool kStacked = kIsStacked<Stripe>;
  static_assert(!kStacked || (G == 32 && !kKeeps), "a warp per item, nothing kept");
  static_assert(!kSaves || kStacked, "only the stacked forward saves for the log-space adjoint");
  const int first_row = stripe.i0 + l * R + 1;
  const int rows_inside = min(max(m - stripe.i0 - l * R, 0), R);
  // A stripe below the first: lane 0's row above from the ring, a chunk's columns at the
  // chunk's start, the next chunk's requested then.
  static_assert(!kStacked || kW <= G, "a lane for each of a chunk's columns");
  bool reads_ring = false;
  [[maybe_unused]] float above_ring[1][kW];  // lane 0's row above, this chunk's columns, its scale
  [[maybe_unused]] float last_row[1][kW];    // lane G - 1's last row at this chunk's steps, z
  if constexpr (kStacked) {
    reads_ring = stripe.in != nullptr && l == 0;
    stripe.template request<kW>(0, n);
  }
  const int below = 126 - kW * int(ceilf(fabsf(gap_c)));  // Rows::loses
  // Z(i, 0) in each row's scale, in [1, 2) so that a renormalisation keeps the row's k (the lanes
  // of G > kW reach column 0 over several chunks, taking this value each time): 1 (local; k = 0)
  // or G^i / 2^k. i g log2(e) / t - k lies in [0, 1) but rounds to 1 where |i g log2(e) / t| is
  // below 2^-25 (k = -1): held below 2 (otherwise gaps of -1e-10 made global scores
  // up to t ln 2 too high, the renormalisation raising k under a cached z of 2).
  float column_zero[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    column_zero[r] = kLocal ? 1.f
                            : fminf(dp::device::ex2(float(first_row + r) * gap_c - float(rows.k[r])),
                                    0x1.fffffep0f);
  }
  float up = 1.f, from_lane_above = 1.f;  // the row above at this lane's column, its factor

  src.first();
  for (int kk = 0; kk * kW < steps; ++kk) {
    __syncwarp();  // every lane is done with the chunk before
    const bool next = (kk + 1) * kW < steps;
    src.begin_chunk(kk, next);
    // The chunk's scales: each row's k, then the lane above's last row with its k.
    const int j0 = kk * kW - l;  // this lane's column at the chunk's first step
    const bool cells_ahead = rows_inside > 0 && j0 + kW - 1 >= 1 && j0 <= n;
    if (kk > 0) {
      rows.renormalize(cells_ahead, j0 <= n, rows_inside, below, bad);
      // The row above at column j0 - 1, the first step's diagonal: Rows::loses bounds the row
      // above at j0, which may have risen far above it.
      bad |= cells_ahead && !(rows.diag >= 0x1p-126f);
    }
    if constexpr (kKeeps) {
#pragma unroll
      for (int r = 0; r < R; ++r) keep.k[(kk * R + r) * 32] = int16_t(rows.k[r]);
    }
    up = __shfl_up_sync(kFullMask, rows.z[R - 1], 1, G);
    const int k_above = __shfl_up_sync(kFullMask, rows.k[R - 1], 1, G);
    from_lane_above = factor(k_above - rows.k[0]);
    // Lane 0's row above is DP row 0: at column j0 - 1, 2^0 (local) or
    // 2^((j0 - 1) g log2(e) / t).
    const int k_row0 = kLocal ? 0 : int(floorf(float(j0 - 1) * gap_c));
    bad |= cells_ahead && !reads_ring &&
           rows.loses((l == 0 ? k_row0 : k_above) - rows.k[0], rows.k[0], below);
    if constexpr (kStacked) {
      // This chunk's columns of the row above as H (lane q: column kk kW + q), brought to row
      // 0's scale, then to lane 0; the value at the chunk's first column (lane 0's) gets the
      // check a lane above gets (clamped: -inf, and NaN, which the ends refuse anyway).
      const float h = stripe.template take<kW>(kk * kW, n).v[0];
      stripe.template request<kW>((kk + 1) * kW, n);
      const int k_lane0 = __shfl_sync(kFullMask, rows.k[0], 0);
      const float first = floorf(h * scale) - float(rows.k[0]);
      bad |= reads_ring && cells_ahead &&
             rows.loses(int(fminf(fmaxf(first, -1e6f), 1e6f)), rows.k[0], below);
      if constexpr (kSaves) {  // the row above for the adjoint, as the log-space forward saves it
        const int j = kk * kW + stripe.lane;
        if (stripe.lane < kW && j <= n) {
          keep.above[j] = stripe.in != nullptr ? h : kLocal ? 0.f : float(j) * keep.gap;
        }
      }
      stripe.template share_with_lane0<kW>({dp::device::ex2(fmaf(h, scale, -float(k_lane0)))},
                                           above_ring);
    }
    const float row0_local = rows.one[0];
    float gap_above[R];  // G times the factor from the row above
#pragma unroll
    for (int r = 0; r < R; ++r) gap_above[r] = gap * rows.from_above[r];
    src.wait(kk, next);
    __syncwarp();  // and every lane's copies
    const bool interior = Sw::chunk_inside(m, n, stripe.i0, kk);
    const auto sweep_chunk = [&](auto inside_constant) {
      constexpr bool kInside = decltype(inside_constant)::value;
#pragma unroll
      for (int w = 0; w < kW; ++w) {
        const int j = j0 + w;  // this lane's column at this step
        float row0 =
            kLocal ? row0_local : dp::device::ex2(fmaf(float(j), gap_c, -float(rows.k[0])));
        if constexpr (kStacked) row0 = reads_ring ? above_ring[0][w] : row0;
        const float u = l == 0 ? row0 : up * from_lane_above;  // row 0's above, its scale
        float d = rows.diag;
        rows.diag = u;
        [[maybe_unused]] const bool column_inside = kInside || unsigned(j - 1) < unsigned(n);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const float E = dp::device::ex2(src.template at<kInside>(r, w, j) * scale);
          src.keep_E(r, j, E, kInside || unsigned(j - 1) < unsigned(kKeepCols));
          const float old = rows.z[r];
          const float rest = dp::prob::linear_match<kLocal>(E, d, rows.one[r]);
          // Below the lane's first row, the row above's new z enters last: one FFMA a row on the
          // step's dependence chain, not a multiply, an add and an FFMA (H200: the same times as
          // G (u + old), within the noise).
          float z = r == 0 ? dp::prob::linear_cell(rest, gap, u, old)
                           : dp::prob::linear_cell_scaled_up(rest, gap, old, gap_above[r],
                                                             rows.z[r - 1]);
          // Column 0, and before it (with G > kW, lanes reach column 0 over several chunks), the
          // boundary: a z of [1, 2) that keeps the row's k.
          if (!kInside) z = j <= 0 ? column_zero[r] : z;
          if constexpr (kLocal) {
            const float mine = z * rows.to_acc[r];
            const float add = kInside || (column_inside && r < rows_inside) ? mine : 0.f;
            if constexpr ((kKeeps || kSaves) && !kSoft) {
              keep.best_j[r] = add > rows.acc[r] ? j : keep.best_j[r];
            }
            rows.acc[r] = kSoft ? rows.acc[r] + add : dp::device::max_nan(rows.acc[r], add);
          }
          if constexpr (kKeeps) {
            if (kInside || unsigned(j) <= unsigned(kKeepCols)) {
              keep.z[(first_row - 1 + r) * kKeepWidth + j] = z;
            }
          }
          if constexpr (kSaves) {  // every step the workspace has (the ring's H, to the bit)
            const int step = kk * kW + w;
            if (kInside || step < keep.steps) {
              keep.values[int64_t(step) * Sw::Sh::kSlab + r * G + l] = log_space(z, rows.k[r], t);
            }
          }
          rows.z[r] = z;
          if (r + 1 < R) d = old * rows.from_above[r + 1];
        }
        if constexpr (!kLocal) {  // docs/spec.md, "Score": the value at (m, n)
          if (j == n && m >= first_row && m < first_row + R) {
#pragma unroll
            for (int r = 0; r < R; ++r) {
              if (first_row + r == m) {
                bad |= !(rows.z[r] >= kTiny && rows.z[r] < INFINITY);  // NaN too
                final_value = log_space(rows.z[r], rows.k[r], t);
              }
            }
            has_final = true;
          }
        }
        if constexpr (kStacked) last_row[0][w] = rows.z[R - 1];
        up = __shfl_up_sync(kFullMask, rows.z[R - 1], 1, G);  // for the next step
      }
    };
    if (interior) {
      sweep_chunk(std::true_type{});
    } else {
      sweep_chunk(std::false_type{});
    }
    if constexpr (kStacked) {
      // The chunk's last row (lane G - 1's, at its columns kk kW - (G - 1) + q, in the k it kept
      // through the chunk) as H for the stripe below, column q by lane q. Every lane calls the
      // exchange (its __syncwarp) and the shuffle, outside any branch: inside one the compiler
      // emulates a shuffle (WARPSYNC.COLLECTIVE), slowly.
      const float mine = stripe.template share_from_last_lane<kW>(last_row, G - 1).v[0];
      const int k_last = __shfl_sync(kFullMask, rows.k[R - 1], G - 1);
      const int j = kk * kW - (G - 1) + stripe.lane;
      if (stripe.leaves_row && stripe.lane < kW && j >= 0 && j <= n) {
        stripe.put(j, {log_space(mine, k_last, t)});
      }
    }
  }
}

// A local sweep's rows in one sum (or max) at their largest exponent: total 2^top.
template <int R, bool kSoft, bool kAtLeastOne>
__device__ __forceinline__ float rows_total(const Rows<R, true, kAtLeastOne>& rows, int& top) {
  top = rows.ka[0];
#pragma unroll
  for (int r = 1; r < R; ++r) top = max(top, rows.ka[r]);
  float total = 0.f;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float x = scale_down(rows.acc[r], rows.ka[r] - top);
    total = kSoft ? total + x : dp::device::max_nan(total, x);
  }
  return total;
}

// A local sweep's lane end in log space: its rows' sum (or max) as End's best with a soft sum of
// 1, or best 0 and soft sum 0 where no cell of the lane counted; `bad` where the sum is not
// finite (an inf or NaN cell reaches it). `top`: the exponent of the rows' total.
template <int R, bool kSoft, bool kAtLeastOne>
__device__ __forceinline__ End lane_end(const Rows<R, true, kAtLeastOne>& rows, float t, int& top,
                                        bool& bad) {
  const float total = rows_total<R, kSoft>(rows, top);
  bad |= !(total < INFINITY);  // NaN too
  End end;
  end.soft_sum = 0.f;
  if (total > 0.f) {
    const float best = log_space(total, top, t);
    end.best = kSoft ? best : fmaxf(best, 0.f);
    end.soft_sum = 1.f;
  }
  return end;
}

// The end of a warp's items of one stripe: the groups that refuse their item (a bit each) leave it
// to the log-space sweep of the same warp (log_space/forward.cuh's forward_unit, on the same shared
// memory), the others store their score (local: the group's merged `end`; global: `final_value`
// from the lane of row m).
template <bool kAffine, int G, int R, Ends kEnds>
__device__ __forceinline__ void keep_or_redo(bool bad, const End& end, float final_value,
                                             bool has_final, int m, int l, int grp, int64_t b,
                                             int64_t unit, const ProblemView<float>& v,
                                             int64_t B, const Geometry& geo, const Workspace& ws,
                                             const dp::Config<float>& c, float* score,
                                             float* warp_smem) {
  constexpr bool kLocal = is_local(kEnds), kSoft = kEnds == Ends::kSoft;
  const unsigned refused = groups_where<G>(bad);
  if (!(refused >> grp & 1u)) {
    if (kLocal && m > 0 && l == 0) score[b] = end.score(c, kSoft);
    if (!kLocal && has_final) score[b] = final_value;
  }
  if (refused != 0) {
    __syncwarp();  // every lane is done with the tiles
    stripes::forward_unit<kAffine, G, R, false, kEnds>(v, B, geo, ws, score, warp_smem, unit,
                                                       refused);
  }
}

// The end of a stripe of an item of several (a warp a stripe): the stripes of an item leave their
// ends whether or not it is refused (its last stripe waits for them, merges them and stores the
// score; the log-space forward then writes over a refused item's); global, the stripe of row m
// stores its value. A stripe that refuses (any lane `bad`), or the last stripe where
// `refuses_score` refuses the item's local score, flags every unit of the item in `redo`.
template <int G, bool kSave, class RefusesScore>
__device__ __forceinline__ void keep_or_flag(bool bad, const End& end, float final_value,
                                             bool has_final, int m, int l, int steps, int64_t b,
                                             int64_t unit, int stripe_index, int item_stripes,
                                             int n, const dp::Config<float>& c, bool local,
                                             bool soft, const Geometry& geo, const Workspace& ws,
                                             float* score, int* redo,
                                             const RefusesScore& refuses_score) {
  static_assert(G == 32, "a warp a stripe");
  if (local && steps > 0 && m > 0 && l == 0) {
    const float item_score =
        item_end<kSave>(end, b, stripe_index, item_stripes, n, c, soft, geo, ws, score);
    bad |= item_score == item_score && refuses_score(item_score);  // NaN: not the last stripe
  }
  if (!local && has_final) score[b] = final_value;
  if (groups_where<G>(bad) != 0 && l == 0) {
    for (int s = 0; s < item_stripes; ++s) redo[(unit / geo.stripes) * geo.stripes + s] = 1;
  }
}

// Items of one stripe (geo.stripes = 1): the warp sweeps the items it refuses again, in log
// space. kStacked, items of several stripes (G = 32, a warp a stripe; the stripes below have read
// this one's ring, so it cannot redo its own): a stripe that refuses flags every unit of its item
// in `redo` (zeroed by the host), which a log-space forward then takes (Workspace::only_units).
// kChunk: steps per chunk (kSteps or kLongSteps); a warp whose items all allow it (t at least
// kLongestStepsMinTemperature, |g| log2(e) / t within gap_bound(kLongChunk)) takes chunks of
// kLongChunk steps instead. kSave (kStacked only): the forward of a forward + backward, which
// leaves what the log-space adjoint reads (SaveLog, and the item's end in ws.ends); the items it
// refuses are flagged as without it, for the log-space saving forward.
template <int G, int R, Ends kEnds, bool kStacked, int kChunk, int kLongChunk = kChunk,
          bool kSave = false>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    forward_kernel(ProblemView<float> v, int64_t B, Geometry geo, Workspace ws, float* score,
                   int* redo) {
  using Sh = typename Sweep<false, G, R, kChunk>::Sh;
  using LongSh = typename Sweep<false, G, R, kLongChunk>::Sh;
  constexpr int kGroups = Sh::kGroups, kRows = Sh::kRows;
  static_assert(Sh::kBuffers == 2 && LongSh::kBuffers == 2,
                "the next chunk's scores load while this one is swept");
  static_assert(kChunk * gap_bound(kChunk) <= 96 && kLongChunk * gap_bound(kLongChunk) <= 96,
                "no cell of a chunk below 2^-96 (the top of the file)");
  static_assert(kLongChunk >= kChunk, "the long chunks take the smaller gaps");
  constexpr bool kLocal = is_local(kEnds), kSoft = kEnds == Ends::kSoft;
  static_assert(!kStacked || Sh::kStacked, "items of several stripes: a warp an item");
  static_assert(!kSave || kStacked, "the saving forward of items of one stripe is the fused one");
  using Stripe = std::conditional_t<kStacked, StackedStripe, OneStripe>;
  using Keep = std::conditional_t<kSave, SaveLog<R>, KeepNothing>;
  // The warp's shared memory: this sweep's tiles (of either chunk), or the log-space sweep's
  // (forward_unit, chunks of forward_chunk_steps) for the items of one stripe it refuses.
  using LogSh = typename Sweep<false, G, R, forward_chunk_steps(false, G)>::Sh;
  constexpr int kTileFloats =
      Sh::kWarpFloats > LongSh::kWarpFloats ? Sh::kWarpFloats : LongSh::kWarpFloats;
  constexpr int kSmemFloats = kTileFloats > LogSh::kWarpFloats ? kTileFloats : LogSh::kWarpFloats;
  __shared__ float smem[kWarpsPerBlock][kSmemFloats];

  const int warp = threadIdx.x / 32, lane_id = threadIdx.x % 32;
  if (int64_t(blockIdx.x) * kWarpsPerBlock + warp >= geo.units) return;  // the whole warp
  const int grp = lane_id / G, l = lane_id % G;
  const int64_t unit = unit_of_warp(warp, ws);
  const int stripe_index = int(unit % geo.stripes);
  const int64_t b = (unit / geo.stripes) * kGroups + grp;
  const int i0 = stripe_index * kRows;
  dp::Config<float> c = v.config;
  c.local = kLocal;  // a constant from here on
  const float t = c.temperature, scale = dp::device::exp2_scale(t);  // exp(x / t) = exp2(x scale)
  const int64_t N = v.N;

  dp::Item<float> it;
  int m = 0, n = 0, item_stripes = 0;
  float gap_c = 0.f;  // g log2(e) / t
  bool bad = false;
  if (b < B) {
    it = v.item(b);
    item_stripes = (it.m + kRows - 1) / kRows;
    if (it.m == 0 || it.n == 0) {  // only boundaries: the general sweep has them
      if (stripe_index == 0 && l == 0) {
        const dp::LocalEnd<float> e = forward_boundary_item<false>(it, b, c, ws, score);
        if (kSave && kLocal) End{e.best, e.soft_sum, e.best_i, e.best_j}.store(ws.ends + b * 4);
      }
    } else if (stripe_index < item_stripes) {
      m = it.m;
      n = it.n;
      gap_c = it.open.at(1, 1) * scale;
      // NaN too (every stripe of the item alike)
      bad = !(fabsf(gap_c) <= float(gap_bound(kChunk)));
      gap_c = bad ? 0.f : gap_c;
    }
  }
  // Chunks of kLongChunk steps where every item of the warp allows them (every stripe of an item
  // alike).
  const bool long_chunks =
      kLongChunk > kChunk && t >= kLongestStepsMinTemperature &&
      __all_sync(kFullMask, fabsf(gap_c) <= float(gap_bound(kLongChunk)));
  const float gap = dp::device::ex2(gap_c);
  const float* scores = m > 0 ? it.scores : v.scores;  // a valid address for every lane
  // Items refused by their gap take no steps of their own.
  const int steps = __reduce_max_sync(kFullMask, unsigned(m > 0 && !bad ? n + G : 0));
  __syncwarp();

  float* const warp_smem = &smem[warp][0];
  // What the sweep gives the items it keeps: global, t ln Z(m, n) in the lane of row m;
  // local, the lanes' end.
  float final_value = 0.f;
  bool has_final = false;
  End end;
  // A warp of only such items (or empty ones) skips the sweep, its set-up and its ends, and goes
  // straight to the log-space sweep: at low temperatures, whole batches.
  if (steps > 0) {
    Rows<R, kLocal> rows(i0 + l * R + 1, gap_c);
    Keep keep{};
    if constexpr (kSave) {
      const int64_t at = b * geo.stripes + stripe_index;
      keep.values = ws.values + at * geo.steps * Sh::kSlab;
      keep.above = ws.above + at * geo.width;
      keep.steps = geo.steps;
      keep.gap = m > 0 ? it.open.at(1, 1) : 0.f;
#pragma unroll
      for (int r = 0; r < R; ++r) keep.best_j[r] = 0;
    }
    Stripe stripe{};
    if constexpr (kStacked) {
      const bool reads_row = stripe_index > 0;
      const unsigned tag = stripe_index + 1;  // the stripe above wrote `stripe_index`
      stripe.i0 = i0;
      stripe.in = reads_row ? ring_slot<1>(ws, geo, b, (stripe_index + 1) % 2) : nullptr;
      stripe.lane = l;
      stripe.out = ring_slot<1>(ws, geo, b, stripe_index % 2);
      stripe.leaves_row = stripe_index + 1 < item_stripes;
      stripe.tag = tag;
      __shared__ __align__(16) float exchange[kWarpsPerBlock][Stripe::kExchangeFloats];
      stripe.exchange = &exchange[warp][0];
    }
    const auto sweep_in_chunks = [&](auto chunk_constant) {
      TileScores<G, R, decltype(chunk_constant)::value> src{warp_smem, scores, m, n, l, grp, i0, N};
      sweep<G, R, kEnds>(src, m, n, gap_c, gap, scale, t, steps, l, rows, bad, final_value,
                         has_final, keep, stripe);
    };
    if (long_chunks) {
      sweep_in_chunks(std::integral_constant<int, kLongChunk>{});
    } else {
      sweep_in_chunks(std::integral_constant<int, kChunk>{});
    }

    if constexpr (kLocal) {
      // The lane's rows in one sum (or max) at their largest exponent, then the lanes' ends in log
      // space (End), with the empty alignment (0) once per item.
      int top;
      end = lane_end<R, kSoft>(rows, t, top, bad);  // a lane with no cells inside: 0, 0
      if constexpr (kSave && !kSoft) {
        // Where the maximum is, for the adjoint's seed: the lane's first maximal row (row-major
        // first), against the empty alignment (0 at (0, 0)), as the log-space forward keeps it.
        end = End{};
        float lane_best = 0.f;
        int best_r = -1;
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const float x = scale_down(rows.acc[r], rows.ka[r] - top);
          best_r = x > lane_best ? r : best_r;
          lane_best = x > lane_best ? x : lane_best;
        }
        if (best_r >= 0) {
          End cell;
          cell.best = log_space(lane_best, top, t);
          cell.i = i0 + l * R + 1 + best_r;
          cell.j = keep.best_j[best_r];
          end.merge(cell, c, false);
        }
      }
      if (kSoft && l == 0 && stripe_index == 0) {
        End empty;  // best 0, soft sum 1
        empty.merge(end, c, kSoft);
        end = empty;
      }
      end.merge_group<G>(c, kSoft);
    }
  }

  if constexpr (kStacked) {
    keep_or_flag<G, kSave>(bad, end, final_value, has_final, m, l, steps, b, unit, stripe_index,
                           item_stripes, n, c, kLocal, kSoft, geo, ws, score, redo,
                           [](float) { return false; });
    return;
  }
  keep_or_redo<false, G, R, kEnds>(bad, end, final_value, has_final, m, l, grp, b, unit, v, B, geo,
                                   ws, c, score, warp_smem);
}

}  // namespace scaled
}  // namespace stripes
}  // namespace softalign
