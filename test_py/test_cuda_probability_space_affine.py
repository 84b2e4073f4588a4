"""The CUDA backend's affine scaled forward (ops/cuda/prob_space/affine_forward.cuh): the affine forward
without grad at t > 0 of items one stripe tall (M <= 32), evaluated in probability space, the
three states of a row sharing one exponent; the items it refuses (its eight rules) are swept
again in log space by the same warp. Against the CPU backend in float64: ordinary items at
t = 1, 0.5, 0.25 (which it must take, not refuse: their bits differ from the log-space forward's),
adversarial generators (adversarial_affine.py: rows of very negative scores, vertical-gap
chains, long gap runs, gaps that pay, extreme temperatures, scores near exp2's range, inf and NaN
scores and penalties), lengths, empty shapes, and results that
do not depend on the items beside them in the batch.

Both of the host's shapes for M <= 32 (launch/striped.cuh's with_shape): B > 1024 takes a half
warp an item, two rows a lane; B <= 1024 a warp an item, a row a lane."""
import os

import numpy as np
import pytest
import torch

import adversarial_affine
from problems import Problem, make_problem, problem_with_refusals
from test_cuda_probability_space import (END_IDS, ENDS, assert_matches_cpu, forward,
                                         scaled_and_log_space)

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

# `batch(B)` is a test's B in the half-warp shape, or 700 items in the warp shape.
SHAPES = {"half_warps": None, "warps": 700}


@pytest.fixture(params=list(SHAPES))
def batch(request):
    few = SHAPES[request.param]
    return lambda many: many if few is None else few


def affine(end, t, B, M=32, N=29, seed=0, lengths=True):
    return make_problem("affine", *end, t, B=B, M=M, N=N, penalties="item", lengths=lengths,
                        seed=seed)


@pytest.mark.parametrize("t", [1.0, 0.5, 0.25])
@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_scaled_affine_forward_matches_cpu(end, t, batch):
    assert_matches_cpu(affine(end, t, batch(1500), seed=int(10 * t)))


@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_scaled_affine_forward_whole_chunks_inside(end, batch):
    """No lengths: every chunk of a warp's items lies inside them (the sweep without the borders'
    checks, where the vertical-gap test keeps a minimum a row)."""
    assert_matches_cpu(affine(end, 1.0, batch(2000), N=40, seed=4, lengths=False))


@pytest.mark.skipif("SOFTALIGN_CUDA_LOG_SPACE" in os.environ, reason="log space for every call")
@pytest.mark.parametrize("t", [1.0, 0.5, 0.25])
@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_scaled_affine_forward_takes_ordinary_items(tmp_path, end, t, batch):
    """Ordinary items (N(0, 1) scores, gaps near -1 and -0.4) are taken, not refused: a refused
    item is the log-space forward's bit for bit (SOFTALIGN_CUDA_LOG_SPACE=1, a fresh process), and
    more than 45% of the items differ from it in some bits, while all agree with it to float32
    rounding. H100: 53-62% of the local items differed, over 75% of the global ones (a local end
    of one cell often rounds alike)."""
    shape = dict(B=batch(1500), M=32, N=29)
    scaled, log_space = scaled_and_log_space(tmp_path, shape, t, end=end, model="affine")
    p = make_problem("affine", *end, t, penalties="item", lengths=True, seed=1, **shape)
    cells = (p.lengths_a > 0) & (p.lengths_b > 0)  # the others are boundaries only: 0 or -inf
    assert int((scaled != log_space)[cells].sum()) > 0.45 * int(cells.sum())


@pytest.mark.skipif("SOFTALIGN_CUDA_LOG_SPACE" in os.environ, reason="log space for every call")
@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_scaled_affine_forward_agrees_with_streamed(tmp_path, end):
    """70000 items of 32 x 32: with SOFTALIGN_CUDA_LOG_SPACE=1 (a fresh process) the streamed
    log-space forward takes them (test_cuda_schedules.py's STREAMED), which the scaled forward
    has replaced at t > 0; the two agree to float32 rounding."""
    scaled_and_log_space(tmp_path, dict(B=70000, M=32, N=32), 1.0, end=end, model="affine")


@pytest.mark.parametrize("t", [0.25, 1.0])
@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_scaled_affine_forward_long_rows(end, t, batch):
    """1000 columns (125 chunks): global rows' k falling over the whole row, lane 0's DP row 0
    (loses, diag) and local renormalisations far from column 0."""
    p = affine(end, t, batch(1100), M=9, N=1000, seed=3)
    p.scores += 0.3  # longer alignments: local values that rise far
    assert_matches_cpu(p)


def generated(gen, seed, copies):
    """A problem of the adversarial generator `gen` (32 items, M <= 32, N <= 120, random lengths,
    mode, reduction and t), its items repeated `copies` times."""
    rng = np.random.default_rng(seed)
    S, o, e, t, mode, reduction, m, n = adversarial_affine.problem(rng, gen, 32)
    rep = lambda a: torch.tensor(np.concatenate([np.asarray(a)] * copies))  # noqa: E731
    return Problem(rep(S), rep(o), rep(e), t, rep(m), rep(n), mode, reduction)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("gen", adversarial_affine.GENERATORS)
def test_scaled_affine_forward_adversarial(gen, seed, batch):
    """The adversarial generators (adversarial_affine.py says what each aims at): whatever the
    kernel takes or refuses, the CPU's scores."""
    copies = 40 if batch(32) == 32 else 1  # half warps: B > 1024
    assert_matches_cpu(generated(gen, 100 * seed + len(gen), copies))


@pytest.mark.parametrize("open_, row_score", [(-1.0, -10.0), (-0.5, -10.0), (-0.5, -5.0)])
@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_scaled_affine_forward_very_negative_rows(end, open_, row_score, batch):
    """t = 0.1, every other row of scores row_score: with o = -1 the gap rule refuses every item
    (o log2(e) / t = 14.4 > 12); with o = -0.5 and S = -10 the score rule (exp2(-144) flushes,
    and those cells may be a row's only way in); with S = -5 the items are taken."""
    p = affine(end, 0.1, batch(1500), seed=3)
    p.gap_open = torch.full_like(p.gap_open, open_)
    p.scores[:, 1::2, :] = row_score
    assert_matches_cpu(p)


@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_scaled_affine_forward_paying_gaps(end, batch):
    """Gaps that pay (o near +1.6, e near +0.6 at t = 0.5: O, F > 1, values grow along every row
    and past a short item's last column), beside items of 29 columns in the same warps."""
    p = affine(end, 0.5, batch(1500), seed=11)
    p.gap_open = p.gap_open + 2.5
    p.gap_extend = p.gap_extend + 1.0
    assert_matches_cpu(p)


@pytest.mark.parametrize("t", [0.01, 0.02, 10.0, 100.0, 1e4])
@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_scaled_affine_forward_extreme_temperatures(end, t, batch):
    """Below t = 0.1 the gap rule refuses ordinary gaps; far above it every E is near 1."""
    assert_matches_cpu(affine(end, t, batch(1500), seed=7))


@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_scaled_affine_forward_rows_past_2_127(end, batch):
    """t = 100, a diagonal of scores 2000 (29 powers of two a cell) on N(0, 30): a row's D can
    reach [2^127, 2^128) by a chunk's start, which the renormalisation leaves in its k; the
    factor to the row below was then clamped (2^-126 for 2^-128) and the rows below took the
    diagonal 4 times too large. Rule loses refuses such items."""
    gen = torch.Generator().manual_seed(0)
    B, M, N = 64, 10, 89
    scores = torch.randn(B, M, N, generator=gen, dtype=torch.float64) * 30
    for b in range(B):
        cells = 3 + b % 5
        i0, j0 = b % (M - cells + 1), 40 + b % 40
        scores[b, i0 + torch.arange(cells), j0 + torch.arange(cells)] = 2000.0
    copies = -(-batch(1500) // B)
    rep = lambda x: torch.cat([x] * copies)  # noqa: E731
    p = Problem(rep(scores), rep(torch.full((B,), -1.0, dtype=torch.float64)),
                rep(torch.full((B,), -0.5, dtype=torch.float64)), 100.0, mode=end[0],
                reduction=end[1])
    assert_matches_cpu(p)


@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_scaled_affine_forward_row_far_below_the_next(end, batch):
    """t = 1, three rows of s log2(e) = -70 but (3, 2 + q) 62, (2, 9 + q) 0, (3, 10 + q) 70: row
    3's k reaches 60 while row 2's is -70, and the factor between them, 2^-130, was clamped to
    2^-126; the diagonal into (3, 10 + q) came 8.5 times too large (local max 50.72 for 49.21).
    Rule loses refuses a local row more than 126 below the next."""
    c = 1.4426950408889634
    scores = torch.full((16, 3, 32), -70 / c, dtype=torch.float64)
    for q in range(16):
        scores[q, 2, 1 + q], scores[q, 1, 8 + q], scores[q, 2, 9 + q] = 62 / c, 0.0, 70 / c
    copies = -(-batch(1500) // 16)
    rep = lambda x: torch.cat([x] * copies)  # noqa: E731
    p = Problem(rep(scores), rep(torch.full((16,), -1.0, dtype=torch.float64)),
                rep(torch.full((16,), -0.1, dtype=torch.float64)), 1.0, mode=end[0],
                reduction=end[1])
    assert_matches_cpu(p)


@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_scaled_affine_forward_scores_near_exp2_range(end, batch):
    """s log2(e) / t near -126 (the score rule's floor) and near +127 (E near overflow)."""
    p = affine(end, 1.0, batch(1500), seed=8)
    gen = torch.Generator().manual_seed(8)
    log2e = 1.4426950408889634
    low = (-127.0 + 3.0 * torch.rand(p.scores.shape, generator=gen, dtype=torch.float64)) / log2e
    high = (120.0 + 8.0 * torch.rand(p.scores.shape, generator=gen, dtype=torch.float64)) / log2e
    pick = torch.rand(p.scores.shape, generator=gen)
    p.scores = torch.where(pick < 0.3, low, torch.where(pick < 0.31, high, p.scores))
    assert_matches_cpu(p)


@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_scaled_affine_forward_refused_items(end, batch):
    """Items the rules refuse (overflowing E, NaN and +inf scores, a column of -inf, scores whose
    exp2 flushes, gaps past the bound, an overflowing F) among items it takes."""
    got = assert_matches_cpu(problem_with_refusals(*end, B=batch(1500), model="affine"))
    assert torch.isnan(got[12])


def assert_same_bits(a, b):
    torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_scaled_affine_forward_does_not_depend_on_neighbours(end, batch):
    """Each even item's score to the bit, whether its neighbours (the odd items, in the same
    warps with a half warp an item) are refused (NaN scores) or taken (ordinary items), and, a
    warp an item, the same as the item alone in its call. The even items include refused ones
    (10, 12, 16, 18) and taken ones."""
    B = batch(1500)
    p = problem_with_refusals(*end, B=B, model="affine")
    neighbours = {}
    for name, source in (("refused", 12), ("taken", 0)):
        q = Problem(p.scores.clone(), p.gap_open.clone(), p.gap_extend.clone(), p.temperature,
                    p.lengths_a.clone(), p.lengths_b.clone(), p.mode, p.reduction)
        q.scores[1::2] = p.scores[source]
        q.gap_open[1::2] = p.gap_open[source]
        q.gap_extend[1::2] = p.gap_extend[source]
        q.lengths_a[1::2] = p.lengths_a[source]
        q.lengths_b[1::2] = p.lengths_b[source]
        neighbours[name] = forward(q, "cuda", torch.float32).cpu()
    mixed = forward(p, "cuda", torch.float32).cpu()
    assert_same_bits(neighbours["refused"][0::2], mixed[0::2])
    assert_same_bits(neighbours["taken"][0::2], mixed[0::2])
    if B <= 1024:  # the same shape for one item: a warp an item
        for b in [0, 2, 4] + list(range(10, 20)):
            alone = Problem(p.scores[b:b + 1], p.gap_open[b:b + 1], p.gap_extend[b:b + 1],
                            p.temperature, p.lengths_a[b:b + 1], p.lengths_b[b:b + 1], p.mode,
                            p.reduction)
            assert_same_bits(forward(alone, "cuda", torch.float32).cpu(), mixed[b:b + 1])


def test_scaled_affine_forward_repeats_bit_for_bit(batch):
    p = affine(("local", "soft"), 0.5, batch(3000), M=32, N=32, seed=9)
    runs = [forward(p, "cuda", torch.float32) for _ in range(3)]
    for again in runs[1:]:
        assert torch.equal(again, runs[0])


@pytest.mark.parametrize("B, M, N", [(0, 32, 29), (1500, 0, 29), (1500, 32, 0), (700, 0, 0),
                                     (700, 32, 0)])
@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_scaled_affine_forward_empty(end, B, M, N):
    """No items, or items of only boundaries (the general sweep's, by one lane of the group)."""
    got = assert_matches_cpu(affine(end, 1.0, B, M=M, N=N, seed=2, lengths=False))
    assert got.shape == (B,)


@pytest.mark.parametrize("M, N", [(1, 1), (1, 40), (32, 1), (17, 9), (32, 120)])
@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_scaled_affine_forward_lengths(end, M, N, batch):
    """Items of every length up to (M, N) in one call (lengths_a, lengths_b random), among which
    those of one row or one column."""
    assert_matches_cpu(affine(end, 0.5, batch(1500), M=M, N=N, seed=M + N))
