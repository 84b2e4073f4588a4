// The striped kernels of the linear gap model (see striped.h).
#include "striped_launch.cuh"

namespace softalign {
namespace striped {

template void forward<false>(const Problem& p, at::Tensor& score);
template void forward_backward<false>(const Problem& p, const at::Tensor& grad, ProblemGrads& out);

}  // namespace striped
}  // namespace softalign
