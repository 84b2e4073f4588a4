// The schema of every op (declared once) and the C++ front end of include/softalign/softalign.h.
#include "softalign/softalign.h"

#include <torch/library.h>

#include "op_handles.h"
#include "problem.h"

namespace softalign {

// The penalties as each overload takes them, then the arguments every overload shares.
#define SOFTALIGN_ARGS(GAP_OPEN, GAP_EXTEND)                                                    \
  "Tensor scores, " GAP_OPEN ", " GAP_EXTEND ", float temperature=1.0, "                       \
  "Tensor? lengths_a=None, Tensor? lengths_b=None, "                                           \
  "str mode=\"local\", str reduction=\"max\""

TORCH_LIBRARY(softalign, m) {
  // Penalties as numbers (the seed's call) or as tensors (learnable, per item or position).
  // The tensor overloads come first: overload resolution takes the first that matches, and a
  // tensor penalty must never be read as a number (that would drop its gradient).
  m.def("smith_waterman.tensor(" SOFTALIGN_ARGS("Tensor gap_open", "Tensor? gap_extend=None") ") -> Tensor");
  // One tensor beside a number, before the number overload: eager resolution would otherwise
  // reach it and read a 1-element tensor as a float (Tensor.__float__), dropping its gradient.
  m.def("smith_waterman.open_tensor(" SOFTALIGN_ARGS("Tensor gap_open", "float gap_extend") ") -> Tensor");
  m.def("smith_waterman.extend_tensor(" SOFTALIGN_ARGS("float gap_open", "Tensor gap_extend") ") -> Tensor");
  m.def("smith_waterman(" SOFTALIGN_ARGS("float gap_open=-1.0", "float? gap_extend=None") ") -> Tensor");
  m.def("smith_waterman_alignment.tensor(" SOFTALIGN_ARGS("Tensor gap_open", "Tensor? gap_extend=None") ") -> (Tensor, Tensor)");
  m.def("smith_waterman_alignment.open_tensor(" SOFTALIGN_ARGS("Tensor gap_open", "float gap_extend") ") -> (Tensor, Tensor)");
  m.def("smith_waterman_alignment.extend_tensor(" SOFTALIGN_ARGS("float gap_open", "Tensor gap_extend") ") -> (Tensor, Tensor)");
  m.def("smith_waterman_alignment(" SOFTALIGN_ARGS("float gap_open=-1.0", "float? gap_extend=None") ") -> (Tensor, Tensor)");
  m.def(
      "_smith_waterman_backward(Tensor grad, Tensor scores, Tensor gap_open, Tensor? gap_extend, "
      "float temperature, Tensor? lengths_a, Tensor? lengths_b, str mode, str reduction) "
      "-> (Tensor, Tensor, Tensor)");
  // The score and its gradient at a seed of 1 per item, for autograd's forward when grad is
  // needed (the backward then only scales it): score in the caller's shape and dtype; d score /
  // d scores as (B, M, N) and d score / d penalties as (B, 1|M, 1|N), per item, in the compute
  // dtype.
  m.def(
      "_smith_waterman_forward_backward(Tensor scores, Tensor gap_open, Tensor? gap_extend, "
      "float temperature, Tensor? lengths_a, Tensor? lengths_b, str mode, str reduction) "
      "-> (Tensor, Tensor, Tensor, Tensor)");
  // values (B, ...) times factors (B,), item by item: the backward's grad times the gradient the
  // forward kept (CUDA: one vectorized pass; elsewhere PyTorch's broadcast multiply).
  m.def("_scale_by_item(Tensor values, Tensor factors) -> Tensor");
}

#undef SOFTALIGN_ARGS

namespace {

// A number penalty becomes a 0-d tensor in the dtype the kernels compute in.
at::Tensor penalty_tensor(double value, const at::Tensor& scores) {
  return number_tensor(value, scores.options().dtype(compute_dtype(scores.scalar_type())));
}

std::optional<at::Tensor> penalty_tensor(std::optional<double> value, const at::Tensor& scores) {
  if (!value.has_value()) return std::nullopt;
  return penalty_tensor(*value, scores);
}

// A tensor penalty as it is.
const at::Tensor& penalty_tensor(const at::Tensor& value, const at::Tensor&) { return value; }

// The overloads with a number among the penalties (the numbers' one, open_tensor, extend_tensor):
// the .tensor overload of kOp with those numbers as 0-d tensors.
template <auto kOp, class GapOpen, class GapExtend>
decltype(auto) with_tensor_penalties(const at::Tensor& scores, GapOpen gap_open,
                                     GapExtend gap_extend, double temperature,
                                     const std::optional<at::Tensor>& lengths_a,
                                     const std::optional<at::Tensor>& lengths_b,
                                     c10::string_view mode, c10::string_view reduction) {
  return kOp().call(scores, penalty_tensor(gap_open, scores), penalty_tensor(gap_extend, scores),
                    temperature, lengths_a, lengths_b, mode, reduction);
}

}  // namespace

TORCH_LIBRARY_IMPL(softalign, CompositeImplicitAutograd, m) {
  using Tensor = const at::Tensor&;
  using Number = double;
  using OptionalNumber = std::optional<double>;
  m.impl("smith_waterman", &with_tensor_penalties<score_op, Number, OptionalNumber>);
  m.impl("smith_waterman.open_tensor", &with_tensor_penalties<score_op, Tensor, Number>);
  m.impl("smith_waterman.extend_tensor", &with_tensor_penalties<score_op, Number, Tensor>);
  m.impl("smith_waterman_alignment", &with_tensor_penalties<alignment_op, Number, OptionalNumber>);
  m.impl("smith_waterman_alignment.open_tensor",
         &with_tensor_penalties<alignment_op, Tensor, Number>);
  m.impl("smith_waterman_alignment.extend_tensor",
         &with_tensor_penalties<alignment_op, Number, Tensor>);
}

// Every backend but CUDA's (which has a kernel of its own), Meta included.
TORCH_LIBRARY_IMPL(softalign, CompositeExplicitAutograd, m) {
  m.impl("_scale_by_item", &scale_by_item);
}

// ------------------------------------------------------------------ C++ front end

SmithWatermanOptions& SmithWatermanOptions::gap_open(double value) {
  gap_open_ = at::scalar_tensor(value, at::kDouble);
  return *this;
}
SmithWatermanOptions& SmithWatermanOptions::gap_open(at::Tensor value) {
  gap_open_ = std::move(value);
  return *this;
}
SmithWatermanOptions& SmithWatermanOptions::gap_extend(double value) {
  gap_extend_ = at::scalar_tensor(value, at::kDouble);
  return *this;
}
SmithWatermanOptions& SmithWatermanOptions::gap_extend(at::Tensor value) {
  gap_extend_ = std::move(value);
  return *this;
}
SmithWatermanOptions& SmithWatermanOptions::temperature(double value) {
  temperature_ = value;
  return *this;
}
SmithWatermanOptions& SmithWatermanOptions::lengths_a(at::Tensor value) {
  lengths_a_ = std::move(value);
  return *this;
}
SmithWatermanOptions& SmithWatermanOptions::lengths_b(at::Tensor value) {
  lengths_b_ = std::move(value);
  return *this;
}
SmithWatermanOptions& SmithWatermanOptions::mode(std::string value) {
  mode_ = std::move(value);
  return *this;
}
SmithWatermanOptions& SmithWatermanOptions::reduction(std::string value) {
  reduction_ = std::move(value);
  return *this;
}

at::Tensor smith_waterman(const at::Tensor& scores, const SmithWatermanOptions& o) {
  return score_op().call(scores, o.gap_open(), o.gap_extend(), o.temperature(), o.lengths_a(),
                         o.lengths_b(), o.mode(), o.reduction());
}

std::tuple<at::Tensor, at::Tensor> smith_waterman_alignment(const at::Tensor& scores,
                                                            const SmithWatermanOptions& o) {
  return alignment_op().call(scores, o.gap_open(), o.gap_extend(), o.temperature(),
                             o.lengths_a(), o.lengths_b(), o.mode(), o.reduction());
}

}  // namespace softalign
