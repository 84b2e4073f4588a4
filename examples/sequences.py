"""Load the demo's protein sequences and substitution matrix.

Depends only on torch and the standard library.
"""

from __future__ import annotations

from pathlib import Path

import torch

DATA_DIR = Path(__file__).resolve().parent / "data"


def load_fasta(path) -> list[tuple[str, str]]:
    """Read a FASTA file into a list of (name, sequence) pairs.

    The name is the header line without the leading '>'; sequence lines are
    joined with whitespace removed and upper-cased.
    """
    records: list[tuple[str, str]] = []
    name = None
    chunks: list[str] = []
    with open(path) as handle:
        for line in handle:
            line = line.strip()
            if not line or line.startswith(";"):
                continue
            if line.startswith(">"):
                if name is not None:
                    records.append((name, "".join(chunks)))
                name = line[1:].strip()
                chunks = []
            else:
                if name is None:
                    raise ValueError(f"{path}: sequence data before the first '>' header")
                chunks.append("".join(line.split()).upper())
    if name is not None:
        records.append((name, "".join(chunks)))
    return records


def load_substitution_matrix(path) -> tuple[str, torch.Tensor]:
    """Read a matrix in NCBI text layout (e.g. BLOSUM62).

    Lines starting with '#' are comments.  The first other line lists the
    column letters; each following line is a row letter then K scores.
    Returns (alphabet, scores) where scores is a (K, K) float32 tensor whose
    rows and columns follow the order of `alphabet`.
    """
    with open(path) as handle:
        lines = [l.split() for l in handle if l.strip() and not l.lstrip().startswith("#")]
    columns = lines[0]
    alphabet = "".join(columns)
    if len(alphabet) != len(columns) or len(set(alphabet)) != len(alphabet):
        raise ValueError(f"{path}: header must list distinct single letters")
    k = len(columns)
    rows = {}
    for fields in lines[1:]:
        letter, values = fields[0], fields[1:]
        if len(values) != k:
            raise ValueError(f"{path}: row {letter!r} has {len(values)} values, expected {k}")
        rows[letter] = [float(v) for v in values]
    if set(rows) != set(columns):
        raise ValueError(f"{path}: row letters do not match the header")
    matrix = torch.tensor([rows[c] for c in columns], dtype=torch.float32)
    return alphabet, matrix


def pairwise_scores(seq_a: str, seq_b: str, alphabet: str, matrix: torch.Tensor) -> torch.Tensor:
    """Return a (len_a, len_b) float32 tensor with scores[i, j] = matrix[a[i], b[j]].

    Letters not in `alphabet` map to 'X' if the alphabet has it, else raise.
    """
    index = {c: i for i, c in enumerate(alphabet)}
    fallback = index.get("X")

    def encode(seq: str) -> torch.Tensor:
        ids = []
        for c in seq.upper():
            i = index.get(c, fallback)
            if i is None:
                raise KeyError(f"residue {c!r} not in alphabet {alphabet!r}")
            ids.append(i)
        return torch.tensor(ids, dtype=torch.long, device=matrix.device)

    ia, ib = encode(seq_a), encode(seq_b)
    return matrix[ia[:, None], ib[None, :]].to(torch.float32)


if __name__ == "__main__":
    seqs = load_fasta(DATA_DIR / "globins.fasta")
    alphabet, matrix = load_substitution_matrix(DATA_DIR / "blosum62.txt")
    print(f"substitution matrix: alphabet={alphabet} shape={tuple(matrix.shape)}")
    for name, seq in seqs:
        print(f"{name}: length {len(seq)}")
    (name_a, a), (name_b, b) = seqs[0], seqs[1]
    scores = pairwise_scores(a, b, alphabet, matrix)
    print(f"pairwise scores: shape={tuple(scores.shape)} dtype={scores.dtype}")
