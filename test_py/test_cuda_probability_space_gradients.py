"""The CUDA backend's fused forward + adjoint in probability space (ops/cuda/prob_space/linear_adjoint.cuh,
and for the affine model prob_space/affine_adjoint.cuh): the short pairs' gradients at t > 0 (M <=
32, N <= 32; B > 1024, and affine also B <= 1024, a warp an item), both gap models. Scores and every
gradient against the CPU backend in float64: temperatures from 0.05 (every item refused: the
log-space kernels take every item) to 100, lengths, whole chunks inside the items, and items
built to be refused among items it takes (they go to log space; the others keep the fused
results, whatever their neighbours)."""
import math
import os

import pytest
import torch

import softalign
from problems import assert_grads_match_cpu, evaluate, make_problem, problem_with_refusals
from test_cuda_probability_space import scaled_and_log_space

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

ENDS = [("local", "max"), ("local", "soft"), ("global", "max")]
END_IDS = ["-".join(e) for e in ENDS]
MODELS = ["linear", "affine"]


@pytest.mark.parametrize("t", [0.05, 0.25, 1.0, 4.0, 100.0])
@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
@pytest.mark.parametrize("model", MODELS)
def test_scaled_backward_matches_cpu(end, t, model):
    p = make_problem(model, *end, t, B=1500, M=32, N=29, penalties="item", lengths=True,
                     seed=int(10 * t) + 1)
    assert_grads_match_cpu(p)


@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
@pytest.mark.parametrize("model", MODELS)
def test_scaled_backward_whole_chunks_inside(end, model):
    """No lengths, 32 x 32: the interior chunks, and every cell of d S written by the kernel."""
    p = make_problem(model, *end, 1.0, B=2000, M=32, N=32, penalties="item", seed=4)
    p.scores += 0.5  # long local alignments
    assert_grads_match_cpu(p)


@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
@pytest.mark.parametrize("model", MODELS)
def test_scaled_backward_number_penalty(end, model):
    """A number penalty (no gradient asked for it) and short items, few rows a lane."""
    p = make_problem(model, *end, 0.5, B=1100, M=7, N=5, penalties="number", lengths=True,
                     seed=6)
    assert_grads_match_cpu(p)


@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
@pytest.mark.parametrize("model", MODELS)
def test_scaled_backward_refused_items(end, model):
    p = problem_with_refusals(*end, model=model)
    p.lengths_a[30], p.lengths_b[40] = 0, 0  # only boundaries: refused too
    # rtol 1e-3: item 16 (gap +200, refused: the log-space kernels) scores near 9000, where the
    # log-space weights in float32 are off by about 5e-4 (H200: d gap 6e-4 off, relatively).
    got, _ = assert_grads_match_cpu(p, rtol=1e-3)
    assert torch.isnan(got[12])


@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
@pytest.mark.parametrize("model", MODELS)
def test_scaled_backward_items_do_not_depend_on_neighbours(end, model):
    """docs/spec.md: results do not depend on which other items share the batch. Items 14 and 17 share
    their warps (units of 4 items) with refused ones; with those made plain, so that the kernel
    takes them, every other item's score and gradients stay the same, bit for bit."""
    p = problem_with_refusals(*end, model=model)
    refused = [10, 11, 12, 13, 15, 16, 18] + ([14, 17, 19] if model == "affine" else [])
    plain = problem_with_refusals(*end, model=model)
    plain.scores[refused] = torch.randn(len(refused), *p.scores.shape[1:],
                                        generator=torch.Generator().manual_seed(3),
                                        dtype=torch.float64)
    plain.gap_open[refused] = -1.0
    if model == "affine":
        plain.gap_extend[refused] = -0.4
    kept = torch.ones(p.scores.shape[0], dtype=torch.bool)
    kept[refused] = False
    got, got_grads = evaluate(softalign.smith_waterman, p.on("cuda", torch.float32))
    want, want_grads = evaluate(softalign.smith_waterman, plain.on("cuda", torch.float32))
    assert torch.equal(got[kept], want[kept])
    for name in want_grads:
        assert torch.equal(got_grads[name][kept], want_grads[name][kept]), name


@pytest.mark.parametrize("model", MODELS)
def test_scaled_backward_alignment_is_a_posterior(model):
    """smith_waterman_alignment takes the same kernel: entries in [0, 1], and at local max the
    rows of the alignment sum to at most 1 (each residue aligned at most once)."""
    p = make_problem(model, "local", "max", 1.0, B=2000, M=32, N=32, penalties="item",
                     seed=8).on("cuda", torch.float32)
    score, alignment = softalign.smith_waterman_alignment(p.scores.detach(), **p.kwargs())
    assert alignment.min() >= 0 and alignment.max() <= 1 + 1e-5
    assert alignment.sum(2).max() <= 1 + 1e-4
    want_score, want = softalign.smith_waterman_alignment(
        p.scores.detach().cpu().double(), **p.on("cpu").kwargs())
    torch.testing.assert_close(alignment.cpu().double(), want, rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("model", MODELS)
def test_scaled_backward_repeats_bit_for_bit(model):
    p = make_problem(model, "local", "soft", 0.5, B=3000, M=32, N=32, penalties="item",
                     lengths=True, seed=9)
    runs = [evaluate(softalign.smith_waterman, p.on("cuda", torch.float32)) for _ in range(3)]
    for score, grads in runs[1:]:
        assert torch.equal(score, runs[0][0])
        for name in grads:
            assert torch.equal(grads[name], runs[0][1][name])


@pytest.mark.skipif("SOFTALIGN_CUDA_LOG_SPACE" in os.environ, reason="log space for every call")
@pytest.mark.parametrize("t", [0.5, 1.0])
@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
@pytest.mark.parametrize("B", [1500, 600], ids=["half_warps", "warps"])
def test_scaled_backward_affine_takes_ordinary_items(tmp_path, end, t, B):
    """The affine kernel takes ordinary items, not refuses them, in both of its shapes (a half
    warp an item, and a warp an item at B <= 1024): d S of most differs in some bits from the
    log-space kernels' (SOFTALIGN_CUDA_LOG_SPACE=1, a fresh process; a refused item's are theirs,
    bit for bit), and agrees with them to float32 rounding."""
    scaled, log_space = scaled_and_log_space(tmp_path, dict(B=B, M=32, N=29), t, True, end,
                                             model="affine")
    differ = (scaled != log_space).reshape(B, -1).any(1)
    assert int(differ.sum()) > B // 2


@pytest.mark.parametrize("t", [0.25, 1.0, 4.0])
@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
@pytest.mark.parametrize("shape", [(32, 29), (32, 32), (7, 5)], ids=["32x29", "32x32", "7x5"])
def test_scaled_backward_affine_warp_an_item(end, t, shape):
    """B <= 1024: the affine kernel a warp an item (a row a lane) against the CPU, with lengths
    where M != N (32 x 32: whole items); refused items in this shape: the test below."""
    M, N = shape
    p = make_problem("affine", *end, t, B=700, M=M, N=N, penalties="item", lengths=M != N,
                     seed=int(10 * t) + M)
    assert_grads_match_cpu(p)


@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_scaled_backward_affine_warp_an_item_refused(end):
    """test_scaled_backward_refused_items's problem at B = 600, where the affine kernel takes a
    warp an item."""
    p = problem_with_refusals(*end, B=600, model="affine")
    got, _ = assert_grads_match_cpu(p, rtol=1e-3)  # item 16: test_scaled_backward_refused_items
    assert torch.isnan(got[12])


@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
@pytest.mark.parametrize("case", ["lengths", "short_items"])
@pytest.mark.parametrize("model", MODELS)
def test_scaled_backward_paying_gaps(end, case, model):
    """Gap penalties above zero (gaps that pay: G > 1), which the scaled kernels take up to
    |g| log2(e) / t = 12. Values then grow along every row, also past an item's last column and
    below its last row; a local end that followed them flushed its sum (local scores 0 or -inf,
    refused by nothing). The lengths-local cases catch NaN gradients of an adjoint that takes G
    times a row's factor to the row above (clamped at 2^127, inf below an item whose rows
    overflow; 0 R times that, NaN)."""
    if case == "lengths":  # short items beside n = 32 in the same warps
        p = make_problem(model, *end, 0.5, B=1500, M=32, N=32, penalties="item", lengths=True,
                         seed=11)
    else:
        p = make_problem(model, *end, 0.25, B=1200, M=7, N=5, penalties="item", seed=12)
        p.gap_open = p.gap_open - 0.1  # most below 12 t / log2(e) = 2.08 after the shift below
    p.gap_open = p.gap_open + 3.0  # about +2 to +2.3
    assert_grads_match_cpu(p)


@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_scaled_backward_diagonal_into_a_higher_scale(end):
    """Row 2's scale 2^45 above row 1's (S(2, 2) = 4.2 at t = 0.1), then in the next chunk a
    diagonal of two large scores, S(1, 9) and S(2, 10) = 5.5, through which the whole score goes.
    R of (2, 10) brought to row 1's scale (2^-160) flushed before E(2, 10) = 2^80 multiplied it:
    d S(1, 9) and d S(2, 10) came out 0 instead of 1, the item taken."""
    p = make_problem("linear", *end, 0.1, B=1100, M=4, N=12, penalties="item", seed=15)
    p.scores = -1.0 + 0.3 * p.scores  # E about 2^-14: no other path matters
    p.scores[:, 1, 1] = 4.2
    p.scores[:, 0, 8] = 5.5
    p.scores[:, 1, 9] = 5.5 + 0.01 * torch.arange(1100, dtype=torch.float64) / 1100
    p.gap_open = -0.2 - 0.05 * torch.rand(1100, generator=torch.Generator().manual_seed(15),
                                          dtype=torch.float64)  # |g| log2(e) / t below 12
    got, _ = assert_grads_match_cpu(p)
    assert torch.isfinite(got).all()


def test_scaled_backward_paying_gaps_near_the_top_of_the_range():
    """Global, t = 0.1, gap +0.75 (G = 2^10.8) and S(5, 1) = 8.6 (E = 2^124): the cells of
    columns 1 and 2 below row 5 reach 2^126-2^127 in their rows' scales, so R sits near 2^-127,
    and R times the factor to the row above (2^-11) kept 11 bits before G multiplied it back:
    d S and d g about 1e-3 off, the item taken."""
    p = make_problem("linear", "global", "max", 0.1, B=1100, M=14, N=2, penalties="item",
                     seed=16)
    p.scores = -3.0 + 0.1 * p.scores
    p.scores[:, 4, 0] = 8.6
    p.gap_open = 0.75 + 0.002 * torch.rand(1100, generator=torch.Generator().manual_seed(16),
                                           dtype=torch.float64)  # |g| log2(e) / t below 12
    got, _ = assert_grads_match_cpu(p)
    assert torch.isfinite(got).all()


@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_scaled_backward_paying_gaps_over_a_chunk_boundary(end):
    """t = 1, 5 x 7, gaps +8.05 to +8.25 (11.6-11.9 bits a column paying), scores about 1. A local
    item's chunk 0 keeps k = 0 while its rows rise by G a column, to about 2^126 by the chunk's
    last column; R of the next chunk's first column (the end's) brought to that scale is near
    2^-139, a subnormal of about 10 bits, and G times it put d g 2e-4 to 4e-4 off relatively on
    about 90 of the 1100 items, all taken. Now G multiplies R before the 2^-e. Global rows start at
    their column 0's scale: fine either way."""
    p = make_problem("linear", *end, 1.0, B=1100, M=5, N=7, penalties="item", seed=17)
    p.scores = 1.0 + 0.5 * p.scores
    p.gap_open = 8.05 + 0.2 * torch.rand(1100, generator=torch.Generator().manual_seed(17),
                                         dtype=torch.float64)  # |g| log2(e) / t below 12
    got, _ = assert_grads_match_cpu(p)
    assert torch.isfinite(got).all()


def test_scaled_backward_large_grad():
    """grad scales d S on its way out: R itself stays below 1 / z (here up to 2^90 with
    -inf scores at t = 0.125), so a grad of 1e9 must not overflow it."""
    p = make_problem("linear", "global", "max", 0.125, B=1100, M=8, N=32, penalties="item",
                     lengths=True, seed=13)
    p.scores[::2] = -math.inf
    got = p.on("cuda", torch.float32)
    want = p.on("cpu", torch.float64)
    for q in (got, want):
        (softalign.smith_waterman(q.scores, **q.kwargs()) * 1e9).sum().backward()
    for a, b in [(got.scores, want.scores), (got.gap_open, want.gap_open)]:
        torch.testing.assert_close(a.grad.cpu().double(), b.grad, rtol=2e-4, atol=2e-4 * 1e9)
