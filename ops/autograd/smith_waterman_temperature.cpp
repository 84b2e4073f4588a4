// A temperature given as a tensor: the value is the number-temperature call at its value u
// (0-d: read once, a host synchronisation for a device tensor; (B,): per item, one call per
// distinct value), and its gradient needs no new sweep. The score is homogeneous of degree 1 in
// (S, gap_open, gap_extend, t) (smax_{kt}(kx) = k smax_t(x)), so by Euler's theorem
//   d score / d t = (score - <dS, S> - <d open, open> - <d extend, extend>) / t,   t > 0,
// from the gradients at a seed of 1 that _smith_waterman_forward_backward gives with the score.
// At t = 0 the hard score does not depend on t: its gradient is 0.
#include "temperature.h"

#include <torch/autograd.h>

#include <cmath>
#include <map>
#include <vector>

#include "../op_handles.h"
#include "../problem.h"

namespace softalign {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// A penalty broadcast against (B, M, N) as docs/spec.md, "Notation", reads it: 1-D is one value per item.
at::Tensor as_3d(const at::Tensor& penalty) {
  if (penalty.dim() == 1) return penalty.view({penalty.size(0), 1, 1});
  at::Tensor p = penalty;
  while (p.dim() > 3) p = p.squeeze(0);
  while (p.dim() < 3) p = p.unsqueeze(0);
  return p;
}

// Per item, sum of grad * value over the cells where grad is not 0 (a -inf score or penalty
// that no alignment uses has gradient 0 and contributes 0, not NaN).
at::Tensor item_inner(const at::Tensor& grad, const at::Tensor& value) {
  const at::Tensor v = as_3d(value).to(grad.scalar_type());
  return at::where(grad == 0, at::zeros({}, grad.options()), grad * v).sum({1, 2});
}

[[noreturn]] void no_double_backward() {
  TORCH_CHECK(false,
              "softalign::smith_waterman does not support double backward (a gradient of its "
              "gradient); differentiate it once, or use a finite difference of the gradient");
}

// grad times the kept per-item gradients, in the caller's shapes, and d / d temperature.
class TemperatureGradients : public torch::autograd::Function<TemperatureGradients> {
 public:
  static variable_list forward(AutogradContext*, const at::Tensor& grad, const at::Tensor& score,
                               const at::Tensor& d_scores, const at::Tensor& d_open,
                               const at::Tensor& d_extend, const at::Tensor& scores,
                               const at::Tensor& gap_open,
                               const std::optional<at::Tensor>& gap_extend,
                               const at::Tensor& temperature, double value) {
    at::AutoDispatchBelowADInplaceOrView guard;
    const int64_t B = d_scores.size(0);
    const auto dtype = d_scores.scalar_type();
    const at::Tensor s = score.reshape({B}).to(dtype);
    // NaN items: a NaN factor, so that every gradient of theirs is NaN.
    const at::Tensor g = (grad.reshape({B}).to(dtype) + nan_of_items(s));
    const at::Tensor g3 = g.view({B, 1, 1});
    const at::Tensor s3 = scores.dim() == 2 ? scores.unsqueeze(0) : scores;
    at::Tensor scores_grad = (d_scores * g3).to(scores.scalar_type());
    if (scores.dim() == 2) scores_grad = scores_grad.squeeze(0);
    const at::Tensor open_grad = penalty_grad_to_caller(d_open * g3, gap_open);
    const at::Tensor extend_grad = gap_extend.has_value()
                                       ? penalty_grad_to_caller(d_extend * g3, *gap_extend)
                                       : at::zeros({0}, d_scores.options());
    at::Tensor per_item = at::zeros({B}, d_scores.options());
    if (value > 0) {
      at::Tensor rest = s - item_inner(d_scores, s3) - item_inner(d_open, gap_open);
      if (gap_extend.has_value()) rest = rest - item_inner(d_extend, *gap_extend);
      per_item = g * rest / value;
    } else {
      per_item = per_item + nan_of_items(s);  // t = 0: 0, NaN items NaN
    }
    const at::Tensor t_grad = (temperature.dim() == 0 ? per_item.sum() : per_item)
                                  .to(temperature.scalar_type());
    return {scores_grad, open_grad, extend_grad, t_grad};
  }

  static variable_list backward(AutogradContext*, variable_list) { no_double_backward(); }
};

// One call at temperature value u, t holding u (0-d, or (B,) all equal to u).
class TemperatureScore : public torch::autograd::Function<TemperatureScore> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& scores,
                            const at::Tensor& gap_open,
                            const std::optional<at::Tensor>& gap_extend,
                            const at::Tensor& temperature, double value,
                            const std::optional<at::Tensor>& lengths_a,
                            const std::optional<at::Tensor>& lengths_b, c10::string_view mode,
                            c10::string_view reduction) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [score, d_scores, d_open, d_extend] =
        forward_backward_op().call(scores, gap_open, gap_extend, value, lengths_a, lengths_b,
                                   mode, reduction);
    ctx->save_for_backward({score, d_scores, d_open, d_extend, scores, gap_open,
                            gap_extend.value_or(at::Tensor()), temperature});
    ctx->saved_data["value"] = value;
    return score;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list s = ctx->get_saved_variables();
    const variable_list g =
        TemperatureGradients::apply(grad_outputs[0], s[0], s[1], s[2], s[3], s[4], s[5],
                                    defined_or_none(s[6]), s[7],
                                    ctx->saved_data["value"].toDouble());
    return {g[0], g[1], s[6].defined() ? g[2] : at::Tensor(), g[3], at::Tensor(), at::Tensor(),
            at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

void check_temperature_tensor(const at::Tensor& t, const at::Tensor& scores) {
  TORCH_CHECK(t.defined(), "temperature must be a number or a tensor, got an undefined tensor");
  TORCH_CHECK(at::isFloatingType(t.scalar_type()),
              "temperature must be a number or a floating-point tensor, got a tensor of ",
              t.scalar_type());
  TORCH_CHECK(t.device().is_cpu() || t.device() == scores.device(),
              "temperature must be on the CPU or on the scores' device (", scores.device(),
              "), got ", t.device());
  TORCH_CHECK(t.dim() == 0 || (scores.dim() == 3 && t.dim() == 1 && t.size(0) == scores.size(0)),
              "temperature as a tensor must be 0-d or hold one value per item, shape (B,) = (",
              scores.dim() == 3 ? scores.size(0) : 1, ",) for scores of shape ", scores.sizes(),
              ", got shape ", t.sizes());
}

// The temperature's values grouped: each distinct value and the items that have it.
std::map<double, std::vector<int64_t>> items_by_value(const at::Tensor& t) {
  const at::Tensor values = t.detach().to(at::kCPU, at::kDouble).contiguous();
  const double* v = values.data_ptr<double>();
  std::map<double, std::vector<int64_t>> groups;
  for (int64_t b = 0; b < values.numel(); ++b) {
    TORCH_CHECK(std::isfinite(v[b]) && v[b] >= 0, "temperature must be finite and >= 0, got ",
                v[b], " for item ", b);
    groups[v[b]].push_back(b);
  }
  return groups;
}

// Items `index` of a per-item argument (scores, a penalty, lengths); a shared one as it is.
at::Tensor select_items(const at::Tensor& x, const at::Tensor& index, int64_t B, bool scores) {
  if (!x.defined()) return x;
  const at::Tensor i = index.to(x.device());
  if (scores || x.dim() == 1) return x.size(0) == B ? x.index_select(0, i) : x;
  at::Tensor p = x;
  while (p.dim() > 3 && p.size(0) == 1) p = p.squeeze(0);
  return p.dim() == 3 && p.size(0) == B ? p.index_select(0, i) : x;
}

std::optional<at::Tensor> select_items(const std::optional<at::Tensor>& x,
                                       const at::Tensor& index, int64_t B) {
  if (!x.has_value()) return x;
  return select_items(*x, index, B, false);
}

// Runs call(scores, gap_open, gap_extend, temperature, value, lengths_a, lengths_b) once per
// distinct temperature value on the items that have it, and puts the items' results (each a
// list of tensors with the batch first) back in order.
template <class Call>
std::vector<at::Tensor> by_temperature(const at::Tensor& scores, const at::Tensor& gap_open,
                                       const std::optional<at::Tensor>& gap_extend,
                                       const at::Tensor& temperature,
                                       const std::optional<at::Tensor>& lengths_a,
                                       const std::optional<at::Tensor>& lengths_b,
                                       const Call& call) {
  check_temperature_tensor(temperature, scores);
  if (temperature.dim() == 0) {
    const double value = temperature.item<double>();
    return call(scores, gap_open, gap_extend, temperature, value, lengths_a, lengths_b);
  }
  const auto groups = items_by_value(temperature);
  if (groups.size() <= 1) {
    const double value = groups.empty() ? 1.0 : groups.begin()->first;
    return call(scores, gap_open, gap_extend, temperature, value, lengths_a, lengths_b);
  }
  const int64_t B = scores.size(0);
  std::vector<std::vector<at::Tensor>> parts;
  std::vector<int64_t> order;
  for (const auto& [value, items] : groups) {
    const at::Tensor index = at::tensor(items, at::kLong).to(scores.device());
    order.insert(order.end(), items.begin(), items.end());
    parts.push_back(call(select_items(scores, index, B, true),
                         select_items(gap_open, index, B, false),
                         select_items(gap_extend, index, B),
                         select_items(temperature, index, B, false), value,
                         select_items(lengths_a, index, B), select_items(lengths_b, index, B)));
  }
  // Item order[k] is row k of the concatenation: gather row inverse[b] for item b.
  std::vector<int64_t> inverse(B);
  for (int64_t k = 0; k < B; ++k) inverse[order[k]] = k;
  const at::Tensor gather = at::tensor(inverse, at::kLong).to(scores.device());
  std::vector<at::Tensor> out;
  for (size_t r = 0; r < parts.front().size(); ++r) {
    std::vector<at::Tensor> rows;
    for (const auto& part : parts) rows.push_back(part[r]);
    out.push_back(at::cat(rows, 0).index_select(0, gather));
  }
  return out;
}

}  // namespace

at::Tensor score_with_temperature_tensor(const at::Tensor& scores, const at::Tensor& gap_open,
                                         const std::optional<at::Tensor>& gap_extend,
                                         const at::Tensor& temperature,
                                         const std::optional<at::Tensor>& lengths_a,
                                         const std::optional<at::Tensor>& lengths_b,
                                         c10::string_view mode, c10::string_view reduction) {
  const auto call = [&](const at::Tensor& s, const at::Tensor& open,
                        const std::optional<at::Tensor>& extend, const at::Tensor& t,
                        double value, const std::optional<at::Tensor>& la,
                        const std::optional<at::Tensor>& lb) -> std::vector<at::Tensor> {
    if (at::GradMode::is_enabled() && t.requires_grad()) {
      return {TemperatureScore::apply(s, open, extend, t, value, la, lb, mode, reduction)};
    }
    // No gradient for t: exactly the number-temperature call (its autograd, its fast paths).
    return {score_op().call(s, open, extend, value, la, lb, mode, reduction)};
  };
  return by_temperature(scores, gap_open, gap_extend, temperature, lengths_a, lengths_b,
                        call)[0];
}

std::tuple<at::Tensor, at::Tensor> alignment_with_temperature_tensor(
    const at::Tensor& scores, const at::Tensor& gap_open,
    const std::optional<at::Tensor>& gap_extend, const at::Tensor& temperature,
    const std::optional<at::Tensor>& lengths_a, const std::optional<at::Tensor>& lengths_b,
    c10::string_view mode, c10::string_view reduction) {
  const auto call = [&](const at::Tensor& s, const at::Tensor& open,
                        const std::optional<at::Tensor>& extend, const at::Tensor&, double value,
                        const std::optional<at::Tensor>& la,
                        const std::optional<at::Tensor>& lb) -> std::vector<at::Tensor> {
    auto [score, alignment] = alignment_op().call(s, open, extend, value, la, lb, mode, reduction);
    return {score, alignment};
  };
  const auto out =
      by_temperature(scores, gap_open, gap_extend, temperature, lengths_a, lengths_b, call);
  return {out[0], out[1]};
}

}  // namespace softalign
