"""Training example: learn a substitution matrix and affine gap penalties with soft Smith-Waterman.

    python3 examples/train.py                    # CPU, seconds (make train)
    python3 examples/train.py --plot align.png   # and the soft alignment of a held-out pair
    SOFTALIGN_LIBRARY=build-cuda/libsoftalign.so python3 examples/train.py --device cuda

The data is generated here, seeded: protein-like families. Each family has a random ancestor over
the 20 amino acids; its descendants mutate residues (mostly within planted groups of similar
residues: ILMV, FWY, DENQ, KRH, STAG, CP), insert and delete stretches, and gain unrelated
flanks. Every pair of descendants of one family comes with its planted (true) alignment: the
residue pairs that descend from the same ancestral residue. Held-out pairs come from families
that training never sees.

The model: a symmetric 20x20 substitution matrix W plus affine gap penalties (gap_open,
gap_extend), all learned tensors; scores[b, i, j] = W[a_b[i], b_b[j]]. The loss is the negative
log-likelihood of the planted alignment under soft Smith-Waterman's Gibbs distribution
(temperature 1, local, soft reduction; a conditional random field over local alignments):

    NLL = log Z - score(planted path),   log Z = softalign.smith_waterman(..., temperature=1)

score(planted path) is linear in W and the penalties (the sum of W over planted pairs plus
gap_open per gap and gap_extend per further gap residue), so one backward through the op gives
the gradient: the expected alignment (the soft alignment) minus the planted one. Recovery is the
fraction of planted pairs that the hard optimal alignment (temperature 0) contains.
"""
from __future__ import annotations

import argparse
import copy
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch

sys.path.append(str(Path(__file__).resolve().parents[1] / "python"))  # an installed softalign first
import softalign  # noqa: E402

ALPHABET = "ACDEFGHIKLMNPQRSTVWY"
GROUPS = ["ILMV", "FWY", "DENQ", "KRH", "STAG", "CP"]  # the planted substitution groups
INDEX = {c: k for k, c in enumerate(ALPHABET)}
GROUP_OF = {c: g for g in GROUPS for c in g}


@dataclass
class Config:
    """The synthetic data and the training run; the defaults are the README's numbers."""
    seed: int = 0
    train_families: int = 30
    test_families: int = 15
    descendants: int = 3          # per family: every pair of them is a training / held-out pair
    ancestor_length: int = 50
    flank: int = 10               # unrelated residues before and after, 0..flank each
    sub_rate: float = 0.55        # per residue: probability that it mutates
    in_group: float = 0.9         # probability that a mutation stays within the residue's group
    indel_rate: float = 0.04      # per residue: probability of a deletion; of an insertion after it
    indel_mean: float = 2.0       # mean indel length (geometric)
    steps: int = 50
    lr: float = 0.1
    temperature: float = 1.0      # of the training loss; evaluation uses 0 (the hard alignment)


# ----------------------------------------------------------------------------- data

@dataclass
class Descendant:
    seq: str
    origin: list[int]             # per residue: its ancestral position, or -1 (insertion, flank)


def mutate(c: str, cfg: Config, rng: random.Random) -> str:
    if rng.random() >= cfg.sub_rate:
        return c
    group = GROUP_OF[c]
    if rng.random() < cfg.in_group and len(group) > 1:
        return rng.choice([d for d in group if d != c])
    return rng.choice([d for d in ALPHABET if d != c])


def indel_length(cfg: Config, rng: random.Random) -> int:
    length = 1
    while rng.random() < 1 - 1 / cfg.indel_mean:
        length += 1
    return length


def random_residues(n: int, rng: random.Random) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(n))


def descend(ancestor: str, cfg: Config, rng: random.Random) -> Descendant:
    """Substitutions, insertions, deletions, and unrelated flanks on both ends."""
    seq, origin = [], []
    k = 0
    while k < len(ancestor):
        if rng.random() < cfg.indel_rate:            # delete a stretch of the ancestor
            k += indel_length(cfg, rng)
            continue
        seq.append(mutate(ancestor[k], cfg, rng))
        origin.append(k)
        if rng.random() < cfg.indel_rate:            # insert unrelated residues after it
            extra = indel_length(cfg, rng)
            seq += random_residues(extra, rng)
            origin += [-1] * extra
        k += 1
    left, right = rng.randint(0, cfg.flank), rng.randint(0, cfg.flank)
    return Descendant(random_residues(left, rng) + "".join(seq) + random_residues(right, rng),
                      [-1] * left + origin + [-1] * right)


def planted_pairs(x: Descendant, y: Descendant) -> list[tuple[int, int]]:
    """(i, j) where x[i] and y[j] descend from the same ancestral residue."""
    where = {k: j for j, k in enumerate(y.origin) if k >= 0}
    return [(i, where[k]) for i, k in enumerate(x.origin) if k in where]


def families(count: int, cfg: Config, rng: random.Random) -> list[tuple[str, str, list]]:
    """All pairs of descendants of `count` fresh families: (a, b, planted pairs)."""
    pairs = []
    for _ in range(count):
        ancestor = random_residues(cfg.ancestor_length, rng)
        kids = [descend(ancestor, cfg, rng) for _ in range(cfg.descendants)]
        for u in range(len(kids)):
            for v in range(u + 1, len(kids)):
                pairs.append((kids[u].seq, kids[v].seq, planted_pairs(kids[u], kids[v])))
    return pairs


@dataclass
class Batch:
    """Padded pairs: tokens (B, M), (B, N), lengths (B,), planted 0/1 matrix (B, M, N), the gap
    counts of each planted path (opens, extends), and the sequences themselves."""
    tokens_a: torch.Tensor
    tokens_b: torch.Tensor
    lengths_a: torch.Tensor
    lengths_b: torch.Tensor
    planted: torch.Tensor
    opens: torch.Tensor
    extends: torch.Tensor
    seqs: list[tuple[str, str]]

    def to(self, device) -> "Batch":
        move = lambda t: t.to(device)  # noqa: E731
        return Batch(move(self.tokens_a), move(self.tokens_b), move(self.lengths_a),
                     move(self.lengths_b), move(self.planted), move(self.opens),
                     move(self.extends), self.seqs)


def path_gaps(pairs: list[tuple[int, int]]) -> tuple[int, int]:
    """Gap opens and extends of the local path through `pairs` (docs/spec.md's affine model: between two
    matches, the gap in a (X), then the gap in b (Y), each gap_open + (length - 1) * gap_extend)."""
    opens = extends = 0
    for (pi, pj), (i, j) in zip(pairs, pairs[1:]):
        for gap in (i - pi - 1, j - pj - 1):
            if gap:
                opens += 1
                extends += gap - 1
    return opens, extends


def make_batch(pairs) -> Batch:
    B = len(pairs)
    M = max(len(a) for a, _, _ in pairs)
    N = max(len(b) for _, b, _ in pairs)
    tokens_a = torch.zeros(B, M, dtype=torch.long)
    tokens_b = torch.zeros(B, N, dtype=torch.long)
    planted = torch.zeros(B, M, N)
    gaps = []
    for k, (a, b, true) in enumerate(pairs):
        tokens_a[k, :len(a)] = torch.tensor([INDEX[c] for c in a])
        tokens_b[k, :len(b)] = torch.tensor([INDEX[c] for c in b])
        for i, j in true:
            planted[k, i, j] = 1.0
        gaps.append(path_gaps(true))
    gaps = torch.tensor(gaps, dtype=torch.float32).view(B, 2)
    return Batch(tokens_a, tokens_b, torch.tensor([len(a) for a, _, _ in pairs]),
                 torch.tensor([len(b) for _, b, _ in pairs]), planted, gaps[:, 0], gaps[:, 1],
                 [(a, b) for a, b, _ in pairs])


def make_data(cfg: Config) -> tuple[Batch, Batch]:
    """Training pairs and held-out pairs (from families training never sees)."""
    rng = random.Random(cfg.seed)
    train = families(cfg.train_families, cfg, rng)
    test = families(cfg.test_families, cfg, rng)
    return make_batch(train), make_batch(test)


def planted_log_odds(cfg: Config) -> torch.Tensor:
    """The generating model's log-odds log P(x, y | same ancestral residue) / (p(x) p(y)),
    substitutions only: what the learned matrix should approach (up to scale and shift)."""
    K = len(ALPHABET)
    step = torch.zeros(K, K, dtype=torch.float64)    # step[a, x] = P(descendant x | ancestor a)
    for a, c in enumerate(ALPHABET):
        group = GROUP_OF[c]
        step[a, a] = 1 - cfg.sub_rate
        for x, d in enumerate(ALPHABET):
            if d == c:
                continue
            p_group = cfg.in_group / (len(group) - 1) if d in group and len(group) > 1 else 0.0
            p_other = (1 - cfg.in_group if len(group) > 1 else 1.0) / (K - 1)
            step[a, x] += cfg.sub_rate * (p_group + p_other)
    joint = step.T @ step / K                        # uniform ancestor composition
    return torch.log(joint * K * K)


# ----------------------------------------------------------------------------- model

class SubstitutionModel(torch.nn.Module):
    """A symmetric substitution matrix and affine gap penalties, all learned."""

    def __init__(self, seed: int = 0):
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        K = len(ALPHABET)
        self.raw = torch.nn.Parameter(0.1 * torch.randn(K, K, generator=gen))
        self.gap_open = torch.nn.Parameter(torch.tensor(-1.0))
        self.gap_extend = torch.nn.Parameter(torch.tensor(-1.0))

    def matrix(self) -> torch.Tensor:
        return (self.raw + self.raw.T) / 2

    def scores(self, batch: Batch) -> torch.Tensor:
        """scores[b, i, j] = W[a_b[i], b_b[j]], (B, M, N) (padding is cut off by the lengths).

        As one-hot matrix products rather than W[tokens_a, tokens_b]: the backward of that
        indexing accumulates in a thread-dependent order on the CPU, and its last-bit noise
        would make runs differ."""
        W = self.matrix()
        one_hot_a = torch.nn.functional.one_hot(batch.tokens_a, len(ALPHABET)).to(W.dtype)
        one_hot_b = torch.nn.functional.one_hot(batch.tokens_b, len(ALPHABET)).to(W.dtype)
        return torch.bmm(one_hot_a, (one_hot_b @ W).transpose(1, 2))


def nll(model: SubstitutionModel, batch: Batch, temperature: float = 1.0) -> torch.Tensor:
    """Per pair: log Z (soft Smith-Waterman) - score of the planted path, in units of t."""
    scores = model.scores(batch)
    log_z = softalign.smith_waterman(
        scores, model.gap_open, gap_extend=model.gap_extend, temperature=temperature,
        lengths_a=batch.lengths_a, lengths_b=batch.lengths_b, mode="local", reduction="soft")
    planted = ((scores * batch.planted).sum((1, 2)) + batch.opens * model.gap_open
               + batch.extends * model.gap_extend)
    return (log_z - planted) / temperature


@torch.no_grad()
def hard_alignment(model: SubstitutionModel, batch: Batch) -> torch.Tensor:
    """The optimal local alignment (temperature 0) of every pair, as a 0/1 (B, M, N) matrix."""
    _, alignment = softalign.smith_waterman_alignment(
        model.scores(batch), model.gap_open.detach(), gap_extend=model.gap_extend.detach(), temperature=0.0,
        lengths_a=batch.lengths_a, lengths_b=batch.lengths_b, mode="local")
    return alignment


@torch.no_grad()
def pair_recovery(model: SubstitutionModel, batch: Batch) -> torch.Tensor:
    """(B,): the recovery of each pair."""
    found = hard_alignment(model, batch)
    return (found * batch.planted).sum((1, 2)) / batch.planted.sum((1, 2)).clamp(min=1)


@torch.no_grad()
def recovery(model: SubstitutionModel, batch: Batch) -> tuple[float, float]:
    """(recovery, precision): planted pairs the optimal alignment contains / all planted pairs,
    and / all aligned pairs."""
    found = hard_alignment(model, batch)
    hits = (found * batch.planted).sum().item()
    return hits / batch.planted.sum().item(), hits / max(found.sum().item(), 1.0)


def train(model: SubstitutionModel, batch: Batch, steps: int, lr: float,
          temperature: float = 1.0, log_every: int = 0, log=print) -> list[float]:
    """Full-batch Adam on the mean NLL; returns the loss of every step (before its update)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for step in range(steps):
        optimizer.zero_grad()
        loss = nll(model, batch, temperature).mean()
        losses.append(loss.item())
        if log_every and (step % log_every == 0 or step == steps - 1):
            log(f"  step {step:4d}  NLL {loss.item():8.3f} nats/pair   gap open "
                f"{model.gap_open.item():6.2f}  extend {model.gap_extend.item():6.2f}")
        loss.backward()
        optimizer.step()
    return losses


def group_contrast(W: torch.Tensor) -> tuple[float, float, float]:
    """Mean of W over identities, over other same-group pairs, over different-group pairs."""
    same = torch.tensor([[GROUP_OF[x] == GROUP_OF[y] for y in ALPHABET] for x in ALPHABET])
    eye = torch.eye(len(ALPHABET), dtype=torch.bool)
    W = W.detach().cpu()
    return W[eye].mean().item(), W[same & ~eye].mean().item(), W[~same].mean().item()


def correlation(x: torch.Tensor, y: torch.Tensor) -> float:
    x, y = x.detach().cpu().double().flatten(), y.detach().cpu().double().flatten()
    return torch.corrcoef(torch.stack([x, y]))[0, 1].item()


# ----------------------------------------------------------------------------- main

def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--steps", type=int, default=Config.steps)
    parser.add_argument("--lr", type=float, default=Config.lr)
    parser.add_argument("--seed", type=int, default=Config.seed)
    parser.add_argument("--train-families", type=int, default=Config.train_families)
    parser.add_argument("--test-families", type=int, default=Config.test_families)
    parser.add_argument("--plot", metavar="PNG", help="write the soft alignment heatmap of a "
                        "held-out pair, before and after training, with the optimal and planted "
                        "alignments over it")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    torch.manual_seed(args.seed)
    cfg = Config(seed=args.seed, steps=args.steps, lr=args.lr, train_families=args.train_families,
                 test_families=args.test_families)
    train_set, test_set = make_data(cfg)
    train_set, test_set = train_set.to(args.device), test_set.to(args.device)
    model = SubstitutionModel(args.seed).to(args.device)
    initial = copy.deepcopy(model)

    lengths = [len(s) for pair in train_set.seqs + test_set.seqs for s in pair]
    print(f"Synthetic families: {cfg.train_families} for training ({len(train_set.seqs)} pairs, "
          f"{int(train_set.planted.sum())} planted aligned pairs), {cfg.test_families} held out "
          f"({len(test_set.seqs)} pairs, {int(test_set.planted.sum())}); lengths "
          f"{min(lengths)}-{max(lengths)}; device {args.device}")
    rec0, prec0 = recovery(model, test_set)
    with torch.no_grad():
        test0 = nll(model, test_set).mean().item()
    print(f"Training a 20x20 substitution matrix + affine gaps: Adam lr {cfg.lr}, {cfg.steps} "
          f"full-batch steps, loss = NLL of the planted alignment "
          f"(soft SW, t = {cfg.temperature:g})")
    losses = train(model, train_set, cfg.steps, cfg.lr, cfg.temperature,
                   log_every=max(cfg.steps // 10, 1))
    rec1, prec1 = recovery(model, test_set)
    with torch.no_grad():
        test1 = nll(model, test_set).mean().item()

    truth = planted_log_odds(cfg)
    oracle = SubstitutionModel().to(args.device)
    identity = SubstitutionModel().to(args.device)
    with torch.no_grad():
        oracle.raw.copy_(truth.float())
        oracle.gap_open.copy_(model.gap_open)
        oracle.gap_extend.copy_(model.gap_extend)
        identity.raw.copy_(4 * torch.eye(len(ALPHABET)) - 1)
        identity.gap_open.fill_(-4.0)
        identity.gap_extend.fill_(-1.0)
    rec_oracle, prec_oracle = recovery(oracle, test_set)
    rec_identity, prec_identity = recovery(identity, test_set)
    same, group, other = group_contrast(model.matrix())
    elapsed = time.perf_counter() - start

    print(f"Training NLL: {losses[0]:.2f} -> {losses[-1]:.2f} nats/pair; held-out NLL: "
          f"{test0:.2f} -> {test1:.2f}")
    r = correlation(model.matrix(), truth)
    print(f"Learned matrix: identities {same:+.2f}, same group {group:+.2f}, other {other:+.2f}"
          f" (means); correlation with the planted log-odds {r:.3f}")
    print("Held-out alignment recovery (planted pairs on the optimal alignment, t = 0):")
    print(f"  before training         {100 * rec0:5.1f}%  (precision {100 * prec0:5.1f}%)")
    print(f"  after training          {100 * rec1:5.1f}%  (precision {100 * prec1:5.1f}%)")
    print(f"  for comparison: identity scoring (+3/-1, gaps -4/-1) {100 * rec_identity:.1f}%, "
          f"the planted log-odds with the learned gaps {100 * rec_oracle:.1f}%")
    print(f"Time: {elapsed:.1f} s")
    if args.plot:
        from plot_alignment import plot_pair
        per_pair = pair_recovery(model, test_set).cpu()
        k = int(per_pair.argsort()[len(per_pair) // 2])   # a typical pair: the median recovery
        plot_pair(args.plot, [initial, model], ["before training", "after training"], test_set, k)
        print(f"Wrote {args.plot}: held-out pair {k}, soft alignment (t = 1) with the optimal "
              "(t = 0) and planted alignments")


if __name__ == "__main__":
    main()
