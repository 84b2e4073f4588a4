// The striped kernels of the affine gap model (see striped.h).
#include "striped_launch.cuh"

namespace softalign {
namespace striped {

template void forward<true>(const Problem& p, at::Tensor& score);
template void forward_backward<true>(const Problem& p, const at::Tensor& grad, ProblemGrads& out);

}  // namespace striped
}  // namespace softalign
