// The striped kernels of the affine gap model (see striped.h).
#include "striped.cuh"

namespace softalign {
namespace striped {

template void forward<true>(const Problem& p, const dispatch::ForwardChoice& choice,
                            at::Tensor& score);
template void forward_backward<true>(const Problem& p, const dispatch::BackwardChoice& choice,
                                     const at::Tensor& grad, ProblemGrads& out);

int64_t streamed_groups(const Problem& p, int G, int R) {
  TORCH_INTERNAL_ASSERT(G == 16 && R == 2, "the streamed forward is affine's 16 x 2 shape");
  return Launch<true, 16, 2>::streamed_groups(view_of<float>(p).config);
}

}  // namespace striped
}  // namespace softalign
