// CPU backend: items spread over threads with at::parallel_for, each item's DP swept in
// row-major order by sweep.h.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <vector>

#include "../kernels.h"

namespace softalign {
namespace {

template <typename T, bool kAffine>
void forward_items(const Problem& p, at::Tensor& score) {
  using Model = dp::Model<T, kAffine>;
  const ProblemView<T> v = view_of<T>(p);
  T* out = score.data_ptr<T>();
  at::parallel_for(0, p.batch(), 1, [&](int64_t begin, int64_t end) {
    std::vector<T> rows;  // two rows per state: a forward without grad keeps O(N)
    for (int64_t b = begin; b < end; ++b) {
      const dp::Item<T> it = v.item(b);
      rows.resize(Model::Tab::size(2, it.n + 1));
      const typename Model::Tab table{rows.data(), 2, it.n + 1};
      dp::LocalEnd<T> local_end;
      out[b] = Model::forward(it, v.config, table, local_end);
    }
  });
}

template <typename T, bool kAffine>
void forward_backward_items(const Problem& p, const at::Tensor& grad, ProblemGrads& out) {
  using Model = dp::Model<T, kAffine>;
  const ProblemView<T> v = view_of<T>(p);
  const GradsView<T> gv = view_of<T>(out);
  const T* grad_of = grad.data_ptr<T>();
  T* score = out.score.data_ptr<T>();
  at::parallel_for(0, p.batch(), 1, [&](int64_t begin, int64_t end) {
    std::vector<T> values, adjoint;  // all DP values of one item; two rows of adjoints
    for (int64_t b = begin; b < end; ++b) {
      const dp::Item<T> it = v.item(b);
      values.resize(Model::Tab::size(it.m + 1, it.n + 1));
      adjoint.resize(Model::Tab::size(2, it.n + 1));
      const typename Model::Tab V{values.data(), it.m + 1, it.n + 1};
      const typename Model::Tab E{adjoint.data(), 2, it.n + 1};
      dp::LocalEnd<T> local_end;
      score[b] = Model::forward(it, v.config, V, local_end);
      Model::backward(it, v.config, V, local_end, score[b], grad_of[b], E, gv.item(b));
    }
  });
}

struct CpuBackend {
  static at::Tensor forward(const Problem& p) {
    at::Tensor score = at::empty({p.batch()}, p.scores.options());
    AT_DISPATCH_FLOATING_TYPES(p.scores.scalar_type(), "smith_waterman_cpu", [&] {
      if (p.affine()) {
        forward_items<scalar_t, true>(p, score);
      } else {
        forward_items<scalar_t, false>(p, score);
      }
    });
    return score;
  }

  static void forward_backward(const Problem& p, const at::Tensor& grad, ProblemGrads& out) {
    AT_DISPATCH_FLOATING_TYPES(p.scores.scalar_type(), "smith_waterman_backward_cpu", [&] {
      if (p.affine()) {
        forward_backward_items<scalar_t, true>(p, grad, out);
      } else {
        forward_backward_items<scalar_t, false>(p, grad, out);
      }
    });
  }
};

}  // namespace

TORCH_LIBRARY_IMPL(softalign, CPU, m) {
  SOFTALIGN_REGISTER_BACKEND(m, CpuBackend);
}

}  // namespace softalign
