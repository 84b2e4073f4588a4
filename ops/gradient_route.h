// How autograd gets the gradient of a call whose penalties are one value per item
// (autograd/smith_waterman_autograd.cpp). By default the forward computes it at a seed of 1 and
// keeps it (one float a cell), and the backward scales it by grad. A backend may claim calls whose
// forward + backward is one kernel that scales by grad itself: for those the forward keeps
// nothing and the backward recomputes, which costs a no-grad forward where keeping costs a
// scaling and a float a cell (CUDA's short linear pairs at t > 0, cuda/smith_waterman_cuda.cu).
#pragma once

#include <ATen/ATen.h>

#include <array>

namespace softalign {

// Whether the backward recomputes this call (scores as the caller passed them).
using RecomputeRule = bool (*)(const at::Tensor& scores, bool affine, double temperature);

// The rule of each device type; a backend sets its own when the library loads.
inline RecomputeRule& recompute_rule(c10::DeviceType device) {
  static std::array<RecomputeRule, static_cast<size_t>(c10::DeviceType::COMPILE_TIME_MAX_DEVICE_TYPES)>
      rules{};
  return rules[static_cast<size_t>(device)];
}

inline bool backward_recomputes(const at::Tensor& scores, bool affine, double temperature) {
  const RecomputeRule rule = recompute_rule(scores.device().type());
  return rule != nullptr && rule(scores, affine, temperature);
}

}  // namespace softalign
