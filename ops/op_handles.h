// Typed handles of the schema'd ops, found once in the dispatcher: the C++ front end and the
// autograd Function call the ops through them (so every backend and key is honoured).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <optional>
#include <tuple>

namespace softalign {

using ScoreOp = at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                           double, const std::optional<at::Tensor>&,
                           const std::optional<at::Tensor>&, c10::string_view, c10::string_view);
using AlignmentOp = std::tuple<at::Tensor, at::Tensor>(
    const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&, double,
    const std::optional<at::Tensor>&, const std::optional<at::Tensor>&, c10::string_view,
    c10::string_view);
// The overloads whose temperature is a tensor.
using ScoreTemperatureTensorOp = at::Tensor(const at::Tensor&, const at::Tensor&,
                                            const std::optional<at::Tensor>&, const at::Tensor&,
                                            const std::optional<at::Tensor>&,
                                            const std::optional<at::Tensor>&, c10::string_view,
                                            c10::string_view);
using AlignmentTemperatureTensorOp = std::tuple<at::Tensor, at::Tensor>(
    const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&, const at::Tensor&,
    const std::optional<at::Tensor>&, const std::optional<at::Tensor>&, c10::string_view,
    c10::string_view);
using BackwardOp = std::tuple<at::Tensor, at::Tensor, at::Tensor>(
    const at::Tensor&, const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
    double, const std::optional<at::Tensor>&, const std::optional<at::Tensor>&, c10::string_view,
    c10::string_view);

using ForwardBackwardOp = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>(
    const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&, double,
    const std::optional<at::Tensor>&, const std::optional<at::Tensor>&, c10::string_view,
    c10::string_view);

using ScaleByItemOp = at::Tensor(const at::Tensor&, const at::Tensor&);

template <typename Signature>
c10::TypedOperatorHandle<Signature> find_op(const char* name, const char* overload) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, overload).typed<Signature>();
}

// A saved tensor back to the optional it came from (autograd saves an absent one undefined).
inline std::optional<at::Tensor> defined_or_none(const at::Tensor& t) {
  return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt;
}

inline const c10::TypedOperatorHandle<ScoreOp>& score_op() {
  static const auto op = find_op<ScoreOp>("softalign::smith_waterman", "tensor");
  return op;
}

inline const c10::TypedOperatorHandle<AlignmentOp>& alignment_op() {
  static const auto op = find_op<AlignmentOp>("softalign::smith_waterman_alignment", "tensor");
  return op;
}

inline const c10::TypedOperatorHandle<ScoreTemperatureTensorOp>& score_t_op() {
  static const auto op =
      find_op<ScoreTemperatureTensorOp>("softalign::smith_waterman", "temperature_tensor");
  return op;
}

inline const c10::TypedOperatorHandle<AlignmentTemperatureTensorOp>& alignment_t_op() {
  static const auto op = find_op<AlignmentTemperatureTensorOp>(
      "softalign::smith_waterman_alignment", "temperature_tensor");
  return op;
}

inline const c10::TypedOperatorHandle<BackwardOp>& backward_op() {
  static const auto op = find_op<BackwardOp>("softalign::_smith_waterman_backward", "");
  return op;
}

inline const c10::TypedOperatorHandle<ForwardBackwardOp>& forward_backward_op() {
  static const auto op =
      find_op<ForwardBackwardOp>("softalign::_smith_waterman_forward_backward", "");
  return op;
}

inline const c10::TypedOperatorHandle<ScaleByItemOp>& scale_by_item_op() {
  static const auto op = find_op<ScaleByItemOp>("softalign::_scale_by_item", "");
  return op;
}

}  // namespace softalign
