// softalign's C++ API from a program built against the installed package (no Python).
// Prints "<case> <item> <value>" lines with 17 significant digits; align_reference.py prints
// the same lines from Python's torch.ops.softalign.* and tools/check_deployment.sh compares them.
#include <softalign/softalign.h>

#include <ATen/ATen.h>

#include <cstdio>

namespace {

constexpr int64_t B = 3, M = 7, N = 6;

// scores[b, i, j] = 2 sin(0.37 i j + 1.1 i - 0.7 j + 0.5 b) - 0.5: a fixed, varied input.
at::Tensor example_scores() {
  const auto i = at::arange(M, at::kDouble).view({1, M, 1});
  const auto j = at::arange(N, at::kDouble).view({1, 1, N});
  const auto b = at::arange(B, at::kDouble).view({B, 1, 1});
  return 2 * at::sin(0.37 * i * j + 1.1 * i - 0.7 * j + 0.5 * b) - 0.5;
}

void print(const char* name, const at::Tensor& values) {
  const auto v = values.detach().to(at::kDouble).contiguous().view({-1});
  for (int64_t k = 0; k < v.numel(); ++k)
    std::printf("%s %lld %.17g\n", name, static_cast<long long>(k), v[k].item<double>());
}

}  // namespace

int main() {
  std::printf("# softalign package with CUDA kernels: %s\n", SOFTALIGN_PACKAGE_WITH_CUDA ? "yes" : "no");
  const auto scores = example_scores();
  const auto lengths_a = at::tensor({7, 4, 2}, at::kLong);
  const auto lengths_b = at::tensor({6, 6, 3}, at::kLong);
  using softalign::SmithWatermanOptions;

  // The seed's call: linear gaps of -1, temperature 1, local, max.
  print("linear_local_max", softalign::smith_waterman(scores));

  // Affine gaps, soft reduction, per-item lengths; a learnable (B,) gap_open through autograd.
  const auto gap_open = at::full({B}, -1.5, at::kDouble).requires_grad_();
  const auto affine = SmithWatermanOptions()
                          .gap_open(gap_open)
                          .gap_extend(-0.5)
                          .temperature(0.5)
                          .lengths_a(lengths_a)
                          .lengths_b(lengths_b)
                          .reduction("soft");
  const auto soft = softalign::smith_waterman(scores, affine);
  print("affine_local_soft", soft);
  soft.sum().backward();
  print("affine_local_soft_grad_gap_open", gap_open.grad());

  // Global (Needleman-Wunsch style) alignment with affine gaps, float32 scores.
  const auto global = SmithWatermanOptions().gap_open(-1.5).gap_extend(-0.5).mode("global");
  print("affine_global_float32", softalign::smith_waterman(scores.to(at::kFloat), global));

  // Temperature 0: the classic hard Smith-Waterman score and its 0/1 optimal alignment.
  const auto hard = SmithWatermanOptions().gap_open(-1.0).temperature(0);
  auto [hard_score, hard_alignment] = softalign::smith_waterman_alignment(scores, hard);
  print("hard_local", hard_score);
  print("hard_local_alignment_item0", hard_alignment[0]);

  // The soft alignment (d score / d scores): its mass and centre per item.
  auto [score, alignment] = softalign::smith_waterman_alignment(scores, affine);
  const auto cell = at::arange(M * N, at::kDouble).view({1, M, N});
  print("soft_alignment_mass", alignment.sum({1, 2}));
  print("soft_alignment_centre", (alignment * cell).sum({1, 2}));
  return 0;
}
