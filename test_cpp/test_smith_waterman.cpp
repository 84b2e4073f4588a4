// The library from a pure C++ program: no Python anywhere.
#include <gtest/gtest.h>
#include <softalign/softalign.h>
#include <torch/torch.h>

#include <cmath>

namespace {

// The seed's loop, written with libtorch ops (the reference the default call reproduces).
torch::Tensor seed_loop(const torch::Tensor& scores, double gap_open, double t) {
  const int64_t B = scores.size(0), M = scores.size(1), N = scores.size(2);
  const torch::Tensor zero = torch::zeros({B}, scores.options());
  std::vector<std::vector<torch::Tensor>> H(M + 1, std::vector<torch::Tensor>(N + 1, zero));
  torch::Tensor best = zero;
  for (int64_t i = 1; i <= M; ++i) {
    for (int64_t j = 1; j <= N; ++j) {
      const auto match = H[i - 1][j - 1] + scores.select(1, i - 1).select(1, j - 1);
      const auto terms = torch::stack({zero, match, H[i - 1][j] + gap_open, H[i][j - 1] + gap_open}, -1);
      H[i][j] = t * torch::logsumexp(terms / t, -1);
      best = torch::maximum(best, H[i][j]);
    }
  }
  return best;
}

TEST(SmithWaterman, DefaultCallMatchesTheSeedLoop) {
  torch::manual_seed(0);
  const auto scores = torch::randn({4, 7, 9}, torch::kFloat64);
  const auto got = softalign::smith_waterman(scores);
  EXPECT_TRUE(torch::allclose(got, seed_loop(scores, -1.0, 1.0), 1e-10, 0));
}

TEST(SmithWaterman, OneCellHasAClosedForm) {
  // H[1][1] = log(1 + e^s + 2 e^g) at t = 1 (the two gap terms start from 0).
  const double s = 0.7, g = -0.4;
  const auto got = softalign::smith_waterman(torch::full({1, 1}, s, torch::kFloat64),
                                             softalign::SmithWatermanOptions().gap_open(g));
  EXPECT_EQ(got.dim(), 0);
  EXPECT_NEAR(got.item<double>(), std::log(1 + std::exp(s) + 2 * std::exp(g)), 1e-14);
}

TEST(SmithWaterman, TemperatureZeroIsGotoh) {
  // a = "ACGT", b = "AT", match +2, mismatch -1: A..T with a gap of 2 costs open + extend.
  const auto scores = torch::tensor({{2.0, -1.0}, {-1.0, -1.0}, {-1.0, -1.0}, {-1.0, 2.0}});
  const auto opts = softalign::SmithWatermanOptions().gap_open(-1.5).gap_extend(-0.5).temperature(0);
  EXPECT_FLOAT_EQ(softalign::smith_waterman(scores, opts).item<float>(), 2.0f);
  const auto global = softalign::SmithWatermanOptions(opts).mode("global");
  EXPECT_FLOAT_EQ(softalign::smith_waterman(scores, global).item<float>(), 2.0f);
}

TEST(SmithWaterman, BackwardThroughCppAutogradIsTheFusedAlignment) {
  torch::manual_seed(1);
  const auto scores = torch::randn({3, 6, 5}, torch::kFloat64).requires_grad_();
  const auto gap_open = torch::full({3}, -0.8, torch::kFloat64).requires_grad_();
  const auto opts = softalign::SmithWatermanOptions()
                        .gap_open(gap_open)
                        .gap_extend(-0.3)
                        .temperature(0.5)
                        .lengths_a(torch::tensor({6, 4, 2}))
                        .reduction("soft");
  const auto score = softalign::smith_waterman(scores, opts);
  score.sum().backward();

  const auto [fused_score, alignment] = softalign::smith_waterman_alignment(scores.detach(), opts);
  EXPECT_TRUE(torch::allclose(fused_score, score.detach(), 0, 0));
  EXPECT_TRUE(torch::allclose(alignment, scores.grad(), 1e-12, 1e-12));
  // lengths_a = 2 for the last item: rows 2.. carry no gradient.
  EXPECT_EQ(scores.grad()[2].slice(0, 2).abs().sum().item<double>(), 0.0);
  EXPECT_EQ(gap_open.grad().sizes(), gap_open.sizes());
  EXPECT_GT(gap_open.grad().abs().min().item<double>(), 0.0);
  // A finite difference of the per-item gap_open confirms its gradient.
  const double eps = 1e-6;
  auto shifted = softalign::SmithWatermanOptions(opts).gap_open(gap_open.detach() + eps);
  const auto numeric = (softalign::smith_waterman(scores.detach(), shifted) - score.detach()) / eps;
  EXPECT_TRUE(torch::allclose(numeric, gap_open.grad(), 1e-4, 1e-5));
}

TEST(SmithWaterman, BadInputNamesTheArgument) {
  const auto scores = torch::randn({2, 3, 4});
  try {
    softalign::smith_waterman(scores, softalign::SmithWatermanOptions().mode("semiglobal"));
    FAIL() << "an unknown mode must be an error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("mode must be \"local\" or \"global\""), std::string::npos);
  }
  EXPECT_THROW(softalign::smith_waterman(scores, softalign::SmithWatermanOptions().lengths_a(
                                                     torch::tensor({1, 9}))),
               c10::Error);
}

TEST(SmithWaterman, APositiveNumberPenaltyNamesTheSignConvention) {
  try {
    softalign::SmithWatermanOptions().gap_open(11);
    FAIL() << "gap_open = 11 (BLAST's cost) must be an error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("gap_open must be <= 0"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("gap_open=-11"), std::string::npos);
  }
  EXPECT_THROW(softalign::SmithWatermanOptions().gap_extend(0.5), c10::Error);
}

TEST(SmithWaterman, TensorTemperatureHasTheNumbersValueAndAGradient) {
  torch::manual_seed(2);
  const auto scores = torch::randn({3, 5, 6}, torch::kFloat64);
  const auto base = softalign::SmithWatermanOptions().gap_open(-1.0).gap_extend(-0.3);
  const auto t = torch::tensor(0.6, torch::kFloat64).requires_grad_();
  const auto score = softalign::smith_waterman(scores, softalign::SmithWatermanOptions(base).temperature(t));
  EXPECT_TRUE(torch::equal(score.detach(), softalign::smith_waterman(
                                               scores, softalign::SmithWatermanOptions(base).temperature(0.6))));
  score.sum().backward();
  const double eps = 1e-6;
  const auto at = [&](double u) {
    return softalign::smith_waterman(scores, softalign::SmithWatermanOptions(base).temperature(u)).sum().item<double>();
  };
  EXPECT_NEAR(t.grad().item<double>(), (at(0.6 + eps) - at(0.6 - eps)) / (2 * eps), 1e-6);
}

}  // namespace
