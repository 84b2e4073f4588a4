// Concurrent calls from several C++ threads (a server answering requests in parallel): each
// thread's results equal the single-threaded ones, bit for bit, forward and backward.
#include <gtest/gtest.h>
#include <softalign/softalign.h>
#include <torch/torch.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Case {
  torch::Tensor scores;
  softalign::SmithWatermanOptions options;
};

struct Results {
  torch::Tensor score, gradient, fused_score, alignment;
};

// One call of each entry point: the score, its gradient through C++ autograd, the alignment.
Results run(const Case& c) {
  const torch::Tensor leaf = c.scores.detach().clone().requires_grad_();
  const torch::Tensor score = softalign::smith_waterman(leaf, c.options);
  const torch::Tensor gradient = torch::autograd::grad({score.sum()}, {leaf})[0];
  auto [fused_score, alignment] = softalign::smith_waterman_alignment(c.scores, c.options);
  return {score.detach(), gradient, fused_score, alignment};
}

bool identical(const Results& a, const Results& b) {
  return torch::equal(a.score, b.score) && torch::equal(a.gradient, b.gradient) &&
         torch::equal(a.fused_score, b.fused_score) && torch::equal(a.alignment, b.alignment);
}

// Different inputs per thread: both gap models, both modes, both reductions, float32 and
// float64, lengths and position-specific penalties, t = 0 and t > 0.
std::vector<Case> cases() {
  torch::manual_seed(7);
  using Options = softalign::SmithWatermanOptions;
  std::vector<Case> c;
  c.push_back({torch::randn({6, 33, 17}, torch::kFloat64), Options().gap_open(-1.0)});
  c.push_back({torch::randn({9, 12, 40}, torch::kFloat32),
               Options()
                   .gap_open(-2.0)
                   .gap_extend(-0.5)
                   .temperature(0.3)
                   .reduction("soft")
                   .lengths_a(torch::tensor({12, 3, 0, 7, 12, 1, 5, 11, 12}))});
  c.push_back({torch::randn({5, 21, 21}, torch::kFloat64),
               Options()
                   .gap_open(-torch::rand({21, 21}, torch::kFloat64) - 0.5)
                   .gap_extend(-0.25)
                   .temperature(0.7)
                   .mode("global")});
  c.push_back({torch::randint(-4, 6, {7, 25, 19}).to(torch::kFloat32),
               Options().gap_open(-2.0).temperature(0).mode("global")});
  return c;
}

TEST(Threads, ConcurrentCallsEqualSingleThreadedResults) {
  constexpr int kThreads = 4, kRepeats = 20;
  const std::vector<Case> inputs = cases();
  ASSERT_EQ(inputs.size(), static_cast<size_t>(kThreads));
  std::vector<Results> expected;
  for (const Case& c : inputs) expected.push_back(run(c));
  // The expected results are real ones: nonzero scores and gradients.
  for (const Results& r : expected) {
    ASSERT_GT(r.score.abs().sum().item<double>(), 0.0);
    ASSERT_GT(r.gradient.abs().sum().item<double>(), 0.0);
  }

  std::atomic<int> mismatches{0}, errors{0};
  std::vector<std::string> messages(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        for (int r = 0; r < kRepeats; ++r) {
          if (!identical(run(inputs[t]), expected[t])) ++mismatches;
        }
      } catch (const std::exception& e) {
        ++errors;
        messages[t] = e.what();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(errors.load(), 0) << messages[0] << messages[1] << messages[2] << messages[3];
  EXPECT_EQ(mismatches.load(), 0) << "of " << kThreads * kRepeats << " concurrent calls";
}

}  // namespace
