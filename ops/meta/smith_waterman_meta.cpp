// Shapes and dtypes of every op, for torch.compile, torch.export and FakeTensor tracing.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <optional>
#include <tuple>

#include "../problem.h"

namespace softalign {
namespace {

at::Tensor score_like(const at::Tensor& scores) {
  TORCH_CHECK(scores.dim() == 3 || scores.dim() == 2,
              "scores must be (B, M, N) or unbatched (M, N), got shape ", scores.sizes());
  if (scores.dim() == 2) return at::empty({}, scores.options());
  return at::empty_symint({scores.sym_size(0)}, scores.options());
}

at::Tensor contiguous_like(const at::Tensor& t) {
  return at::empty_symint(t.sym_sizes(), t.options());
}

at::Tensor smith_waterman_meta(const at::Tensor& scores, const at::Tensor&,
                               const std::optional<at::Tensor>&, double,
                               const std::optional<at::Tensor>&, const std::optional<at::Tensor>&,
                               c10::string_view, c10::string_view) {
  return score_like(scores);
}

std::tuple<at::Tensor, at::Tensor> smith_waterman_alignment_meta(
    const at::Tensor& scores, const at::Tensor&, const std::optional<at::Tensor>&, double,
    const std::optional<at::Tensor>&, const std::optional<at::Tensor>&, c10::string_view,
    c10::string_view) {
  return {score_like(scores), contiguous_like(scores)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> smith_waterman_backward_meta(
    const at::Tensor&, const at::Tensor& scores, const at::Tensor& gap_open,
    const std::optional<at::Tensor>& gap_extend, double, const std::optional<at::Tensor>&,
    const std::optional<at::Tensor>&, c10::string_view, c10::string_view) {
  return {contiguous_like(scores), contiguous_like(gap_open),
          gap_extend.has_value() ? contiguous_like(*gap_extend)
                                 : at::empty({0}, scores.options())};
}

// The per-item gradients of _smith_waterman_forward_backward: (B, M, N) and (B, 1|M, 1|N) in
// the compute dtype.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> smith_waterman_forward_backward_meta(
    const at::Tensor& scores, const at::Tensor& gap_open,
    const std::optional<at::Tensor>& gap_extend, double, const std::optional<at::Tensor>&,
    const std::optional<at::Tensor>&, c10::string_view, c10::string_view) {
  const at::Tensor score = score_like(scores);
  const auto options = scores.options().dtype(compute_dtype(scores.scalar_type()));
  const c10::SymInt B = scores.dim() == 3 ? scores.sym_size(0) : c10::SymInt(1);
  const auto per_item = [&](const at::Tensor& penalty) {
    const int d = static_cast<int>(penalty.dim());
    const c10::SymInt rows = d >= 2 ? penalty.sym_size(d - 2) : c10::SymInt(1);
    const c10::SymInt cols = d >= 2 ? penalty.sym_size(d - 1) : c10::SymInt(1);
    return at::empty_symint({B, rows, cols}, options);
  };
  return {score, at::empty_symint({B, scores.sym_size(-2), scores.sym_size(-1)}, options),
          per_item(gap_open),
          gap_extend.has_value() ? per_item(*gap_extend) : at::empty({0}, options)};
}

}  // namespace

TORCH_LIBRARY_IMPL(softalign, Meta, m) {
  m.impl("smith_waterman.tensor", &smith_waterman_meta);
  m.impl("smith_waterman_alignment.tensor", &smith_waterman_alignment_meta);
  m.impl("_smith_waterman_backward", &smith_waterman_backward_meta);
  m.impl("_smith_waterman_forward_backward", &smith_waterman_forward_backward_meta);
}

}  // namespace softalign
