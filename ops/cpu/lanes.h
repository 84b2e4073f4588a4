// The CPU's SIMD path: groups of W items advance through the same DP cell in lockstep, one item per
// lane (docs/design.md, "CPU schedules"). One translation unit per instruction set (lanes_avx2.cpp)
// compiles ops/cpu/sweep_lanes.h; the CPU backend picks one at run time. float32 only.
#pragma once

#include <cstdint>

#include "../views.h"

namespace softalign {
namespace cpu {

// One group: the W item indices of its lanes, -1 for an empty lane.
struct LanesKernels {
  int width;
  // score[b] for the group's items.
  void (*forward)(const ProblemView<float>& p, bool affine, const int64_t* items, float* score);
  // score[b] and the gradients of the group's items (g zero-filled), for d loss / d score = grad.
  void (*forward_backward)(const ProblemView<float>& p, bool affine, const int64_t* items,
                           const float* grad, float* score, const GradsView<float>& g);
};

// The widest kernels this CPU runs, or null where none was built or the CPU lacks the ISA.
const LanesKernels* lanes_kernels();

}  // namespace cpu
}  // namespace softalign
