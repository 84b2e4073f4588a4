// The CUDA backend against the CPU backend, through the C++ API: forward values and the
// gradients of scores and penalties, for every gap model, end, temperature 0 and 1, per-item
// penalties (float32: the striped kernels) and per-position ones (the thread-per-item path),
// lengths, float64, long pairs over several stripes, empty batches and sequences. Each CUDA
// result must also repeat bit for bit, on the default stream and on another one. Skipped
// without a CUDA device. Streams go through c10's device-generic interfaces, so this file
// compiles against any libtorch (CPU-only builds included).
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <gtest/gtest.h>
#include <softalign/softalign.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace {

enum class Penalties { Number, Item, Position };  // a double; (B, 1, 1); (B, M, N)

struct Case {
  int64_t B, M, N;
  bool affine;
  std::string mode, reduction;
  double t;
  Penalties penalties;
  bool lengths;
  torch::ScalarType dtype;
};

std::string name_of(const Case& c) {
  const char* pen[] = {"number", "item", "position"};
  return std::to_string(c.B) + "x" + std::to_string(c.M) + "x" + std::to_string(c.N) + "_" +
         (c.affine ? "affine_" : "linear_") + c.mode + "_" + c.reduction + "_t" +
         std::to_string(int(c.t)) + "_" + pen[int(c.penalties)] + (c.lengths ? "_lengths" : "") +
         (c.dtype == torch::kDouble ? "_f64" : "_f32");
}

void PrintTo(const Case& c, std::ostream* os) { *os << name_of(c); }

// One random problem, on the CPU in the case's dtype; lengths hold 0 and the full length.
struct Inputs {
  torch::Tensor scores, open, extend, lengths_a, lengths_b, weights;
};

Inputs make_inputs(const Case& c) {
  torch::manual_seed(c.B * 1000003 + c.M * 1009 + c.N);
  const auto f = torch::TensorOptions().dtype(c.dtype);
  const auto shape = c.penalties == Penalties::Position ? std::vector<int64_t>{c.B, c.M, c.N}
                                                        : std::vector<int64_t>{c.B, 1, 1};
  Inputs in;
  in.scores = torch::randn({c.B, c.M, c.N}, f);
  in.open = -1.5 + 0.3 * torch::randn(shape, f);
  if (c.affine) in.extend = -0.5 + 0.1 * torch::randn(shape, f);
  in.weights = torch::randn({c.B}, f);  // d loss / d score
  if (c.lengths) {
    in.lengths_a = torch::randint(0, c.M + 1, {c.B}, torch::kLong);
    in.lengths_b = torch::randint(0, c.N + 1, {c.B}, torch::kLong);
    if (c.B > 1) {
      in.lengths_a[0] = 0, in.lengths_b[0] = c.N;
      in.lengths_a[1] = c.M, in.lengths_b[1] = 0;
    }
    if (c.B > 2) in.lengths_a[2] = c.M, in.lengths_b[2] = c.N;
  }
  return in;
}

// The score and the gradients of sum(weights * score), back on the CPU.
struct Result {
  torch::Tensor score, d_scores, d_open, d_extend;
};

Result evaluate(const Case& c, const Inputs& in, torch::Device device) {
  const auto on = [&](const torch::Tensor& t) { return t.defined() ? t.to(device) : t; };
  // A fresh leaf per call: to(kCPU) of a CPU tensor is the tensor itself, so without detach()
  // the CPU run would make in.scores require grad and every later copy a non-leaf.
  const auto leaf = [&](const torch::Tensor& t) {
    return t.defined() ? on(t).detach().requires_grad_() : t;
  };
  const torch::Tensor scores = leaf(in.scores);
  const bool tensors = c.penalties != Penalties::Number;
  const torch::Tensor open = tensors ? leaf(in.open) : torch::Tensor();
  const torch::Tensor extend = tensors ? leaf(in.extend) : torch::Tensor();
  auto opts = softalign::SmithWatermanOptions().temperature(c.t).mode(c.mode).reduction(c.reduction);
  if (tensors) {
    opts.gap_open(open);
    if (c.affine) opts.gap_extend(extend);
  } else {
    opts.gap_open(in.open.flatten()[0].item<double>());
    if (c.affine) opts.gap_extend(in.extend.flatten()[0].item<double>());
  }
  if (c.lengths) opts.lengths_a(on(in.lengths_a)).lengths_b(on(in.lengths_b));
  const torch::Tensor score = softalign::smith_waterman(scores, opts);
  Result r{score.detach().cpu()};
  if (c.B > 0) score.backward(on(in.weights));
  const auto grad = [](const torch::Tensor& t) {
    return t.defined() && t.grad().defined() ? t.grad().cpu() : torch::Tensor();
  };
  r.d_scores = grad(scores);
  r.d_open = grad(open);
  r.d_extend = grad(extend);
  return r;
}

void expect_close(const torch::Tensor& got, const torch::Tensor& want, double tol,
                  const char* what) {
  ASSERT_EQ(got.defined(), want.defined()) << what;
  if (!want.defined()) return;
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  ASSERT_EQ(got.scalar_type(), want.scalar_type()) << what;
  EXPECT_TRUE(torch::allclose(got, want, tol, tol, /*equal_nan=*/true))
      << what << ": largest difference " << (got - want).abs().nan_to_num(0).max().item<double>();
}

void expect_equal(const Result& got, const Result& want, const char* run) {
  SCOPED_TRACE(run);
  expect_close(got.score, want.score, 0, "score");
  expect_close(got.d_scores, want.d_scores, 0, "d score / d scores");
  expect_close(got.d_open, want.d_open, 0, "d score / d gap_open");
  expect_close(got.d_extend, want.d_extend, 0, "d score / d gap_extend");
}

class CudaMatchesCpu : public testing::TestWithParam<Case> {};

TEST_P(CudaMatchesCpu, ValuesGradientsAndRepeats) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const Case& c = GetParam();
  const Inputs in = make_inputs(c);
  const torch::Device cuda(torch::kCUDA, 0);
  const Result want = evaluate(c, in, torch::kCPU);
  const Result got = evaluate(c, in, cuda);

  const double tol = c.dtype == torch::kDouble ? 1e-9 : 2e-4;
  expect_close(got.score, want.score, tol, "score");
  if (c.t > 0) {  // t = 0: gradients follow argmax choices that rounding may flip
    expect_close(got.d_scores, want.d_scores, tol, "d score / d scores");
    expect_close(got.d_open, want.d_open, tol, "d score / d gap_open");
    expect_close(got.d_extend, want.d_extend, tol, "d score / d gap_extend");
  }

  expect_equal(evaluate(c, in, cuda), got, "second run");
  c10::impl::VirtualGuardImpl impl(torch::kCUDA);
  const c10::Stream side = impl.getStreamFromGlobalPool(cuda);
  ASSERT_NE(side, impl.getStream(cuda));
  Result on_side;
  {
    const c10::StreamGuard guard(side);
    on_side = evaluate(c, in, cuda);
  }
  expect_equal(on_side, got, "pool stream");
}

std::vector<Case> cases() {
  std::vector<Case> out;
  const std::vector<std::pair<std::string, std::string>> ends = {
      {"local", "max"}, {"local", "soft"}, {"global", "max"}};
  for (const bool affine : {false, true}) {
    for (const auto& end : ends) {
      const auto add = [&](int64_t B, int64_t M, int64_t N, double t, Penalties pen,
                           bool lengths, torch::ScalarType dtype) {
        out.push_back({B, M, N, affine, end.first, end.second, t, pen, lengths, dtype});
      };
      for (const double t : {0.0, 1.0}) {
        for (const Penalties pen : {Penalties::Item, Penalties::Position}) {
          add(5, 17, 23, t, pen, true, torch::kFloat);
          add(4, 9, 12, t, pen, true, torch::kDouble);
        }
        add(3, 300, 200, t, Penalties::Item, true, torch::kFloat);  // several stripes
      }
      add(3, 300, 200, 1.0, Penalties::Position, false, torch::kFloat);
      add(40, 31, 40, 1.0, Penalties::Number, false, torch::kFloat);
      add(0, 5, 7, 1.0, Penalties::Item, true, torch::kFloat);  // no items
      add(3, 0, 6, 1.0, Penalties::Item, true, torch::kFloat);  // empty sequences
      add(3, 6, 0, 1.0, Penalties::Number, false, torch::kDouble);
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaMatchesCpu, testing::ValuesIn(cases()),
                         [](const testing::TestParamInfo<Case>& info) {
                           return name_of(info.param);
                         });

}  // namespace
