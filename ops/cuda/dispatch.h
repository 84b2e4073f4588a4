// Which CUDA kernel runs for a call (docs/design.md, "Which kernel runs when"): every rule in
// one place, dispatch.cu's choose_forward_kernel and choose_backward_kernel; the launch code
// (smith_waterman_cuda.cu, launch/striped.cuh) runs what they choose and decides nothing.
//
// The rules, in the order they are tried (G lanes per item, R rows per lane, t the temperature,
// "one stripe": M <= G R; figures are kernel times):
//
// Path (both directions)
//   not float32, or a penalty not constant per item,   general: a thread per item, sweep.h's
//   or M or N > 2^31 - 4097, or SOFTALIGN_CUDA_GENERAL   row-major sweeps (every dtype and shape;
//                                                        the striped kernels count in 32 bits)
//   otherwise                                            striped (kernel_traits.cuh)
//
// Shape of the striped kernels (G x R)
//   M <= 32, B <= 1024          32 x 1   a warp an item: few items, so more lanes each
//   M <= 32                     8 x 4 (linear), 16 x 2 (affine)   many short items: a quarter
//                               (half) warp an item; affine keeps 3 states a row, so fewer rows
//   B M >= 2^20                 32 x 4 (linear), 32 x 2 (affine)  enough stripes to fill the
//                               chip: fewer, taller ones
//   otherwise                   32 x 1   few long pairs: a row a lane, more warps share a pair
//
// Forward without grad (striped), first match wins
//   linear, G < 32 or R = 1, t > 0, one stripe      prob_space/linear_forward.cuh, one stripe;
//                                                   chunks of 16 steps where G = 32 and t >= 0.5
//                                                   (H200, t = 1: (1024, 32, 1024) 59 vs 78 us
//                                                   with 8), else 8. One exp2 a cell instead of
//                                                   three and a log2; refused items redone in log
//                                                   space by the same warps
//   linear, R = 1, several stripes, t >= 0.5        prob_space/linear_forward.cuh, stacked
//                                                   (chunks of 32 steps for local items at t >= 1
//                                                   where the gap allows), refused items redone by
//                                                   a second, log-space launch. Below t = 0.5 the
//                                                   refused items cost up to twice log space
//   affine, 16 x 2 or 32 x 1, t > 0, one stripe     prob_space/affine_forward.cuh, one stripe
//                                                   (H200, (65536, 32^2): 346 GCUPS against the
//                                                   streamed log-space forward's 243.5)
//   affine, 32 x 1, several stripes, t >= 0.5       prob_space/affine_forward.cuh, stacked, then
//                                                   a log-space launch for refused items (H100,
//                                                   (32, 1024^2) local max: 116.5 vs 72.5 GCUPS)
//   affine, 16 x 2, at least 2 items for each        log_space/streamed.cuh (7% faster at (65536,
//   resident group, N + 1 >= G, M N < 2^31           32^2); not linear: it read 1.6x the DRAM
//                                                   and was 15% slower
//   otherwise                                       log_space/forward.cuh
//
// Forward and backward (striped), first match wins
//   G R = 32 and (G < 32 or affine), one stripe,    prob_space/linear_adjoint.cuh or
//   t > 0, N <= 32                                  affine_adjoint.cuh: forward and adjoint in
//                                                   one kernel, every cell kept in shared memory;
//                                                   refused items take the log-space pair below
//   linear, 32 x 1, several stripes, t >= 0.5       the stacked probability-space forward that
//                                                   saves in log space's form, a log-space saving
//                                                   forward for its refused items, then the
//                                                   log-space adjoint dividing its weights by
//                                                   their sum
//   otherwise                                       log_space/forward.cuh (saving), then
//                                                   log_space/adjoint.cuh; linear divides its
//                                                   weights by their sum (H100, (32, 1024^2):
//                                                   656 -> 660 us), affine does not (17-20%
//                                                   slower)
//
// SOFTALIGN_CUDA_LOG_SPACE (set to anything) turns every probability-space row off, for tests
// and comparisons. Template switches, not kernel choices: the end (local max, local soft at
// t > 0, global) and, in the log-space adjoint, t = 0 (one-hot weights).
//
// Device limits: every kernel keeps its shared memory static (at most 40.6 KB a block, sm_90a;
// ptxas refuses more than 48 KB, which any device of compute capability 8.0 or later gives a
// block without opting in: no cudaFuncSetAttribute), at most 128 threads a block (the fused
// kernels 32) and at most 255 registers a thread (32 K registers a block of 128, half of an SM's
// 64 K on every such device). So every choice above launches on any of them; the device only
// sets the streamed forward's grid (its occupancy query: the blocks it holds at once). The
// kernels use nothing above sm_80 but cp.async.bulk.prefetch.L2 (kernel_traits.cuh's
// prefetch_l2), which compiles to nothing below sm_90 (and in a compute_80 PTX build).
#pragma once

#include <cstdint>

#include "../problem.h"

namespace softalign {
namespace dispatch {

// Lanes per item (G) and rows per lane (R) of the striped kernels.
struct LaneShape {
  int lanes = 0, rows = 0;
};

enum class ForwardKernel {
  kGeneral,            // a thread per item (general/kernels.cuh)
  kLogSpace,           // log_space/forward.cuh
  kStreamed,           // log_space/streamed.cuh
  kProbOneStripe,      // prob_space/linear_forward.cuh, items of one stripe, chunks of 8 steps
  kProbOneStripeLong,  // the same, chunks of 16 steps
  kProbStacked,        // prob_space/linear_forward.cuh, items of several stripes; then log space
  kProbAffineOneStripe,  // prob_space/affine_forward.cuh, items of one stripe
  kProbAffineStacked,    // prob_space/affine_forward.cuh, several stripes; then log space
};

enum class BackwardKernel {
  kGeneral,       // a thread per item (general/kernels.cuh)
  kLogSpace,      // log_space/forward.cuh (saving) + log_space/adjoint.cuh
  kProbFused,     // prob_space/{linear,affine}_adjoint.cuh; refused items: kLogSpace's pair
  kProbStacked,   // prob_space/linear_forward.cuh (saving) + log space's redo and adjoint
};

struct ForwardChoice {
  ForwardKernel kernel = ForwardKernel::kGeneral;
  LaneShape shape;  // striped kernels only
};

struct BackwardChoice {
  BackwardKernel kernel = BackwardKernel::kGeneral;
  LaneShape shape;  // striped kernels only
};

ForwardChoice choose_forward_kernel(const Problem& p);
BackwardChoice choose_backward_kernel(const Problem& p);

// Whether the call takes the striped kernels (the table's first rows).
bool striped(const Problem& p);

}  // namespace dispatch
}  // namespace softalign
