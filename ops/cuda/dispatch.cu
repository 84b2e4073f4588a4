// choose_forward_kernel and choose_backward_kernel: the rules of dispatch.h's table, each with
// its reason, in the order they are tried.
#include "dispatch.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "launch/striped.h"
#include "log_space/streamed.cuh"
#include "prob_space/linear_forward.cuh"

namespace softalign {
namespace dispatch {
namespace {

// SOFTALIGN_CUDA_GENERAL=1 sends every call to the general path (for tests and comparisons).
bool general_only() {
  static const bool only = std::getenv("SOFTALIGN_CUDA_GENERAL") != nullptr;
  return only;
}

// SOFTALIGN_CUDA_LOG_SPACE set (to anything) keeps every call in log space, for tests and
// comparisons: the probability-space kernels are then never taken.
bool log_space_only() {
  static const bool only = std::getenv("SOFTALIGN_CUDA_LOG_SPACE") != nullptr;
  return only;
}

// Temperatures from which items of several stripes go to probability space (and one-warp items
// take chunks of 16 steps): no item of N(0, 1) scores was seen refused there; below, at t = 0.25
// with chunks of 8 steps, the refused items (swept twice) made the forward cost up to twice
// log space.
constexpr float kLongStepsMinTemperature = stripes::scaled::kLongStepsMinTemperature;

LaneShape shape_of(const Problem& p) {
  const int64_t B = p.batch(), M = p.scores.size(1);
  const int rows_per_lane = p.affine() ? 2 : 4;  // affine keeps three states a row
  if (M <= 32 && B <= 1024) return {32, 1};      // few short items: a warp an item
  if (M <= 32) return {32 / rows_per_lane, rows_per_lane};  // many: a quarter (half) warp an item
  if (B * M >= (int64_t(1) << 20)) return {32, rows_per_lane};  // enough stripes: taller ones
  return {32, 1};  // few long pairs: a row a lane, so that more warps share each pair
}

int64_t stripes_of(const Problem& p, LaneShape s) {
  const int64_t M = p.scores.size(1), rows = int64_t(s.lanes) * s.rows;
  return std::max<int64_t>(1, (M + rows - 1) / rows);
}

}  // namespace

bool striped(const Problem& p) {
  const auto per_item = [](const at::Tensor& t) { return t.size(1) == 1 && t.size(2) == 1; };
  // The striped kernels count steps (N + 32, rounded up to whole chunks) and rows in 32 bits.
  constexpr int64_t kMaxExtent = INT32_MAX - 4096;
  return !general_only() && p.scores.scalar_type() == at::kFloat && per_item(p.gap_open) &&
         (!p.affine() || per_item(p.gap_extend)) && p.scores.size(1) <= kMaxExtent &&
         p.scores.size(2) <= kMaxExtent;
}

ForwardChoice choose_forward_kernel(const Problem& p) {
  ForwardChoice c;
  if (!striped(p)) return c;  // kGeneral: every dtype and penalty shape
  c.shape = shape_of(p);
  const int G = c.shape.lanes, R = c.shape.rows;
  const bool one_stripe = stripes_of(p, c.shape) == 1;
  const float t = static_cast<float>(p.temperature);  // as the kernels see it
  const bool prob = t > 0.f && !log_space_only();  // probability space needs t > 0
  const bool warm = t >= kLongStepsMinTemperature && !log_space_only();
  if (!p.affine()) {
    if ((G < 32 || R == 1) && prob && one_stripe) {  // one exp2 a cell, not three and a log2
      // a warp an item at t >= 0.5: chunks of 16 steps (H200, t = 1, (1024, 32, 1024): 59 vs 78 us)
      c.kernel = G == 32 && warm ? ForwardKernel::kProbOneStripeLong : ForwardKernel::kProbOneStripe;
      return c;
    }
    if (R == 1 && warm) {  // several stripes (G = 32): few items refused from t = 0.5 on
      c.kernel = ForwardKernel::kProbStacked;
      return c;
    }
  } else {
    const bool prob_shape = (G == 16 && R == 2) || (G == 32 && R == 1);
    if (prob_shape && prob && one_stripe) {  // H200, (65536, 32^2): 346 vs 243.5 GCUPS
      c.kernel = ForwardKernel::kProbAffineOneStripe;
      return c;
    }
    if (G == 32 && R == 1 && warm) {  // several stripes; H100, (32, 1024^2): 116.5 vs 72.5 GCUPS
      c.kernel = ForwardKernel::kProbAffineStacked;
      return c;
    }
    // The short pairs' affine shape, streamed when every resident group gets at least two items:
    // the skew paid once a group, not once an item (7% faster at (65536, 32^2)). Not linear: it
    // read 1.6x the DRAM and was 15% slower.
    if (G < 32) {
      const int64_t groups = ::softalign::striped::streamed_groups(p, G, R);
      if (stripes::streams(p.batch() / groups, p.scores.size(1), p.scores.size(2), G)) {
        c.kernel = ForwardKernel::kStreamed;
        return c;
      }
    }
  }
  c.kernel = ForwardKernel::kLogSpace;  // every mode, temperature and gap
  return c;
}

BackwardChoice choose_backward_kernel(const Problem& p) {
  BackwardChoice c;
  if (!striped(p)) return c;  // kGeneral: every dtype and penalty shape
  c.shape = shape_of(p);
  const int G = c.shape.lanes, R = c.shape.rows;
  const bool one_stripe = stripes_of(p, c.shape) == 1;
  const float t = static_cast<float>(p.temperature);  // as the kernels see it
  // The short pairs' shapes (affine also a warp an item): forward and adjoint in one kernel,
  // every cell of an item of at most kKeepCols columns kept in shared memory.
  if (G * R == 32 && (G < 32 || p.affine()) && one_stripe && t > 0.f &&
      p.scores.size(2) <= stripes::scaled::kKeepCols && !log_space_only()) {
    c.kernel = BackwardKernel::kProbFused;
    return c;
  }
  // Long linear pairs at t >= 0.5: the probability-space forward saves what the log-space
  // adjoint reads.
  if (!p.affine() && G == 32 && R == 1 && !one_stripe && t >= kLongStepsMinTemperature &&
      !log_space_only()) {
    c.kernel = BackwardKernel::kProbStacked;
    return c;
  }
  c.kernel = BackwardKernel::kLogSpace;
  return c;
}

}  // namespace dispatch
}  // namespace softalign
