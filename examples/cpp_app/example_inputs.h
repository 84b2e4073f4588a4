// The fixed inputs of examples/export_torchscript.py's example_inputs(), built in C++:
// tokens_a (3, 8), tokens_b (3, 6) (tokens_a[2:] with one change), lengths_a, lengths_b.
#pragma once

#include <ATen/ATen.h>

#include <vector>

inline std::vector<at::Tensor> example_inputs() {
  constexpr int64_t B = 3, M = 8, N = 6, VOCAB = 20;
  auto tokens_a = at::empty({B, M}, at::kLong);
  auto tokens_b = at::empty({B, N}, at::kLong);
  auto a = tokens_a.accessor<int64_t, 2>();
  auto b = tokens_b.accessor<int64_t, 2>();
  for (int64_t k = 0; k < B; ++k) {
    for (int64_t i = 0; i < M; ++i) a[k][i] = (7 * k + 3 * i + (i * i) % 5) % VOCAB;
    for (int64_t j = 0; j < N; ++j)
      b[k][j] = (7 * k + 3 * (j + 2) + ((j + 2) * (j + 2)) % 5 + (j == 3)) % VOCAB;
  }
  return {tokens_a, tokens_b, at::tensor({8, 5, 3}, at::kLong), at::tensor({6, 6, 2}, at::kLong)};
}
