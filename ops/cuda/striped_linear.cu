// The striped kernels of the linear gap model (see striped.h).
#include "striped_launch.cuh"

namespace softalign {
namespace striped {

bool fuses_forward_backward(bool affine, int64_t B, int64_t M, int64_t N, double temperature) {
  return !affine && several_items_a_warp(B, M) && temperature > 0 &&
         N <= stripes::scaled::kKeepCols && !log_space_only();
}

template void forward<false>(const Problem& p, at::Tensor& score);
template void forward_backward<false>(const Problem& p, const at::Tensor& grad, ProblemGrads& out);

}  // namespace striped
}  // namespace softalign
