"""softalign demo: human hemoglobin alpha vs human myoglobin, BLOSUM62, affine gaps (-11, -1).

Prints the soft (t = 1) and hard (t = 0) local scores, the optimal alignment rebuilt from the
0/1 alignment matrix, the strongest pairs of the soft alignment, and the op's speed against
the seed's PyTorch loop. Run with `make demo` (CPU, a few seconds).
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.append(str(Path(__file__).resolve().parents[1] / "python"))  # an installed softalign first
import softalign  # noqa: E402
from sequences import DATA_DIR, load_fasta, load_substitution_matrix, pairwise_scores
from timing import cpu_median, cuda_median, fmt_time, random_inputs, seed_loop, step

GAP_OPEN, GAP_EXTEND = -11.0, -1.0
EXPECTED_HARD_SCORE = 124.0  # Biopython's local affine (Gotoh) score for this pair and penalties
WIDTH = 60
TOP = 10


def short_name(header: str) -> str:
    """'sp|P69905|HBA_HUMAN Hemoglobin ...' -> 'HBA_HUMAN'."""
    return header.split()[0].split("|")[-1]


def aligned_pairs(alignment: torch.Tensor) -> list[tuple[int, int]]:
    """The matched (i, j) of a 0/1 alignment matrix, in order along the path."""
    return [tuple(p) for p in torch.nonzero(alignment > 0.5).tolist()]


def gapped_rows(a: str, b: str, pairs, scores: torch.Tensor):
    """Columns of the alignment between the first and last matched pair.

    Each column is (residue of a or '-', match symbol, residue of b or '-', i or None,
    j or None). Between two matches, a's skipped residues come first (the X state) and b's
    after them (Y may follow X, never the reverse, in the affine model of docs/spec.md).
    """
    columns = []
    for k, (i, j) in enumerate(pairs):
        if k:
            pi, pj = pairs[k - 1]
            columns += [(a[r], " ", "-", r, None) for r in range(pi + 1, i)]
            columns += [("-", " ", b[c], None, c) for c in range(pj + 1, j)]
        symbol = "|" if a[i] == b[j] else "+" if scores[i, j] > 0 else " "
        columns.append((a[i], symbol, b[j], i, j))
    return columns


def rescore(pairs, scores: torch.Tensor) -> float:
    """The affine score of the alignment read off the matrix: a check that it is the optimum."""
    total = sum(float(scores[i, j]) for i, j in pairs)
    for (pi, pj), (i, j) in zip(pairs, pairs[1:]):
        for gap in (i - pi - 1, j - pj - 1):
            if gap:
                total += GAP_OPEN + (gap - 1) * GAP_EXTEND
    return total


def print_alignment(columns, name_a: str, name_b: str) -> None:
    label = max(len(name_a), len(name_b))
    for start in range(0, len(columns), WIDTH):
        block = columns[start:start + WIDTH]
        for row, name, pos in ((0, name_a, 3), (1, "", None), (2, name_b, 4)):
            text = "".join(col[row] for col in block)
            if pos is None:
                print(f"{'':{label}} {'':>4} {text}")
                continue
            numbers = [col[pos] + 1 for col in block if col[pos] is not None]
            first, last = (numbers[0], numbers[-1]) if numbers else ("", "")
            print(f"{name:{label}} {first:>4} {text} {last}")
        if start + WIDTH < len(columns):
            print()


def print_soft_pairs(alignment: torch.Tensor, a: str, b: str, top: int) -> None:
    probs, flat = alignment.flatten().topk(top)
    n = alignment.shape[1]
    cells = [f"{a[k // n]}{k // n + 1:<4}- {b[k % n]}{k % n + 1:<4} {p:.4f}"
             for p, k in zip(probs.tolist(), flat.tolist())]
    half = (len(cells) + 1) // 2
    for left, right in zip(cells[:half], cells[half:] + [""]):
        print(f"  {left}      {right}")


def print_speed() -> None:
    """The op vs the seed's loop on the seed's size: linear gap -1, t = 1, float32 (16, 32, 32)."""
    shape = (16, 32, 32)
    op = lambda x: softalign.smith_waterman(x, -1.0, temperature=1.0)  # noqa: E731
    loop = lambda x: seed_loop(x, -1.0, 1.0)  # noqa: E731
    x = random_inputs(shape)[0]
    diff = (op(x) - loop(x)).abs().max().item()
    print(f"Speed, float32 {shape}, linear gap -1, t = 1, CPU, {torch.get_num_threads()} threads "
          f"(max |op - loop| {diff:.1e})")
    for backward, what in ((False, "forward"), (True, "forward+backward")):
        inputs = random_inputs(shape, count=4, requires_grad=backward)
        t_loop = cpu_median(step(loop, inputs, backward), reps=3)
        t_op = cpu_median(step(op, inputs, backward), reps=300, warmup=10)
        print(f"  {what:<17} seed loop {fmt_time(t_loop):>9}   softalign {fmt_time(t_op):>9}"
              f"   speed-up {t_loop / t_op:,.0f}x")
    if not torch.cuda.is_available():
        return
    for backward, what in ((False, "forward"), (True, "forward+backward")):
        inputs = random_inputs(shape, "cuda", count=8, requires_grad=backward)
        try:
            t_cuda = cuda_median(step(op, inputs, backward), reps=50)
        except (NotImplementedError, RuntimeError) as err:
            print(f"  CUDA: not available in this build ({str(err).splitlines()[0][:60]})")
            return
        print(f"  {what:<17} softalign on {torch.cuda.get_device_name()}: {fmt_time(t_cuda)}")


def main() -> None:
    (header_a, a), (header_b, b) = load_fasta(DATA_DIR / "globins.fasta")[:2]
    name_a, name_b = short_name(header_a), short_name(header_b)
    alphabet, blosum = load_substitution_matrix(DATA_DIR / "blosum62.txt")
    scores = pairwise_scores(a, b, alphabet, blosum)
    print(f"{name_a} ({len(a)} aa) vs {name_b} ({len(b)} aa), BLOSUM62, local, "
          f"gap open {GAP_OPEN:g}, extend {GAP_EXTEND:g}")

    soft, soft_alignment = softalign.smith_waterman_alignment(
        scores, GAP_OPEN, gap_extend=GAP_EXTEND, temperature=1.0)
    hard, hard_alignment = softalign.smith_waterman_alignment(
        scores, GAP_OPEN, gap_extend=GAP_EXTEND, temperature=0.0)
    verdict = "ok" if hard.item() == EXPECTED_HARD_SCORE else "MISMATCH"
    print(f"  soft score (t = 1): {soft.item():.3f}")
    print(f"  hard score (t = 0): {hard.item():.1f}   "
          f"(Biopython: {EXPECTED_HARD_SCORE:.1f}, {verdict})")

    pairs = aligned_pairs(hard_alignment)
    columns = gapped_rows(a, b, pairs, scores)
    identities = sum(col[1] == "|" for col in columns)
    positives = sum(col[1] in "|+" for col in columns)
    gaps = sum("-" in (col[0], col[2]) for col in columns)
    print(f"\nOptimal alignment (t = 0): {len(columns)} columns, identities {identities}, "
          f"positives {positives}, gaps {gaps}, re-scored {rescore(pairs, scores):.1f}")
    print_alignment(columns, name_a, name_b)

    print(f"\nSoft alignment (t = 1), d score / d scores: {soft_alignment.sum().item():.1f} "
          f"expected pairs, {int((soft_alignment > 0.99).sum())} with p > 0.99")
    print(f"  the top {TOP} ({name_a} residue - {name_b} residue, probability):")
    print_soft_pairs(soft_alignment, a, b, TOP)
    print()
    print_speed()


if __name__ == "__main__":
    main()
