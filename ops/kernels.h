// The op kernels every backend registers (CPU, CUDA): check and normalise the arguments,
// run the backend's sweeps, hand the results back in the caller's shapes and dtypes.
// A Backend provides
//   static at::Tensor forward(const Problem&);                          // (B,) scores
//   static void forward_backward(const Problem&, const at::Tensor& grad,  // (B,) d loss/d score
//                                ProblemGrads& out);                      // fills every field
//   static bool writes_every_cell(const Problem&);  // forward_backward sets every element of
//                                                   // out.scores (else it gets zeros to add to)
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <tuple>

#include "problem.h"

namespace softalign {

template <class Backend>
at::Tensor smith_waterman_kernel(const at::Tensor& scores, const at::Tensor& gap_open,
                                 const std::optional<at::Tensor>& gap_extend, double temperature,
                                 const std::optional<at::Tensor>& lengths_a,
                                 const std::optional<at::Tensor>& lengths_b,
                                 c10::string_view mode, c10::string_view reduction) {
  const Problem p = make_problem(scores, gap_open, gap_extend, temperature, lengths_a, lengths_b,
                                 mode, reduction);
  return score_to_caller(p, Backend::forward(p));
}

template <class Backend>
ProblemGrads run_forward_backward(const Problem& p, const at::Tensor& grad) {
  ProblemGrads out = make_grads(p, /*zero_scores=*/!Backend::writes_every_cell(p));
  Backend::forward_backward(p, grad, out);
  return out;
}

// d score / d inputs at a seed of 1 per item, with the score.
template <class Backend>
ProblemGrads run_at_unit_seed(const Problem& p) {
  return run_forward_backward<Backend>(p, at::ones({p.batch()}, p.scores.options()));
}

template <class Backend>
std::tuple<at::Tensor, at::Tensor, at::Tensor> smith_waterman_backward_kernel(
    const at::Tensor& grad, const at::Tensor& scores, const at::Tensor& gap_open,
    const std::optional<at::Tensor>& gap_extend, double temperature,
    const std::optional<at::Tensor>& lengths_a, const std::optional<at::Tensor>& lengths_b,
    c10::string_view mode, c10::string_view reduction) {
  const Problem p = make_problem(scores, gap_open, gap_extend, temperature, lengths_a, lengths_b,
                                 mode, reduction);
  TORCH_CHECK(grad.numel() == p.batch(), "grad must hold one value per item (", p.batch(),
              "), got shape ", grad.sizes());
  TORCH_CHECK(grad.device() == scores.device(), "grad must be on the scores' device (",
              scores.device(), "), got ", grad.device());
  const at::Tensor g = grad.reshape({p.batch()}).to(p.scores.scalar_type()).contiguous();
  ProblemGrads out = run_forward_backward<Backend>(p, g);
  // Kernels may skip cells no alignment uses (the CPU's t = 0 lanes): a NaN seed alone misses them.
  nan_items_to_nan(out.scores, out.score);
  return {scores_grad_to_caller(p, out.scores), penalty_grad_to_caller(out.gap_open, gap_open),
          p.affine() ? penalty_grad_to_caller(out.gap_extend, *gap_extend)
                     : at::empty({0}, scores.options())};
}

template <class Backend>
std::tuple<at::Tensor, at::Tensor> smith_waterman_alignment_kernel(
    const at::Tensor& scores, const at::Tensor& gap_open,
    const std::optional<at::Tensor>& gap_extend, double temperature,
    const std::optional<at::Tensor>& lengths_a, const std::optional<at::Tensor>& lengths_b,
    c10::string_view mode, c10::string_view reduction) {
  const Problem p = make_problem(scores, gap_open, gap_extend, temperature, lengths_a, lengths_b,
                                 mode, reduction);
  ProblemGrads out = run_at_unit_seed<Backend>(p);
  nan_items_to_nan(out.scores, out.score);
  return {score_to_caller(p, out.score), scores_grad_to_caller(p, out.scores)};
}

template <class Backend>
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> smith_waterman_forward_backward_kernel(
    const at::Tensor& scores, const at::Tensor& gap_open,
    const std::optional<at::Tensor>& gap_extend, double temperature,
    const std::optional<at::Tensor>& lengths_a, const std::optional<at::Tensor>& lengths_b,
    c10::string_view mode, c10::string_view reduction) {
  const Problem p = make_problem(scores, gap_open, gap_extend, temperature, lengths_a, lengths_b,
                                 mode, reduction);
  const ProblemGrads out = run_at_unit_seed<Backend>(p);
  return {score_to_caller(p, out.score), out.scores, out.gap_open,
          p.affine() ? out.gap_extend : at::empty({0}, p.scores.options())};
}

// Registers the four kernels of one backend under its dispatch key.
#define SOFTALIGN_REGISTER_BACKEND(m, Backend)                                     \
  do {                                                                             \
    (m).impl("smith_waterman.tensor", &::softalign::smith_waterman_kernel<Backend>); \
    (m).impl("smith_waterman_alignment.tensor",                                    \
             &::softalign::smith_waterman_alignment_kernel<Backend>);              \
    (m).impl("_smith_waterman_backward",                                           \
             &::softalign::smith_waterman_backward_kernel<Backend>);               \
    (m).impl("_smith_waterman_forward_backward",                                   \
             &::softalign::smith_waterman_forward_backward_kernel<Backend>);       \
  } while (0)

}  // namespace softalign
