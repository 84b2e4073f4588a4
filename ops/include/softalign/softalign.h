// softalign: differentiable (soft) Smith-Waterman alignment for libtorch programs.
//
//   auto opts = softalign::SmithWatermanOptions().gap_open(-11).gap_extend(-1).temperature(1);
//   at::Tensor score = softalign::smith_waterman(scores, opts);        // (B,), differentiable
//   auto [score2, alignment] = softalign::smith_waterman_alignment(scores, opts);  // d score/d S
//
// `scores` is (B, M, N) or (M, N). What each option means is the contract in docs/spec.md: penalties
// are added (so they are negative), a penalty is a number or a tensor that broadcasts to
// (B, M, N) (1-D: one per item), temperature 0 is the classic hard recurrence, lengths are
// per-item (B,) integer tensors, mode is "local" or "global", reduction "max" or "soft" (local
// only: "soft" with "global" is an error).
// Linking against libsoftalign registers the ops; these functions call them through the
// dispatcher, so autograd, CPU and CUDA all work as for torch.ops.softalign.* from Python.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <tuple>

namespace softalign {

class SmithWatermanOptions {
 public:
  // Penalties are added: <= 0 (BLAST's gap cost 11 is gap_open(-11)); a number > 0 throws
  // c10::Error. A tensor penalty (learnable, it may drift positive) is not checked.
  SmithWatermanOptions& gap_open(double value);
  SmithWatermanOptions& gap_open(at::Tensor value);
  // Setting gap_extend selects the affine gap model; leaving it unset, the linear one.
  SmithWatermanOptions& gap_extend(double value);
  SmithWatermanOptions& gap_extend(at::Tensor value);
  SmithWatermanOptions& temperature(double value);
  // A tensor temperature, 0-d or (B,) (one per item), differentiable; its value is read on the
  // host (a synchronisation for a device tensor). Setting a number afterwards replaces it.
  SmithWatermanOptions& temperature(at::Tensor value);
  SmithWatermanOptions& lengths_a(at::Tensor value);
  SmithWatermanOptions& lengths_b(at::Tensor value);
  SmithWatermanOptions& mode(std::string value);       // "local" or "global"
  SmithWatermanOptions& reduction(std::string value);  // "max" or "soft"

  const at::Tensor& gap_open() const { return gap_open_; }
  const std::optional<at::Tensor>& gap_extend() const { return gap_extend_; }
  double temperature() const { return temperature_; }
  const std::optional<at::Tensor>& temperature_tensor() const { return temperature_tensor_; }
  const std::optional<at::Tensor>& lengths_a() const { return lengths_a_; }
  const std::optional<at::Tensor>& lengths_b() const { return lengths_b_; }
  const std::string& mode() const { return mode_; }
  const std::string& reduction() const { return reduction_; }

 private:
  at::Tensor gap_open_ = at::scalar_tensor(-1.0, at::kDouble);
  std::optional<at::Tensor> gap_extend_;
  double temperature_ = 1.0;
  std::optional<at::Tensor> temperature_tensor_;
  std::optional<at::Tensor> lengths_a_, lengths_b_;
  std::string mode_ = "local";
  std::string reduction_ = "max";
};

// The alignment score of every item: (B,), or 0-d for (M, N) scores.
at::Tensor smith_waterman(const at::Tensor& scores,
                          const SmithWatermanOptions& options = SmithWatermanOptions());

// The score and d score / d scores (the soft alignment; 0/1 at temperature 0), without autograd.
std::tuple<at::Tensor, at::Tensor> smith_waterman_alignment(
    const at::Tensor& scores, const SmithWatermanOptions& options = SmithWatermanOptions());

}  // namespace softalign
