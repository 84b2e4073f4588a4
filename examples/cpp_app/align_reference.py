"""What align_cli.cpp prints, computed from Python with torch.ops.softalign.* (same lines).

    python3 examples/cpp_app/align_reference.py   # SOFTALIGN_LIBRARY picks the library
"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
import softalign  # noqa: E402

B, M, N = 3, 7, 6


def example_scores() -> torch.Tensor:
    i = torch.arange(M, dtype=torch.float64).view(1, M, 1)
    j = torch.arange(N, dtype=torch.float64).view(1, 1, N)
    b = torch.arange(B, dtype=torch.float64).view(B, 1, 1)
    return 2 * torch.sin(0.37 * i * j + 1.1 * i - 0.7 * j + 0.5 * b) - 0.5


def show(name: str, values: torch.Tensor) -> None:
    for k, v in enumerate(values.detach().double().reshape(-1).tolist()):
        print(f"{name} {k} {v!r}")


def main() -> None:
    softalign.load_library()
    ops = torch.ops.softalign
    scores = example_scores()
    lengths_a = torch.tensor([7, 4, 2])
    lengths_b = torch.tensor([6, 6, 3])

    show("linear_local_max", ops.smith_waterman(scores))

    gap_open = torch.full((B,), -1.5, dtype=torch.float64, requires_grad=True)
    gap_extend = torch.tensor(-0.5, dtype=torch.float64)
    affine = dict(temperature=0.5, lengths_a=lengths_a, lengths_b=lengths_b, reduction="soft")
    soft = ops.smith_waterman(scores, gap_open, gap_extend=gap_extend, **affine)
    show("affine_local_soft", soft)
    (grad,) = torch.autograd.grad(soft.sum(), gap_open)
    show("affine_local_soft_grad_gap_open", grad)

    show("affine_global_float32",
         ops.smith_waterman(scores.float(), -1.5, gap_extend=-0.5, mode="global"))

    hard_score, hard_alignment = ops.smith_waterman_alignment(scores, -1.0, temperature=0.0)
    show("hard_local", hard_score)
    show("hard_local_alignment_item0", hard_alignment[0])

    _, alignment = ops.smith_waterman_alignment(scores, gap_open.detach(), gap_extend=gap_extend, **affine)
    cell = torch.arange(M * N, dtype=torch.float64).view(1, M, N)
    show("soft_alignment_mass", alignment.sum((1, 2)))
    show("soft_alignment_centre", (alignment * cell).sum((1, 2)))


if __name__ == "__main__":
    main()
