// The schema of every op (declared once) and the C++ front end of include/softalign/softalign.h.
#include "softalign/softalign.h"

#include <dlfcn.h>
#include <torch/library.h>

#include <string>

#include "autograd/temperature.h"
#include "op_handles.h"
#include "problem.h"
#include "registration.h"

namespace softalign {

// The penalties as each overload takes them, then the arguments every overload shares; every
// argument after gap_open is keyword-only (`sw(S, -1.0, 0.5)` would otherwise run with
// gap_extend = 0.5 where a temperature was meant).
#define SOFTALIGN_ARGS(GAP_OPEN, GAP_EXTEND, TEMPERATURE)                                      \
  "Tensor scores, " GAP_OPEN ", *, " GAP_EXTEND ", " TEMPERATURE ", "                          \
  "Tensor? lengths_a=None, Tensor? lengths_b=None, "                                           \
  "str mode=\"local\", str reduction=\"max\""
#define SOFTALIGN_SCALAR_T "Scalar temperature=1.0"
#define SOFTALIGN_FLOAT_T "float temperature=1.0"
#define SOFTALIGN_TENSOR_T "Tensor temperature"

namespace {

// Every overload of one op, in the order eager resolution tries them (the first that matches
// wins). Numbers are Scalar where a kernel does not need a double: Python's parser refuses a
// tensor for a Scalar (and a bool is seen, to be refused), where it reads a 1-element tensor
// for a float through Tensor.__float__, dropping its gradient. So the number penalties with a
// Scalar temperature come first (the seed's call matches at the first try); the all-tensor
// overload with a float temperature comes after the one with a tensor temperature.
void define_overloads(torch::Library& m, const std::string& op, const char* returns) {
  const auto def = [&](const char* overload, const char* args) {
    const std::string name = op + (*overload ? "." : "") + overload;
    m.def((name + "(" + args + ") -> " + returns).c_str());
  };
  def("", SOFTALIGN_ARGS("Scalar gap_open=-1.0", "Scalar? gap_extend=None", SOFTALIGN_SCALAR_T));
  def("open_tensor", SOFTALIGN_ARGS("Tensor gap_open", "Scalar gap_extend", SOFTALIGN_SCALAR_T));
  def("extend_tensor",
      SOFTALIGN_ARGS("Scalar gap_open", "Tensor gap_extend", SOFTALIGN_SCALAR_T));
  def("temperature_tensor",
      SOFTALIGN_ARGS("Tensor gap_open", "Tensor? gap_extend=None", SOFTALIGN_TENSOR_T));
  def("tensor", SOFTALIGN_ARGS("Tensor gap_open", "Tensor? gap_extend=None", SOFTALIGN_FLOAT_T));
  def("temperature_tensor_open_tensor",
      SOFTALIGN_ARGS("Tensor gap_open", "Scalar gap_extend", SOFTALIGN_TENSOR_T));
  def("temperature_tensor_extend_tensor",
      SOFTALIGN_ARGS("Scalar gap_open", "Tensor gap_extend", SOFTALIGN_TENSOR_T));
  def("temperature_tensor_numbers",
      SOFTALIGN_ARGS("Scalar gap_open=-1.0", "Scalar? gap_extend=None", SOFTALIGN_TENSOR_T));
}

#undef SOFTALIGN_ARGS
#undef SOFTALIGN_SCALAR_T
#undef SOFTALIGN_FLOAT_T
#undef SOFTALIGN_TENSOR_T

void define_ops(torch::Library& m) {
  // Their docstrings are set by the Python package (python/softalign/__init__.py).
  define_overloads(m, "smith_waterman", "Tensor");
  define_overloads(m, "smith_waterman_alignment", "(Tensor, Tensor)");
  m.def(
      "_smith_waterman_backward(Tensor grad, Tensor scores, Tensor gap_open, Tensor? gap_extend, "
      "float temperature, Tensor? lengths_a, Tensor? lengths_b, str mode, str reduction) "
      "-> (Tensor, Tensor, Tensor)");
  // The score and its gradient at a seed of 1 per item, for autograd's forward when grad is
  // needed (the backward then only scales it): score in the caller's shape and dtype; d score /
  // d scores as (B, M, N) and d score / d penalties as (B, 1|M, 1|N), per item, in the compute
  // dtype.
  m.def(
      "_smith_waterman_forward_backward(Tensor scores, Tensor gap_open, Tensor? gap_extend, "
      "float temperature, Tensor? lengths_a, Tensor? lengths_b, str mode, str reduction) "
      "-> (Tensor, Tensor, Tensor, Tensor)");
  // values (B, ...) times factors (B,), item by item: the backward's grad times the gradient the
  // forward kept (CUDA: one vectorized pass; elsewhere PyTorch's broadcast multiply).
  m.def("_scale_by_item(Tensor values, Tensor factors) -> Tensor");
  // The file of the copy of the library that registered the ops: a second copy names it.
  m.def("_library_path() -> str", [] { return detail::this_copy_path(); });
}

// TORCH_LIBRARY(softalign, m), but a second copy of the library registers nothing (TORCH_LIBRARY
// would abort the process): it warns, naming both files.
const detail::LibraryInit define_once(torch::Library::DEF, &define_ops, "softalign",
                                      std::nullopt, __FILE__, __LINE__);

// A number penalty (checked: a real number <= 0, not a bool) as a 0-d tensor in the dtype the
// kernels compute in.
at::Tensor penalty_tensor(const c10::Scalar& value, const at::Tensor& scores, const char* name) {
  return number_penalty_tensor(penalty_number(value, name), scores);
}

std::optional<at::Tensor> penalty_tensor(const std::optional<c10::Scalar>& value,
                                         const at::Tensor& scores, const char* name) {
  if (!value.has_value()) return std::nullopt;
  return penalty_tensor(*value, scores, name);
}

// A tensor penalty as it is (a learned penalty may drift positive: no sign check).
const at::Tensor& penalty_tensor(const at::Tensor& value, const at::Tensor&, const char*) {
  return value;
}

// A temperature given as a Scalar: a real number (the kernels check its range).
double temperature_number(const c10::Scalar& value) {
  TORCH_CHECK(!value.isBoolean(), "temperature must be a number or a floating-point tensor, got "
              "a bool (", value, ")");
  TORCH_CHECK(!value.isComplex(), "temperature must be a real number, got ", value);
  return value.toDouble();
}
const at::Tensor& temperature_number(const at::Tensor& value) { return value; }

// The overloads with a number among the penalties: the all-tensor overload of kOp (a number
// or a tensor temperature alike) with those numbers as 0-d tensors.
template <auto kOp, class GapOpen, class GapExtend, class Temperature>
decltype(auto) with_tensor_penalties(const at::Tensor& scores, GapOpen gap_open,
                                     GapExtend gap_extend, Temperature temperature,
                                     const std::optional<at::Tensor>& lengths_a,
                                     const std::optional<at::Tensor>& lengths_b,
                                     c10::string_view mode, c10::string_view reduction) {
  TORCH_CHECK(scores.defined(), "scores must be a floating-point tensor of shape (B, M, N) or "
              "(M, N), got None");
  return kOp(scores, penalty_tensor(gap_open, scores, "gap_open"),
             penalty_tensor(gap_extend, scores, "gap_extend"), temperature_number(temperature),
             lengths_a, lengths_b, mode, reduction);
}

at::Tensor call_score_op(const at::Tensor& scores, const at::Tensor& gap_open,
                         const std::optional<at::Tensor>& gap_extend, double temperature,
                         const std::optional<at::Tensor>& lengths_a,
                         const std::optional<at::Tensor>& lengths_b, c10::string_view mode,
                         c10::string_view reduction) {
  return score_op().call(scores, gap_open, gap_extend, temperature, lengths_a, lengths_b, mode,
                         reduction);
}

std::tuple<at::Tensor, at::Tensor> call_alignment_op(
    const at::Tensor& scores, const at::Tensor& gap_open,
    const std::optional<at::Tensor>& gap_extend, double temperature,
    const std::optional<at::Tensor>& lengths_a, const std::optional<at::Tensor>& lengths_b,
    c10::string_view mode, c10::string_view reduction) {
  return alignment_op().call(scores, gap_open, gap_extend, temperature, lengths_a, lengths_b,
                             mode, reduction);
}

}  // namespace

// The overloads that reduce to another: numbers become 0-d tensors; a tensor temperature is
// autograd/smith_waterman_temperature.cpp's.
SOFTALIGN_LIBRARY_IMPL(CompositeImplicitAutograd, m) {
  using Tensor = const at::Tensor&;
  using Number = const c10::Scalar&;
  using OptionalNumber = const std::optional<c10::Scalar>&;
  using T = const c10::Scalar&;
  m.impl("smith_waterman", &with_tensor_penalties<call_score_op, Number, OptionalNumber, T>);
  m.impl("smith_waterman.open_tensor", &with_tensor_penalties<call_score_op, Tensor, Number, T>);
  m.impl("smith_waterman.extend_tensor",
         &with_tensor_penalties<call_score_op, Number, Tensor, T>);
  m.impl("smith_waterman.temperature_tensor_numbers",
         &with_tensor_penalties<score_with_temperature_tensor, Number, OptionalNumber, Tensor>);
  m.impl("smith_waterman.temperature_tensor_open_tensor",
         &with_tensor_penalties<score_with_temperature_tensor, Tensor, Number, Tensor>);
  m.impl("smith_waterman.temperature_tensor_extend_tensor",
         &with_tensor_penalties<score_with_temperature_tensor, Number, Tensor, Tensor>);
  m.impl("smith_waterman.temperature_tensor", &score_with_temperature_tensor);
  m.impl("smith_waterman_alignment",
         &with_tensor_penalties<call_alignment_op, Number, OptionalNumber, T>);
  m.impl("smith_waterman_alignment.open_tensor",
         &with_tensor_penalties<call_alignment_op, Tensor, Number, T>);
  m.impl("smith_waterman_alignment.extend_tensor",
         &with_tensor_penalties<call_alignment_op, Number, Tensor, T>);
  m.impl("smith_waterman_alignment.temperature_tensor_numbers",
         &with_tensor_penalties<alignment_with_temperature_tensor, Number, OptionalNumber, Tensor>);
  m.impl("smith_waterman_alignment.temperature_tensor_open_tensor",
         &with_tensor_penalties<alignment_with_temperature_tensor, Tensor, Number, Tensor>);
  m.impl("smith_waterman_alignment.temperature_tensor_extend_tensor",
         &with_tensor_penalties<alignment_with_temperature_tensor, Number, Tensor, Tensor>);
  m.impl("smith_waterman_alignment.temperature_tensor", &alignment_with_temperature_tensor);
}

// Every backend but CUDA's (which has a kernel of its own), Meta included.
SOFTALIGN_LIBRARY_IMPL(CompositeExplicitAutograd, m) {
  m.impl("_scale_by_item", &scale_by_item);
}

namespace detail {

std::string this_copy_path() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&this_copy_path), &info) == 0 || !info.dli_fname) {
    return "<unknown>";
  }
  return info.dli_fname;
}

bool is_first_copy() {
  static const bool first = [] {
    const auto registered =
        c10::Dispatcher::singleton().findSchema({"softalign::_library_path", ""});
    if (!registered.has_value()) return true;
    const std::string first_path = registered->typed<std::string()>().call();
    TORCH_WARN("softalign: ", this_copy_path(), " registers nothing: the softalign ops are "
               "already registered by another copy of the library, ", first_path,
               ", which every call uses. Load one copy per process.");
    return false;
  }();
  return first;
}

}  // namespace detail

// ------------------------------------------------------------------ C++ front end

SmithWatermanOptions& SmithWatermanOptions::gap_open(double value) {
  gap_open_ = at::scalar_tensor(penalty_number(value, "gap_open"), at::kDouble);
  return *this;
}
SmithWatermanOptions& SmithWatermanOptions::gap_open(at::Tensor value) {
  gap_open_ = std::move(value);
  return *this;
}
SmithWatermanOptions& SmithWatermanOptions::gap_extend(double value) {
  gap_extend_ = at::scalar_tensor(penalty_number(value, "gap_extend"), at::kDouble);
  return *this;
}
SmithWatermanOptions& SmithWatermanOptions::gap_extend(at::Tensor value) {
  gap_extend_ = std::move(value);
  return *this;
}
SmithWatermanOptions& SmithWatermanOptions::temperature(double value) {
  temperature_ = value;
  temperature_tensor_.reset();
  return *this;
}
SmithWatermanOptions& SmithWatermanOptions::temperature(at::Tensor value) {
  temperature_tensor_ = std::move(value);
  return *this;
}
SmithWatermanOptions& SmithWatermanOptions::lengths_a(at::Tensor value) {
  lengths_a_ = std::move(value);
  return *this;
}
SmithWatermanOptions& SmithWatermanOptions::lengths_b(at::Tensor value) {
  lengths_b_ = std::move(value);
  return *this;
}
SmithWatermanOptions& SmithWatermanOptions::mode(std::string value) {
  mode_ = std::move(value);
  return *this;
}
SmithWatermanOptions& SmithWatermanOptions::reduction(std::string value) {
  reduction_ = std::move(value);
  return *this;
}

at::Tensor smith_waterman(const at::Tensor& scores, const SmithWatermanOptions& o) {
  if (o.temperature_tensor()) {
    return score_t_op().call(scores, o.gap_open(), o.gap_extend(), *o.temperature_tensor(),
                             o.lengths_a(), o.lengths_b(), o.mode(), o.reduction());
  }
  return score_op().call(scores, o.gap_open(), o.gap_extend(), o.temperature(), o.lengths_a(),
                         o.lengths_b(), o.mode(), o.reduction());
}

std::tuple<at::Tensor, at::Tensor> smith_waterman_alignment(const at::Tensor& scores,
                                                            const SmithWatermanOptions& o) {
  if (o.temperature_tensor()) {
    return alignment_t_op().call(scores, o.gap_open(), o.gap_extend(), *o.temperature_tensor(),
                                 o.lengths_a(), o.lengths_b(), o.mode(), o.reduction());
  }
  return alignment_op().call(scores, o.gap_open(), o.gap_extend(), o.temperature(),
                             o.lengths_a(), o.lengths_b(), o.mode(), o.reduction());
}

}  // namespace softalign
