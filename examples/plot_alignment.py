"""The soft alignment as a picture: heatmap of d score / d scores with the optimal path over it.

Used by `examples/train.py --plot out.png`; needs matplotlib (requirements.txt). `plot_pair` draws
one pair, one panel per model (e.g. before and after training):
    heatmap   the soft alignment at temperature 1 (local, soft reduction): the probability that
              residue i of a is aligned with residue j of b under the Gibbs distribution
    line      the optimal local alignment (temperature 0), its aligned pairs joined in order
    circles   the planted (true) alignment
"""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

import softalign  # noqa: E402


@torch.no_grad()
def alignments(model, batch, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(soft at t = 1, hard at t = 0) alignment matrices of pair k, cut to its lengths, on CPU."""
    m, n = int(batch.lengths_a[k]), int(batch.lengths_b[k])
    scores = model.scores(batch)[k, :m, :n]
    gaps = dict(gap_open=model.gap_open.detach(), gap_extend=model.gap_extend.detach())
    _, soft = softalign.smith_waterman_alignment(scores, **gaps, temperature=1.0, mode="local",
                                                 reduction="soft")
    _, hard = softalign.smith_waterman_alignment(scores, **gaps, temperature=0.0, mode="local")
    return soft.float().cpu(), hard.float().cpu()


def path(hard: torch.Tensor) -> tuple[list[float], list[float]]:
    """The optimal path through the cells of its aligned pairs: between two matches, down the
    gap in a (the X state of docs/spec.md) at the previous column, then along the gap in b (Y) in the row
    before the next match."""
    pairs = torch.nonzero(hard > 0.5).tolist()
    rows, cols = [], []
    for k, (i, j) in enumerate(pairs):
        if k:
            pi, pj = pairs[k - 1]
            if i - pi > 1:
                rows.append(i - 1)
                cols.append(pj)
            if j - pj > 1:
                rows.append(i - 1)
                cols.append(j - 1)
        rows.append(i)
        cols.append(j)
    return rows, cols


def draw(ax, soft: torch.Tensor, hard: torch.Tensor, planted: torch.Tensor, seq_a: str,
         seq_b: str, title: str):
    image = ax.imshow(soft.numpy(), cmap="magma", vmin=0.0, vmax=1.0, origin="upper",
                      interpolation="nearest", aspect="equal")
    ti, tj = torch.nonzero(planted > 0.5, as_tuple=True)
    ax.scatter(tj.numpy(), ti.numpy(), s=30, facecolors="none", edgecolors="#39d353",
               linewidths=1.0, label="planted alignment")
    rows, cols = path(hard)
    ax.plot(cols, rows, color="#4fc3f7", linewidth=1.4, label="optimal path (t = 0)")
    hi, hj = torch.nonzero(hard > 0.5, as_tuple=True)
    ax.plot(hj.numpy(), hi.numpy(), linestyle="none", color="#4fc3f7", marker=".", markersize=3)
    ax.set_xticks(range(len(seq_b)), list(seq_b), fontsize=4.5, family="monospace")
    ax.set_yticks(range(len(seq_a)), list(seq_a), fontsize=4.5, family="monospace")
    ax.tick_params(length=0, pad=1)
    ax.set_xlabel("sequence b")
    ax.set_ylabel("sequence a")
    ax.set_title(title, fontsize=10)
    return image


def plot_pair(path: str, models: list, titles: list[str], batch, k: int) -> None:
    """Writes a PNG with one panel per model for pair k of `batch` (train.Batch)."""
    m, n = int(batch.lengths_a[k]), int(batch.lengths_b[k])
    planted = batch.planted[k, :m, :n].float().cpu()
    seq_a, seq_b = batch.seqs[k]
    fig, axes = plt.subplots(1, len(models), figsize=(6.2 * len(models) + 1, 6.2 * m / n + 0.8),
                             squeeze=False, layout="constrained")
    for ax, model, title in zip(axes[0], models, titles):
        soft, hard = alignments(model, batch, k)
        found = float((hard * planted).sum() / planted.sum())
        image = draw(ax, soft, hard, planted, seq_a, seq_b,
                     f"{title}: {100 * found:.0f}% of planted pairs on the optimal path")
    axes[0][-1].legend(loc="lower left", fontsize=8, framealpha=0.9)
    bar = fig.colorbar(image, ax=axes[0].tolist(), shrink=0.9, pad=0.01)
    bar.set_label("soft alignment (t = 1): P(i aligned with j)")
    fig.suptitle(f"Held-out pair ({m} x {n} residues): soft Smith-Waterman alignment", fontsize=12)
    fig.savefig(path, dpi=150)
    plt.close(fig)
