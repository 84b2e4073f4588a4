// The CPU's SIMD path: groups of W items advance through the same DP cell in lockstep, one item per
// lane (docs/design.md, "CPU schedules"). One translation unit per instruction set (lanes_avx2.cpp)
// compiles ops/cpu/sweep_lanes.h; the CPU backend picks one at run time. float32 only.
#pragma once

#include <cstdint>

#include "../views.h"

namespace softalign {
namespace cpu {

// One item swept in bands of rows, one row a lane (sweep_band.h), by any number of threads at
// once: each call of forward() (backward()) takes bands until none is left.
class BandJob {
 public:
  virtual ~BandJob() = default;
  virtual void forward() = 0;
  // The item's score, once every forward() has returned.
  virtual float score() = 0;
  // The item's gradients for d loss / d score = grad (g zero-filled), after score().
  virtual void backward(float grad, const GradsView<float>& g) = 0;
  // Once every backward() has returned: the sums over rows (penalties of one value an item).
  virtual void finish_backward(const GradsView<float>& g) = 0;
};

// One group: the W item indices of its lanes, -1 for an empty lane.
struct LanesKernels {
  int width;
  // score[b] for the group's items.
  void (*forward)(const ProblemView<float>& p, bool affine, const int64_t* items, float* score);
  // score[b] and the gradients of the group's items (g zero-filled), for d loss / d score = grad.
  void (*forward_backward)(const ProblemView<float>& p, bool affine, const int64_t* items,
                           const float* grad, float* score, const GradsView<float>& g);
  // The band sweep of item b (rows a band: band_rows), owned by the caller.
  int band_rows;
  BandJob* (*band_job)(const ProblemView<float>& p, bool affine, int64_t b);
};

// The widest kernels this CPU runs, or null where none was built or the CPU lacks the ISA.
const LanesKernels* lanes_kernels();

}  // namespace cpu
}  // namespace softalign
