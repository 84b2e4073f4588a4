#include "problem.h"

#include <ATen/ExpandUtils.h>
#include <ATen/OpMathType.h>

#include <cmath>
#include <limits>

#ifdef SOFTALIGN_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <vector>
#endif

namespace softalign {
namespace {

// Whether the current stream of `device` is being captured into a CUDA graph, where nothing
// may wait for the device. Only CUDA builds have CUDA kernels, so only they see CUDA tensors.
bool stream_is_capturing(const at::Device& device) {
#ifdef SOFTALIGN_WITH_CUDA
  if (device.is_cuda()) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    C10_CUDA_CHECK(cudaStreamIsCapturing(c10::cuda::getCurrentCUDAStream(device.index()), &status));
    return status != cudaStreamCaptureStatusNone;
  }
#endif
  (void)device;
  return false;
}

#ifdef SOFTALIGN_WITH_CUDA
// A number on a CUDA device. Filling a tensor with it is a kernel launch per call, which a small
// call's host time feels, so the first kNumbers distinct numbers are kept for the process: filled
// once, on the stream of their first use, which later uses on other streams wait for (an event:
// no synchronisation with the host). Never written (kernels only read penalties), never freed.
// During CUDA graph capture a number is filled in the graph, as any other work.
at::Tensor cuda_number(double value, const at::TensorOptions& options) {
  if (stream_is_capturing(options.device())) return at::full({}, value, options);
  struct Kept {
    double value;
    at::ScalarType dtype;
    c10::DeviceIndex device;
    cudaStream_t filled_on;
    at::Tensor tensor;
    std::shared_ptr<at::cuda::CUDAEvent> filled;
  };
  constexpr size_t kNumbers = 16;
  static std::mutex mutex;
  static auto& kept = *new std::vector<Kept>();  // never destroyed: not after the CUDA driver
  const at::ScalarType dtype = c10::typeMetaToScalarType(options.dtype());
  const c10::DeviceIndex device = options.device().index();
  const c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream(device);
  const std::lock_guard<std::mutex> lock(mutex);
  for (const Kept& k : kept) {
    if (std::memcmp(&k.value, &value, sizeof value) == 0 && k.dtype == dtype && k.device == device) {
      if (k.filled_on != stream.stream()) k.filled->block(stream);
      return k.tensor;
    }
  }
  at::Tensor tensor = at::full({}, value, options);
  if (kept.size() < kNumbers) {
    auto filled = std::make_shared<at::cuda::CUDAEvent>();
    filled->record(stream);
    kept.push_back({value, dtype, device, stream.stream(), tensor, std::move(filled)});
  }
  return tensor;
}
#endif

// The kernels compute in the compute dtype and multiply by 1 / t: a t > 0 outside that dtype's
// normal range would round to inf (float32) or overflow 1 / t, and turn ties into NaN.
template <typename T>
void check_temperature_in(double temperature, at::ScalarType dtype) {
  const double lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
  TORCH_CHECK(temperature == 0 || (temperature >= lo && temperature <= hi),
              "temperature must be 0 or within [", lo, ", ", hi, "], the normal range of ", dtype,
              " (the dtype the scores are computed in), got ", temperature);
}

void check_temperature_range(double temperature, at::ScalarType dtype) {
  if (dtype == at::kDouble) {
    check_temperature_in<double>(temperature, dtype);
  } else {
    check_temperature_in<float>(temperature, dtype);
  }
}

// docs/spec.md's dtypes: float16 and bfloat16 (computed in float32), float32, float64; not float8 or the
// other floating types at::isFloatingType admits.
bool spec_float(at::ScalarType t) {
  return t == at::kHalf || t == at::kBFloat16 || t == at::kFloat || t == at::kDouble;
}

// A penalty as (1|B, 1|M, 1|N): docs/spec.md's accepted shapes ("Notation"), 1-D meaning one per item.
at::Tensor normalise_penalty(const at::Tensor& penalty, const char* name, const at::Tensor& scores,
                             int64_t B, int64_t M, int64_t N, bool local) {
  TORCH_CHECK(penalty.defined(), name, " must be a number or a floating-point tensor, got None");
  TORCH_CHECK(spec_float(penalty.scalar_type()), name,
              " must be a float or a float16, bfloat16, float32 or float64 tensor, got ",
              penalty.scalar_type());
  const bool cpu_scalar = penalty.dim() == 0 && penalty.device().is_cpu();
  TORCH_CHECK(penalty.device() == scores.device() || cpu_scalar, name,
              " must be on the scores' device (", scores.device(), "), got ", penalty.device());
  at::Tensor p = penalty;
  if (p.dim() == 1) {
    TORCH_CHECK(p.size(0) == B || p.size(0) == 1, name,
                " of 1 dimension must hold one value per item, shape (", B, ",), got ",
                p.sizes());
    p = p.view({p.size(0), 1, 1});
  }
  TORCH_CHECK(at::is_expandable_to(p.sizes(), {B, M, N}), name, " of shape ", penalty.sizes(),
              " does not broadcast to the scores' (B, M, N) = (", B, ", ", M, ", ", N, ")");
  while (p.dim() > 3) p = p.squeeze(0);  // leading ones, by the broadcast check
  while (p.dim() < 3) p = p.unsqueeze(0);
  TORCH_CHECK(local || (p.size(1) != 0 && p.size(2) != 0), name, " of shape ", penalty.sizes(),
              " varies along an empty dimension of the scores (M = ", M, ", N = ", N,
              "): global mode has nothing to charge its gaps with");
  if (cpu_scalar && !scores.device().is_cpu()) {
    // Made on the device, not copied from the host: no synchronisation with the device.
    return number_tensor(p.item<double>(), scores.options()).view({1, 1, 1});
  }
  return p.to(scores.device(), scores.scalar_type()).contiguous();
}

at::Tensor normalise_lengths(const std::optional<at::Tensor>& lengths, const char* name,
                             const at::Tensor& scores, int64_t B, int64_t limit,
                             const char* limit_name, bool unbatched) {
  if (!lengths.has_value() || !lengths->defined()) return {};
  const at::Tensor& l = *lengths;
  TORCH_CHECK(at::isIntegralType(l.scalar_type(), /*includeBool=*/false), name,
              " must be an integer tensor, got ", l.scalar_type());
  TORCH_CHECK(l.device().is_cpu() || l.device() == scores.device(), name,
              " must be on the CPU or on the scores' device (", scores.device(), "), got ",
              l.device());
  if (unbatched) {
    TORCH_CHECK(l.numel() == 1 && l.dim() <= 1, name,
                " must hold one length for unbatched (M, N) scores, got shape ", l.sizes());
  } else {
    TORCH_CHECK(l.dim() == 1 && l.size(0) == B, name, " must have shape (B,) = (", B,
                ",), got ", l.sizes());
  }
  // Checked where they are: lengths on the CPU cost no device synchronisation. Device lengths
  // are read back (a synchronisation), except while the stream is being captured into a CUDA
  // graph, where reading back is illegal: they are trusted then (the kernels clamp them to
  // [0, M] and [0, N], views.h, so a bad length gives a wrong score, never a bad access).
  const at::Tensor longs = l.reshape({B}).to(at::kLong);
  if (B > 0 && !stream_is_capturing(longs.device())) {
    const auto [lo, hi] = at::aminmax(longs);
    const int64_t min_length = lo.item<int64_t>(), max_length = hi.item<int64_t>();
    TORCH_CHECK(min_length >= 0 && max_length <= limit, name, " must lie in [0, ", limit_name,
                " = ", limit, "], got values in [", min_length, ", ", max_length, "]");
  }
  TORCH_CHECK(longs.device() == scores.device() || !stream_is_capturing(scores.device()), name,
              " must be on the scores' device (", scores.device(), ") during CUDA graph "
              "capture: a copy from the CPU synchronises with the device");
  at::Tensor out = longs.to(scores.device()).contiguous();
  return out;
}

bool reduction_applies(std::string_view mode, std::string_view reduction) {
  return mode == "local" || reduction == "max";
}

}  // namespace

double penalty_number(const c10::Scalar& value, const char* name) {
  TORCH_CHECK(!value.isBoolean(), name,
              " must be a number or a floating-point tensor, got a bool (", value, ")");
  TORCH_CHECK(!value.isComplex(), name, " must be a real number, got ", value);
  const double number = value.toDouble();
  TORCH_CHECK(!(number > 0), name, " must be <= 0: penalties are added to the score (the "
              "seed's gap_open = -1.0), so a gap cost of ", number, " (BLAST's and EMBOSS's "
              "convention) is ", name, "=", -number, ", got ", name, "=", number);
  return number;
}

at::Tensor number_penalty_tensor(double value, const at::Tensor& scores) {
  return number_tensor(value, scores.options().dtype(compute_dtype(scores.scalar_type())));
}

at::Tensor nan_of_items(const at::Tensor& score) {
  return at::clamp(score, 0, 0);  // clamp keeps NaN, sends +-inf to 0
}

void nan_items_to_nan(at::Tensor& grad, const at::Tensor& score) {
#ifdef SOFTALIGN_WITH_CUDA
  // The CUDA kernels' outputs: contiguous, in the score's dtype.
  if (grad.is_cuda() && grad.is_contiguous() && grad.scalar_type() == score.scalar_type()) {
    return nan_items_to_nan_cuda(grad, score);
  }
#endif
  const at::Tensor nan_items = at::isnan(score.reshape({grad.size(0)}));
  // On the CPU, reading the flag back is free and spares the pass over (B, M, N) when no item
  // is NaN; on a device it would wait for the device (and break CUDA graph capture).
  if (grad.is_cpu() && !nan_items.any().item<bool>()) return;
  std::vector<int64_t> shape(grad.dim(), 1);
  shape[0] = grad.size(0);
  grad.masked_fill_(nan_items.view(shape), std::numeric_limits<double>::quiet_NaN());
}

at::Tensor number_tensor(double value, const at::TensorOptions& options) {
#ifdef SOFTALIGN_WITH_CUDA
  if (options.device().is_cuda()) return cuda_number(value, options);
#endif
  return at::scalar_tensor(value, options);
}

Problem make_problem(const at::Tensor& scores, const at::Tensor& gap_open,
                     const std::optional<at::Tensor>& gap_extend, double temperature,
                     const std::optional<at::Tensor>& lengths_a,
                     const std::optional<at::Tensor>& lengths_b, std::string_view mode,
                     std::string_view reduction) {
  TORCH_CHECK(scores.defined(), "scores must be a floating-point tensor of shape (B, M, N) or "
              "(M, N), got None");
  TORCH_CHECK(scores.dim() == 3 || scores.dim() == 2,
              "scores must be (B, M, N) or unbatched (M, N), got shape ", scores.sizes());
  TORCH_CHECK(spec_float(scores.scalar_type()),
              "scores must be float16, bfloat16, float32 or float64, got ", scores.scalar_type());
  TORCH_CHECK(mode == "local" || mode == "global", "mode must be \"local\" or \"global\", got \"",
              mode, "\"");
  TORCH_CHECK(reduction == "max" || reduction == "soft",
              "reduction must be \"max\" or \"soft\", got \"", reduction, "\"");
  TORCH_CHECK(reduction_applies(mode, reduction),
              "reduction=\"soft\" applies to mode=\"local\" only (a global alignment has one end "
              "cell, nothing to reduce): pass reduction=\"max\" (the default) with "
              "mode=\"global\"");
  TORCH_CHECK(std::isfinite(temperature) && temperature >= 0,
              "temperature must be finite and >= 0, got ", temperature);
  check_temperature_range(temperature, compute_dtype(scores.scalar_type()));

  Problem p;
  p.unbatched = scores.dim() == 2;
  p.result_dtype = scores.scalar_type();
  p.local = mode == "local";
  p.soft_reduction = reduction == "soft";
  p.temperature = temperature;
  const at::Tensor s3 = p.unbatched ? scores.unsqueeze(0) : scores;
  const int64_t B = s3.size(0), M = s3.size(1), N = s3.size(2);
  TORCH_CHECK(M < INT32_MAX && N < INT32_MAX, "scores' M and N must be below 2^31, got ",
              scores.sizes());
  p.scores = s3.to(compute_dtype(scores.scalar_type())).contiguous();
  p.gap_open = normalise_penalty(gap_open, "gap_open", p.scores, B, M, N, p.local);
  if (gap_extend.has_value() && gap_extend->defined()) {
    p.gap_extend = normalise_penalty(*gap_extend, "gap_extend", p.scores, B, M, N, p.local);
  }
  p.lengths_a = normalise_lengths(lengths_a, "lengths_a", p.scores, B, M, "M", p.unbatched);
  p.lengths_b = normalise_lengths(lengths_b, "lengths_b", p.scores, B, N, "N", p.unbatched);
  return p;
}

ProblemGrads make_grads(const Problem& p, bool zero_scores) {
  ProblemGrads g;
  const int64_t B = p.batch();
  g.score = at::empty({B}, p.scores.options());
  g.scores = zero_scores ? at::zeros_like(p.scores) : at::empty_like(p.scores);
  g.gap_open = at::zeros({B, p.gap_open.size(1), p.gap_open.size(2)}, p.scores.options());
  if (p.affine()) {
    g.gap_extend = at::zeros({B, p.gap_extend.size(1), p.gap_extend.size(2)}, p.scores.options());
  }
  return g;
}

at::Tensor score_to_caller(const Problem& p, const at::Tensor& score) {
  const at::Tensor s = score.to(p.result_dtype);
  return p.unbatched ? s.reshape({}) : s;
}

at::Tensor scores_grad_to_caller(const Problem& p, const at::Tensor& grad) {
  const at::Tensor g = grad.to(p.result_dtype);
  return p.unbatched ? g.squeeze(0) : g;
}

at::Tensor scale_by_item(const at::Tensor& values, const at::Tensor& factors) {
  TORCH_CHECK(values.dim() >= 1 && factors.dim() == 1 && factors.size(0) == values.size(0),
              "softalign::_scale_by_item: factors must be one number per item of values, got "
              "values of shape ", values.sizes(), " and factors of shape ", factors.sizes());
  std::vector<int64_t> shape(values.dim(), 1);
  shape[0] = values.size(0);
  return values * factors.reshape(shape);
}

at::Tensor penalty_grad_to_caller(const at::Tensor& grad, const at::Tensor& penalty) {
  // grad is (B, 1|M, 1|N) per item; the caller's penalty broadcast to that from its own shape.
  at::Tensor g = grad;
  if (penalty.dim() == 1) {
    g = at::sum_to(g, at::IntArrayRef({penalty.size(0), 1, 1}));
  } else {
    std::vector<int64_t> shape(penalty.sizes().begin(), penalty.sizes().end());
    while (shape.size() < 3) shape.insert(shape.begin(), 1);
    while (shape.size() > 3) shape.erase(shape.begin());
    g = at::sum_to(g, at::IntArrayRef(shape));
  }
  return g.reshape(penalty.sizes()).to(penalty.device(), penalty.scalar_type());
}

namespace {
int64_t broadcast_stride(const at::Tensor& t, int dim) {
  return t.size(dim) == 1 ? 0 : t.stride(dim);
}
}  // namespace

template <typename T>
ProblemView<T> view_of(const Problem& p) {
  ProblemView<T> v;
  v.scores = p.scores.data_ptr<T>();
  v.M = p.scores.size(1);
  v.N = p.scores.size(2);
  v.open = p.gap_open.data_ptr<T>();
  v.open_sb = broadcast_stride(p.gap_open, 0);
  v.open_si = broadcast_stride(p.gap_open, 1);
  v.open_sj = broadcast_stride(p.gap_open, 2);
  v.extend = p.affine() ? p.gap_extend.data_ptr<T>() : nullptr;
  v.extend_sb = p.affine() ? broadcast_stride(p.gap_extend, 0) : 0;
  v.extend_si = p.affine() ? broadcast_stride(p.gap_extend, 1) : 0;
  v.extend_sj = p.affine() ? broadcast_stride(p.gap_extend, 2) : 0;
  v.lengths_a = p.lengths_a.defined() ? p.lengths_a.data_ptr<int64_t>() : nullptr;
  v.lengths_b = p.lengths_b.defined() ? p.lengths_b.data_ptr<int64_t>() : nullptr;
  v.config = {static_cast<T>(p.temperature), p.local, p.soft_reduction};
  return v;
}

template <typename T>
GradsView<T> view_of(const ProblemGrads& g) {
  GradsView<T> v;
  v.scores = g.scores.data_ptr<T>();
  v.M = g.scores.size(1);
  v.N = g.scores.size(2);
  v.open = g.gap_open.data_ptr<T>();
  v.open_sb = g.gap_open.stride(0);
  v.open_si = broadcast_stride(g.gap_open, 1);
  v.open_sj = broadcast_stride(g.gap_open, 2);
  const bool affine = g.gap_extend.defined();
  v.extend = affine ? g.gap_extend.data_ptr<T>() : nullptr;
  v.extend_sb = affine ? g.gap_extend.stride(0) : 0;
  v.extend_si = affine ? broadcast_stride(g.gap_extend, 1) : 0;
  v.extend_sj = affine ? broadcast_stride(g.gap_extend, 2) : 0;
  return v;
}

template ProblemView<float> view_of<float>(const Problem&);
template ProblemView<double> view_of<double>(const Problem&);
template GradsView<float> view_of<float>(const ProblemGrads&);
template GradsView<double> view_of<double>(const ProblemGrads&);

}  // namespace softalign
