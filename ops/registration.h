// Registration that a second copy of the library (another libsoftalign.so in the same process)
// skips, instead of aborting the process in TORCH_LIBRARY's static initializer: every
// TORCH_LIBRARY_IMPL(softalign, ...) of the library is written SOFTALIGN_LIBRARY_IMPL(...).
#pragma once

#include <torch/library.h>

#include <memory>
#include <optional>
#include <string>

namespace softalign {
namespace detail {

// Whether this copy of the library registers the ops: decided once per copy, by the first
// registration of the copy to run, from whether the dispatcher already has the ops. Hidden: a
// second copy must not bind to the first copy's answer.
__attribute__((visibility("hidden"))) bool is_first_copy();

// The file this copy of the library was loaded from.
__attribute__((visibility("hidden"))) std::string this_copy_path();

// torch::detail::TorchLibraryInit, but registering nothing in a second copy.
class LibraryInit {
 public:
  using InitFn = void(torch::Library&);
  LibraryInit(torch::Library::Kind kind, InitFn* fn, const char* ns,
              std::optional<c10::DispatchKey> key, const char* file, uint32_t line) {
    if (!is_first_copy()) return;
    library_ = std::make_unique<torch::Library>(kind, ns, key, file, line);
    fn(*library_);
  }

 private:
  std::unique_ptr<torch::Library> library_;
};

}  // namespace detail
}  // namespace softalign

#define SOFTALIGN_LIBRARY_IMPL(k, m) \
  SOFTALIGN_LIBRARY_IMPL_UID(k, m, C10_UID)

#define SOFTALIGN_LIBRARY_IMPL_UID(k, m, uid)                                              \
  static void C10_CONCATENATE(SOFTALIGN_LIBRARY_IMPL_init_##k##_, uid)(torch::Library&);   \
  static const ::softalign::detail::LibraryInit C10_CONCATENATE(                           \
      SOFTALIGN_LIBRARY_IMPL_static_init_##k##_, uid)(                                     \
      torch::Library::IMPL, &C10_CONCATENATE(SOFTALIGN_LIBRARY_IMPL_init_##k##_, uid),     \
      "softalign", std::make_optional(c10::DispatchKey::k), __FILE__, __LINE__);           \
  void C10_CONCATENATE(SOFTALIGN_LIBRARY_IMPL_init_##k##_, uid)(torch::Library & m)
