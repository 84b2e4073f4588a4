#include <gtest/gtest.h>
#include <softalign/softalign.h>
#include <torch/torch.h>
TEST(Smoke, Runs) { auto s = softalign::smith_waterman(torch::randn({2,3,4})); EXPECT_EQ(s.size(0), 2); }
