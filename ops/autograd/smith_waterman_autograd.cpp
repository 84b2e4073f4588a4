// Autograd for softalign::smith_waterman: the backward is its own op (with CPU and CUDA
// kernels), so TorchScript and pure C++ programs get gradients without Python.
//
// Two routes when grad is needed:
//  - penalties per item (numbers, 0-d, (B,), (B, 1, 1)): the forward computes the score and its
//    gradient at a seed of 1 per item in one go (_smith_waterman_forward_backward) and keeps it,
//    one float per cell (docs/performance.md); the backward scales it by each item's grad. One DP
//    sweep pair per training step instead of three.
//  - penalties per position: the forward keeps nothing of size B*M*N but the inputs and the
//    backward op recomputes the DP (a per-item, per-position penalty gradient would be a second
//    float per cell).
#include <torch/autograd.h>
#include <torch/csrc/autograd/graph_task.h>
#include <torch/library.h>

#include <array>
#include <optional>
#include <string>
#include <tuple>

#include "../op_handles.h"
#include "../problem.h"

namespace softalign {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

[[noreturn]] void no_double_backward() {
  TORCH_CHECK(false,
              "softalign::smith_waterman does not support double backward (a gradient of its "
              "gradient); differentiate it once, or use a finite difference of the gradient");
}

// A position penalty's gradient (the caller's shape) with NaN where a NaN item reaches it: the
// kernels leave 0 at the positions no move of the item is charged with (the last row, say).
// A pass over the penalty, on the route that recomputes the DP anyway.
at::Tensor with_nan_items(const at::Tensor& grad, const at::Tensor& nan_shift) {
  const int64_t B = nan_shift.numel();
  const at::Tensor per_item = nan_shift.reshape({B}).to(grad.scalar_type());
  if (grad.dim() == 1) return grad + (grad.size(0) == B ? per_item : per_item.sum());
  at::Tensor g = grad;
  while (g.dim() > 3) g = g.squeeze(0);
  while (g.dim() < 3) g = g.unsqueeze(0);
  const at::Tensor shift = g.size(0) == B ? per_item.view({B, 1, 1}) : per_item.sum();
  return (g + shift).view(grad.sizes());
}

// The backward of the backward: not provided, and said so instead of returning zeros.
class SmithWatermanBackward : public torch::autograd::Function<SmithWatermanBackward> {
 public:
  static variable_list forward(AutogradContext*, const at::Tensor& grad, const at::Tensor& scores,
                               const at::Tensor& gap_open,
                               const std::optional<at::Tensor>& gap_extend, double temperature,
                               const std::optional<at::Tensor>& lengths_a,
                               const std::optional<at::Tensor>& lengths_b, c10::string_view mode,
                               c10::string_view reduction) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [d_scores, d_open, d_extend] = backward_op().call(
        grad, scores, gap_open, gap_extend, temperature, lengths_a, lengths_b, mode, reduction);
    return {d_scores, d_open, d_extend};
  }

  static variable_list backward(AutogradContext*, variable_list) { no_double_backward(); }
};

// grad times the per-item gradients the forward kept, in the caller's shapes and dtypes, for
// the inputs autograd asks about (`wanted`: scores, gap_open, gap_extend). `in_place`: d_scores
// is scaled where it lies (it is released after the backward, and no second B*M*N tensor is
// written).
variable_list scaled_item_gradients(const at::Tensor& grad, const at::Tensor& d_scores,
                                    const at::Tensor& d_open,
                                    const std::optional<at::Tensor>& d_extend,
                                    const at::Tensor& scores, const at::Tensor& gap_open,
                                    const std::optional<at::Tensor>& gap_extend,
                                    std::array<bool, 3> wanted, bool in_place) {
  const at::Tensor g = grad.reshape({d_scores.size(0), 1, 1}).to(d_scores.scalar_type());
  variable_list grads;  // only defined tensors: a Function's outputs need a device
  if (wanted[0]) {
    at::Tensor scores_grad =
        (in_place ? d_scores.mul_(g) : scale_by_item_op().call(d_scores, g.view({d_scores.size(0)})))
            .to(scores.scalar_type());
    grads.push_back(scores.dim() == 2 ? scores_grad.squeeze(0) : scores_grad);
  }
  if (wanted[1]) grads.push_back(penalty_grad_to_caller(d_open * g, gap_open));
  if (wanted[2] && gap_extend) grads.push_back(penalty_grad_to_caller(*d_extend * g, *gap_extend));
  return grads;
}

// scaled_item_gradients as a Function of the op's inputs too (scores, penalties: their shapes,
// dtypes and devices), so that differentiating the result again reaches its backward and says
// so, as SmithWatermanBackward does.
class ScaleItemGradients : public torch::autograd::Function<ScaleItemGradients> {
 public:
  static variable_list forward(AutogradContext*, const at::Tensor& grad, const at::Tensor& d_scores,
                               const at::Tensor& d_open, const std::optional<at::Tensor>& d_extend,
                               const at::Tensor& scores, const at::Tensor& gap_open,
                               const std::optional<at::Tensor>& gap_extend,
                               std::array<bool, 3> wanted) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return scaled_item_gradients(grad, d_scores, d_open, d_extend, scores, gap_open, gap_extend,
                                 wanted, /*in_place=*/false);
  }

  static variable_list backward(AutogradContext*, variable_list) { no_double_backward(); }
};

// Penalties of one value per item: the per-item gradient is B numbers (docs/spec.md, "Notation": shapes
// 0-d, (B,), and (..., 1, 1)).
bool per_item(const at::Tensor& penalty) {
  const int64_t d = penalty.dim();
  return d <= 1 || (penalty.size(d - 1) == 1 && penalty.size(d - 2) == 1);
}

class SmithWatermanKeepingGradient
    : public torch::autograd::Function<SmithWatermanKeepingGradient> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& scores,
                            const at::Tensor& gap_open,
                            const std::optional<at::Tensor>& gap_extend, double temperature,
                            const std::optional<at::Tensor>& lengths_a,
                            const std::optional<at::Tensor>& lengths_b, c10::string_view mode,
                            c10::string_view reduction) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [score, d_scores, d_open, d_extend] = forward_backward_op().call(
        scores, gap_open, gap_extend, temperature, lengths_a, lengths_b, mode, reduction);
    ctx->save_for_backward({d_scores, d_open, gap_extend ? d_extend : at::Tensor(), scores,
                            gap_open, gap_extend.value_or(at::Tensor()), nan_of_items(score)});
    return score;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const std::optional<at::Tensor> gap_extend = defined_or_none(saved[5]);
    const std::array<bool, 3> wanted{ctx->needs_input_grad(0), ctx->needs_input_grad(1),
                                     gap_extend.has_value() && ctx->needs_input_grad(2)};
    // NaN items: a NaN factor, so that every gradient of theirs is NaN (saved[6]).
    const at::Tensor grad = grad_outputs[0] + saved[6];
    // A backward that frees the graph (no retain_graph, no create_graph: a training step) on
    // the CPU scales the kept gradient where it lies: a forward + backward then holds one
    // float a cell, not two (docs/performance.md, "CPU").
    const bool in_place = saved[0].is_cpu() && !torch::autograd::get_current_graph_task_keep_graph();
    const variable_list grads =
        in_place ? scaled_item_gradients(grad, saved[0], saved[1], defined_or_none(saved[2]),
                                         saved[3], saved[4], gap_extend, wanted, true)
                 : ScaleItemGradients::apply(grad, saved[0], saved[1], defined_or_none(saved[2]),
                                             saved[3], saved[4], gap_extend, wanted);
    // One entry per forward input: scores, gap_open, gap_extend, then the non-differentiable.
    variable_list out(8);
    size_t next = 0;
    for (size_t input = 0; input < wanted.size(); ++input) {
      if (wanted[input]) out[input] = grads[next++];
    }
    return out;
  }
};

class SmithWaterman : public torch::autograd::Function<SmithWaterman> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& scores,
                            const at::Tensor& gap_open,
                            const std::optional<at::Tensor>& gap_extend, double temperature,
                            const std::optional<at::Tensor>& lengths_a,
                            const std::optional<at::Tensor>& lengths_b, c10::string_view mode,
                            c10::string_view reduction) {
    at::Tensor score;
    {
      at::AutoDispatchBelowADInplaceOrView guard;
      score = score_op().call(scores, gap_open, gap_extend, temperature, lengths_a, lengths_b,
                              mode, reduction);
    }
    // The backward recomputes the DP from the inputs: nothing of size B*M*N is kept alive.
    ctx->save_for_backward({scores, gap_open, gap_extend.value_or(at::Tensor()),
                            lengths_a.value_or(at::Tensor()), lengths_b.value_or(at::Tensor()),
                            nan_of_items(score)});
    ctx->saved_data["temperature"] = temperature;
    ctx->saved_data["mode"] = std::string(mode);
    ctx->saved_data["reduction"] = std::string(reduction);
    return score;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const std::optional<at::Tensor> gap_extend = defined_or_none(saved[2]);
    // NaN items: a NaN seed, which the backward kernels multiply into every cell (saved[5]).
    const variable_list grads = SmithWatermanBackward::apply(
        grad_outputs[0] + saved[5], saved[0], saved[1], gap_extend,
        ctx->saved_data["temperature"].toDouble(), defined_or_none(saved[3]),
        defined_or_none(saved[4]), ctx->saved_data["mode"].toStringRef(),
        ctx->saved_data["reduction"].toStringRef());
    // One entry per forward input: scores, gap_open, gap_extend, then the non-differentiable.
    return {grads[0], with_nan_items(grads[1], saved[5]),
            gap_extend ? with_nan_items(grads[2], saved[5]) : at::Tensor(), at::Tensor(),
            at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor smith_waterman_autograd(const at::Tensor& scores, const at::Tensor& gap_open,
                                   const std::optional<at::Tensor>& gap_extend,
                                   double temperature,
                                   const std::optional<at::Tensor>& lengths_a,
                                   const std::optional<at::Tensor>& lengths_b,
                                   c10::string_view mode, c10::string_view reduction) {
  const bool needs_grad = at::GradMode::is_enabled() &&
                          (scores.requires_grad() || gap_open.requires_grad() ||
                           (gap_extend && gap_extend->requires_grad()));
  if (!needs_grad) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return score_op().call(scores, gap_open, gap_extend, temperature, lengths_a, lengths_b, mode,
                           reduction);
  }
  if (per_item(gap_open) && (!gap_extend || per_item(*gap_extend))) {
    return SmithWatermanKeepingGradient::apply(scores, gap_open, gap_extend, temperature,
                                               lengths_a, lengths_b, mode, reduction);
  }
  return SmithWaterman::apply(scores, gap_open, gap_extend, temperature, lengths_a, lengths_b,
                              mode, reduction);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> smith_waterman_backward_autograd(
    const at::Tensor& grad, const at::Tensor& scores, const at::Tensor& gap_open,
    const std::optional<at::Tensor>& gap_extend, double temperature,
    const std::optional<at::Tensor>& lengths_a, const std::optional<at::Tensor>& lengths_b,
    c10::string_view mode, c10::string_view reduction) {
  const variable_list g = SmithWatermanBackward::apply(grad, scores, gap_open, gap_extend,
                                                       temperature, lengths_a, lengths_b, mode,
                                                       reduction);
  return {g[0], g[1], g[2]};
}

}  // namespace

SOFTALIGN_LIBRARY_IMPL(Autograd, m) {
  m.impl("smith_waterman.tensor", &smith_waterman_autograd);
  m.impl("_smith_waterman_backward", &smith_waterman_backward_autograd);
  // The fused alignment is for inference: it returns d score / d scores itself.
  m.impl("smith_waterman_alignment.tensor", torch::autograd::autogradNotImplementedFallback());
  m.impl("_smith_waterman_forward_backward",
         torch::autograd::autogradNotImplementedFallback());
  m.impl("_scale_by_item", torch::autograd::autogradNotImplementedFallback());  // in a backward
}

}  // namespace softalign
