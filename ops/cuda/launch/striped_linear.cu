// The striped kernels of the linear gap model (see striped.h).
#include "striped.cuh"

namespace softalign {
namespace striped {

template void forward<false>(const Problem& p, const dispatch::ForwardChoice& choice,
                             at::Tensor& score);
template void forward_backward<false>(const Problem& p, const dispatch::BackwardChoice& choice,
                                      const at::Tensor& grad, ProblemGrads& out);

}  // namespace striped
}  // namespace softalign
