// The overloads whose temperature is a tensor (0-d, or (B,): one per item), with its gradient.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <tuple>

namespace softalign {

at::Tensor score_with_temperature_tensor(const at::Tensor& scores, const at::Tensor& gap_open,
                                         const std::optional<at::Tensor>& gap_extend,
                                         const at::Tensor& temperature,
                                         const std::optional<at::Tensor>& lengths_a,
                                         const std::optional<at::Tensor>& lengths_b,
                                         c10::string_view mode, c10::string_view reduction);

std::tuple<at::Tensor, at::Tensor> alignment_with_temperature_tensor(
    const at::Tensor& scores, const at::Tensor& gap_open,
    const std::optional<at::Tensor>& gap_extend, const at::Tensor& temperature,
    const std::optional<at::Tensor>& lengths_a, const std::optional<at::Tensor>& lengths_b,
    c10::string_view mode, c10::string_view reduction);

}  // namespace softalign
