// Autograd for softalign::smith_waterman: the backward is its own op (with CPU and CUDA
// kernels), so TorchScript and pure C++ programs get gradients without Python.
#include <torch/autograd.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <tuple>

#include "../op_handles.h"

namespace softalign {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

std::optional<at::Tensor> defined_or_none(const at::Tensor& t) {
  return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt;
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

  static variable_list backward(AutogradContext*, variable_list) {
    TORCH_CHECK(false,
                "softalign::smith_waterman does not support double backward (a gradient of its "
                "gradient); differentiate it once, or use a finite difference of the gradient");
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
                            lengths_a.value_or(at::Tensor()), lengths_b.value_or(at::Tensor())});
    ctx->saved_data["temperature"] = temperature;
    ctx->saved_data["mode"] = std::string(mode);
    ctx->saved_data["reduction"] = std::string(reduction);
    return score;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const std::optional<at::Tensor> gap_extend = defined_or_none(saved[2]);
    const variable_list grads = SmithWatermanBackward::apply(
        grad_outputs[0], saved[0], saved[1], gap_extend,
        ctx->saved_data["temperature"].toDouble(), defined_or_none(saved[3]),
        defined_or_none(saved[4]), ctx->saved_data["mode"].toStringRef(),
        ctx->saved_data["reduction"].toStringRef());
    // One entry per forward input: scores, gap_open, gap_extend, then the non-differentiable.
    return {grads[0], grads[1], gap_extend ? grads[2] : at::Tensor(), at::Tensor(), at::Tensor(),
            at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor smith_waterman_autograd(const at::Tensor& scores, const at::Tensor& gap_open,
                                   const std::optional<at::Tensor>& gap_extend,
                                   double temperature,
                                   const std::optional<at::Tensor>& lengths_a,
                                   const std::optional<at::Tensor>& lengths_b,
                                   c10::string_view mode, c10::string_view reduction) {
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

TORCH_LIBRARY_IMPL(softalign, Autograd, m) {
  m.impl("smith_waterman.tensor", &smith_waterman_autograd);
  m.impl("_smith_waterman_backward", &smith_waterman_backward_autograd);
  // The fused alignment is for inference: it returns d score / d scores itself.
  m.impl("smith_waterman_alignment.tensor", torch::autograd::autogradNotImplementedFallback());
}

}  // namespace softalign
