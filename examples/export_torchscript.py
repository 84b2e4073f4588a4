"""TorchScript deployment: script a small model that uses soft Smith-Waterman, save it for C++.

    python3 examples/export_torchscript.py model.pt
    build-app/run_torchscript model.pt      # examples/cpp_app: the same numbers, no Python

The model: learned residue embeddings -> bilinear pairwise scores -> soft Smith-Waterman with
learnable affine gap penalties and the soft reduction. It is scored on fixed token sequences
(example_inputs: integer formulas that run_torchscript.cpp repeats), and prints, as
"<name> <index> <value>" lines, the scores and the gradients of their sum w.r.t. the gap
penalties, after checking that the saved and reloaded module gives exactly the eager numbers.
"""
import argparse
import sys
from pathlib import Path
from typing import Tuple

import torch

sys.path.append(str(Path(__file__).resolve().parents[1] / "python"))  # an installed softalign first
import softalign  # noqa: E402

VOCAB, DIM = 20, 8
B, M, N = 3, 8, 6


class SoftAlignScorer(torch.nn.Module):
    """tokens_a (B, M), tokens_b (B, N), lengths (B,) -> (B,) soft local alignment scores."""

    def __init__(self, vocab: int = VOCAB, dim: int = DIM, temperature: float = 0.5):
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        self.embed = torch.nn.Parameter(torch.randn(vocab, dim, generator=generator, dtype=torch.float64))
        self.interaction = torch.nn.Parameter(
            torch.eye(dim, dtype=torch.float64) + 0.1 * torch.randn(dim, dim, generator=generator, dtype=torch.float64))
        self.bias = torch.nn.Parameter(torch.tensor(-0.5, dtype=torch.float64))
        self.gap_open = torch.nn.Parameter(torch.tensor(-1.5, dtype=torch.float64))
        self.gap_extend = torch.nn.Parameter(torch.tensor(-0.5, dtype=torch.float64))
        self.temperature = temperature
        self.scale = dim ** -0.5

    def forward(self, tokens_a: torch.Tensor, tokens_b: torch.Tensor, lengths_a: torch.Tensor,
                lengths_b: torch.Tensor) -> torch.Tensor:
        ea = self.embed[tokens_a]                                   # (B, M, D)
        eb = self.embed[tokens_b]                                   # (B, N, D)
        scores = torch.matmul(ea @ self.interaction, eb.transpose(1, 2)) * self.scale + self.bias
        return torch.ops.softalign.smith_waterman(
            scores, self.gap_open, gap_extend=self.gap_extend, temperature=self.temperature,
            lengths_a=lengths_a, lengths_b=lengths_b, mode="local", reduction="soft")


def example_inputs() -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The fixed inputs (run_torchscript.cpp builds the same): b shares a motif with a."""
    b = torch.arange(B).view(B, 1)
    i = torch.arange(M).view(1, M)
    j = torch.arange(N).view(1, N)
    tokens_a = (7 * b + 3 * i + (i * i) % 5) % VOCAB
    tokens_b = (7 * b + 3 * (j + 2) + ((j + 2) * (j + 2)) % 5 + (j == 3).long()) % VOCAB
    return tokens_a, tokens_b, torch.tensor([8, 5, 3]), torch.tensor([6, 6, 2])


def numbers(model: torch.nn.Module, inputs) -> list:
    """The lines both sides print: scores, and d sum(scores) / d gap penalties."""
    scores = model(*inputs)
    grad_open, grad_extend = torch.autograd.grad(scores.sum(), [model.gap_open, model.gap_extend])
    lines = [f"score {k} {v!r}" for k, v in enumerate(scores.tolist())]
    lines.append(f"grad_gap_open 0 {grad_open.item()!r}")
    lines.append(f"grad_gap_extend 0 {grad_extend.item()!r}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="where to save the TorchScript module (.pt)")
    args = parser.parse_args()
    softalign.load_library()

    model = SoftAlignScorer()
    inputs = example_inputs()
    expected = numbers(model, inputs)
    torch.jit.script(model).save(args.path)
    reloaded = numbers(torch.jit.load(args.path), inputs)
    if reloaded != expected:
        sys.exit("the reloaded TorchScript module disagrees with eager:\n"
                 + "\n".join(f"  {e}  |  {r}" for e, r in zip(expected, reloaded)))
    print(f"# saved {args.path}; scripted and reloaded module matches eager exactly")
    print("\n".join(expected))


if __name__ == "__main__":
    main()
