// A TorchScript model that uses torch.ops.softalign, run from C++ without Python:
//   python3 examples/export_torchscript.py model.pt && run_torchscript model.pt
// Only links softalign::softalign, whose static initialisers register the ops the model calls
// (the package links it with --no-as-needed, so it is loaded although nothing of it is called).
// Prints the lines export_torchscript.py prints: the scores of the fixed inputs and the
// gradients of their sum w.r.t. the model's gap penalties.
#include <torch/script.h>

#include <cstdio>
#include <exception>

#include "example_inputs.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s MODEL.pt   (saved by examples/export_torchscript.py)\n", argv[0]);
    return 2;
  }
  torch::jit::script::Module model;
  try {
    model = torch::jit::load(argv[1]);
  } catch (const std::exception& e) {
    // "Unknown builtin op: softalign::..." means libsoftalign.so was not loaded.
    std::fprintf(stderr, "cannot load %s: %s\n", argv[1], e.what());
    return 1;
  }
  const auto inputs = example_inputs();
  const auto scores = model.forward({inputs.begin(), inputs.end()}).toTensor();
  scores.sum().backward();

  std::printf("# %s: TorchScript from C++ (softalign package with CUDA kernels: %s)\n", argv[1],
              SOFTALIGN_PACKAGE_WITH_CUDA ? "yes" : "no");
  for (int64_t b = 0; b < scores.size(0); ++b)
    std::printf("score %lld %.17g\n", static_cast<long long>(b), scores[b].item<double>());
  for (const auto& p : model.named_parameters(/*recurse=*/false)) {
    if (p.name == "gap_open" || p.name == "gap_extend")
      std::printf("grad_%s 0 %.17g\n", p.name.c_str(), p.value.grad().item<double>());
  }
  return 0;
}
