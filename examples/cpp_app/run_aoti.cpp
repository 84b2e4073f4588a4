// An AOTInductor package of an exported model that uses torch.ops.softalign, run from C++:
//   python3 examples/export_check.py --aoti model.pt2 && run_aoti model.pt2
// The package's compiled code calls the op through libtorch's proxy executor, which finds it
// registered by libsoftalign.so (linked, as for run_torchscript, only for its registrations).
// Prints the scores of export_torchscript.py's fixed inputs, as export_check.py --aoti does.
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>

#include <cstdio>
#include <exception>

#include "example_inputs.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s MODEL.pt2   (saved by examples/export_check.py --aoti)\n", argv[0]);
    return 2;
  }
  try {
    torch::inductor::AOTIModelPackageLoader loader(argv[1]);
    const auto outputs = loader.run(example_inputs());
    const auto scores = outputs.at(0);
    std::printf("# %s: AOTInductor package from C++ (softalign package with CUDA kernels: %s)\n",
                argv[1], SOFTALIGN_PACKAGE_WITH_CUDA ? "yes" : "no");
    for (int64_t b = 0; b < scores.size(0); ++b)
      std::printf("score %lld %.17g\n", static_cast<long long>(b), scores[b].item<double>());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cannot run %s: %s\n", argv[1], e.what());
    return 1;
  }
  return 0;
}
