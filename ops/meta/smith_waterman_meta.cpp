// Shapes and dtypes of every op, for torch.compile, torch.export and FakeTensor tracing.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <optional>
#include <tuple>

#include "../problem.h"

namespace softalign {
namespace {

// The Meta kernel runs whenever any argument is on the meta device. Real scores with a meta
// argument is a mixed-device call (docs/spec.md, "Bad input"), not a shape query: name the argument.
void check_meta_call(const at::Tensor& scores, const at::Tensor& gap_open,
                     const std::optional<at::Tensor>& gap_extend,
                     const std::optional<at::Tensor>& lengths_a,
                     const std::optional<at::Tensor>& lengths_b) {
  if (scores.is_meta()) return;
  const auto check = [&](const at::Tensor& t, const char* name) {
    TORCH_CHECK(!t.defined() || !t.is_meta(), name, " must be on the scores' device (",
                scores.device(), "), got ", t.device());
  };
  check(gap_open, "gap_open");
  if (gap_extend) check(*gap_extend, "gap_extend");
  if (lengths_a) check(*lengths_a, "lengths_a");
  if (lengths_b) check(*lengths_b, "lengths_b");
}

at::Tensor score_like(const at::Tensor& scores) {
  TORCH_CHECK(scores.dim() == 3 || scores.dim() == 2,
              "scores must be (B, M, N) or unbatched (M, N), got shape ", scores.sizes());
  if (scores.dim() == 2) return at::empty({}, scores.options());
  return at::empty_symint({scores.sym_size(0)}, scores.options());
}

at::Tensor contiguous_like(const at::Tensor& t) {
  return at::empty_symint(t.sym_sizes(), t.options());
}

at::Tensor smith_waterman_meta(const at::Tensor& scores, const at::Tensor& gap_open,
                               const std::optional<at::Tensor>& gap_extend, double,
                               const std::optional<at::Tensor>& lengths_a,
                               const std::optional<at::Tensor>& lengths_b, c10::string_view,
                               c10::string_view) {
  check_meta_call(scores, gap_open, gap_extend, lengths_a, lengths_b);
  return score_like(scores);
}

std::tuple<at::Tensor, at::Tensor> smith_waterman_alignment_meta(
    const at::Tensor& scores, const at::Tensor& gap_open,
    const std::optional<at::Tensor>& gap_extend, double,
    const std::optional<at::Tensor>& lengths_a, const std::optional<at::Tensor>& lengths_b,
    c10::string_view, c10::string_view) {
  check_meta_call(scores, gap_open, gap_extend, lengths_a, lengths_b);
  return {score_like(scores), contiguous_like(scores)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> smith_waterman_backward_meta(
    const at::Tensor&, const at::Tensor& scores, const at::Tensor& gap_open,
    const std::optional<at::Tensor>& gap_extend, double,
    const std::optional<at::Tensor>& lengths_a, const std::optional<at::Tensor>& lengths_b,
    c10::string_view, c10::string_view) {
  check_meta_call(scores, gap_open, gap_extend, lengths_a, lengths_b);
  return {contiguous_like(scores), contiguous_like(gap_open),
          gap_extend.has_value() ? contiguous_like(*gap_extend)
                                 : at::empty({0}, scores.options())};
}

// The per-item gradients of _smith_waterman_forward_backward: (B, M, N) and (B, 1|M, 1|N) in
// the compute dtype.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> smith_waterman_forward_backward_meta(
    const at::Tensor& scores, const at::Tensor& gap_open,
    const std::optional<at::Tensor>& gap_extend, double,
    const std::optional<at::Tensor>& lengths_a, const std::optional<at::Tensor>& lengths_b,
    c10::string_view, c10::string_view) {
  check_meta_call(scores, gap_open, gap_extend, lengths_a, lengths_b);
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

SOFTALIGN_LIBRARY_IMPL(Meta, m) {
  m.impl("smith_waterman.tensor", &smith_waterman_meta);
  m.impl("smith_waterman_alignment.tensor", &smith_waterman_alignment_meta);
  m.impl("_smith_waterman_backward", &smith_waterman_backward_meta);
  m.impl("_smith_waterman_forward_backward", &smith_waterman_forward_backward_meta);
}

}  // namespace softalign
