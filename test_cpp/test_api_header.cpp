// The public header on its own: this translation unit includes <softalign/softalign.h> first,
// so it compiles only if the header brings everything it uses. Then SmithWatermanOptions:
// its defaults are the spec's, every setter stores what it was given and chains.
#include <softalign/softalign.h>

#include <gtest/gtest.h>

#include <type_traits>
#include <utility>

namespace {

using softalign::SmithWatermanOptions;

// The API the header promises, as types (a changed signature fails to compile here).
static_assert(std::is_same_v<decltype(softalign::smith_waterman(std::declval<at::Tensor>())),
                             at::Tensor>);
static_assert(std::is_same_v<decltype(softalign::smith_waterman_alignment(
                                 std::declval<at::Tensor>(), SmithWatermanOptions())),
                             std::tuple<at::Tensor, at::Tensor>>);
static_assert(std::is_same_v<decltype(SmithWatermanOptions().gap_open(-1.0)), SmithWatermanOptions&>);
static_assert(std::is_copy_constructible_v<SmithWatermanOptions>);

TEST(SmithWatermanOptions, DefaultsAreTheSeedCall) {
  const SmithWatermanOptions o;
  ASSERT_TRUE(o.gap_open().defined());
  EXPECT_EQ(o.gap_open().dim(), 0);
  EXPECT_EQ(o.gap_open().item<double>(), -1.0);
  EXPECT_FALSE(o.gap_extend().has_value());  // linear gaps
  EXPECT_EQ(o.temperature(), 1.0);
  EXPECT_FALSE(o.lengths_a().has_value());
  EXPECT_FALSE(o.lengths_b().has_value());
  EXPECT_EQ(o.mode(), "local");
  EXPECT_EQ(o.reduction(), "max");
}

TEST(SmithWatermanOptions, NumberSettersStoreZeroDimTensors) {
  const auto o = SmithWatermanOptions().gap_open(-11).gap_extend(-0.5);
  EXPECT_EQ(o.gap_open().dim(), 0);
  EXPECT_EQ(o.gap_open().item<double>(), -11.0);
  ASSERT_TRUE(o.gap_extend().has_value());
  EXPECT_EQ(o.gap_extend()->dim(), 0);
  EXPECT_EQ(o.gap_extend()->item<double>(), -0.5);
}

TEST(SmithWatermanOptions, TensorSettersKeepTheTensor) {
  // The same tensor (not a copy): a learnable penalty keeps its autograd identity.
  const auto open = at::full({3}, -2.0, at::kDouble).requires_grad_();
  const auto extend = at::full({3, 1, 1}, -0.25, at::kFloat);
  const auto la = at::tensor({4, 2, 0}, at::kLong);
  const auto lb = at::tensor({5, 5, 1}, at::kLong);
  const auto o = SmithWatermanOptions().gap_open(open).gap_extend(extend).lengths_a(la).lengths_b(lb);
  EXPECT_TRUE(o.gap_open().is_same(open));
  EXPECT_TRUE(o.gap_open().requires_grad());
  ASSERT_TRUE(o.gap_extend().has_value());
  EXPECT_TRUE(o.gap_extend()->is_same(extend));
  ASSERT_TRUE(o.lengths_a().has_value() && o.lengths_b().has_value());
  EXPECT_TRUE(o.lengths_a()->is_same(la));
  EXPECT_TRUE(o.lengths_b()->is_same(lb));
}

TEST(SmithWatermanOptions, EverySetterReturnsTheSameObject) {
  SmithWatermanOptions o;
  EXPECT_EQ(&o.gap_open(-2.0), &o);
  EXPECT_EQ(&o.gap_open(at::scalar_tensor(-2.0)), &o);
  EXPECT_EQ(&o.gap_extend(-1.0), &o);
  EXPECT_EQ(&o.gap_extend(at::scalar_tensor(-1.0)), &o);
  EXPECT_EQ(&o.temperature(0.25), &o);
  EXPECT_EQ(&o.lengths_a(at::tensor({1}, at::kLong)), &o);
  EXPECT_EQ(&o.lengths_b(at::tensor({1}, at::kLong)), &o);
  EXPECT_EQ(&o.mode("global"), &o);
  EXPECT_EQ(&o.reduction("soft"), &o);
}

TEST(SmithWatermanOptions, ScalarSettersAndTheLastValueWins) {
  auto o = SmithWatermanOptions().temperature(0.25).mode("global").reduction("soft");
  EXPECT_EQ(o.temperature(), 0.25);
  EXPECT_EQ(o.mode(), "global");
  EXPECT_EQ(o.reduction(), "soft");
  o.temperature(0).mode("local").gap_open(-3).gap_open(-4);
  EXPECT_EQ(o.temperature(), 0.0);
  EXPECT_EQ(o.mode(), "local");
  EXPECT_EQ(o.gap_open().item<double>(), -4.0);
}

TEST(SmithWatermanOptions, CopiesAreIndependent) {
  const auto base = SmithWatermanOptions().gap_open(-1.5).temperature(0.5);
  auto copy = SmithWatermanOptions(base).gap_extend(-0.5).mode("global").gap_open(-7);
  EXPECT_FALSE(base.gap_extend().has_value());
  EXPECT_EQ(base.mode(), "local");
  EXPECT_EQ(base.gap_open().item<double>(), -1.5);
  EXPECT_EQ(copy.gap_open().item<double>(), -7.0);
  EXPECT_EQ(copy.temperature(), 0.5);
}

TEST(SmithWatermanOptions, OptionsReachTheOp) {
  // Each option changes the result the way docs/spec.md says, through the header's free functions.
  // a = "ACGT", b = "AT", match +2, mismatch -1 (float32).
  const auto scores = at::tensor({2.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, 2.0}, at::kFloat).view({4, 2});
  const auto hard = SmithWatermanOptions().gap_open(-1.5).gap_extend(-0.5).temperature(0);
  EXPECT_FLOAT_EQ(softalign::smith_waterman(scores, hard).item<float>(), 2.0f);
  // Global must align everything: A-(CG)-T with one gap of two = 2 - 1.5 - 0.5 + 2.
  const auto global = SmithWatermanOptions(hard).mode("global");
  EXPECT_FLOAT_EQ(softalign::smith_waterman(scores, global).item<float>(), 2.0f);
  // Linear gaps of -1.5 each: 2 - 3 + 2 = 1 globally.
  const auto linear = SmithWatermanOptions().gap_open(-1.5).temperature(0).mode("global");
  EXPECT_FLOAT_EQ(softalign::smith_waterman(scores, linear).item<float>(), 1.0f);
  // Lengths cut the second sequence to "A": the best local score is the match, 2.
  const auto batch = scores.unsqueeze(0);
  const auto cut = SmithWatermanOptions(hard).lengths_b(at::tensor({1}, at::kLong));
  EXPECT_FLOAT_EQ(softalign::smith_waterman(batch, cut).item<float>(), 2.0f);
  // Soft reduction >= max reduction at t > 0 (a log-sum-exp over cells bounds their max).
  const auto soft = SmithWatermanOptions().temperature(1).reduction("soft");
  EXPECT_GT(softalign::smith_waterman(scores, soft).item<float>(),
            softalign::smith_waterman(scores, SmithWatermanOptions()).item<float>());
  // The alignment function returns the same score and a 0/1 alignment at t = 0.
  auto [score, alignment] = softalign::smith_waterman_alignment(scores, global);
  EXPECT_FLOAT_EQ(score.item<float>(), 2.0f);
  EXPECT_EQ(alignment.sizes(), scores.sizes());
  EXPECT_FLOAT_EQ(alignment.sum().item<float>(), 2.0f);  // A-A and T-T
  EXPECT_EQ(alignment[0][0].item<float>(), 1.0f);
  EXPECT_EQ(alignment[3][1].item<float>(), 1.0f);
}

}  // namespace
