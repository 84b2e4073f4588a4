"""Edges of docs/spec.md: empty shapes, -inf, NaN, the classic hard algorithms, the fused alignment."""
import math

import pytest
import torch

import softalign
from conftest import DEVICES
from problems import MODELS, MODES, assert_matches_reference, make_problem
from reference import classic_gotoh_global, classic_gotoh_local, classic_nw, classic_sw


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(0, 4, 5), (3, 0, 5), (3, 4, 0), (2, 0, 0)])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("model", MODELS)
def test_empty_shapes(model, mode, shape, device):
    assert_matches_reference(make_problem(model, mode, "max", 1.0, *shape), device)


@pytest.mark.parametrize("device", DEVICES)
def test_global_empty_dimension_charges_every_gap(device):
    # M = 0: the only alignment is N horizontal gaps.
    scores = torch.zeros(2, 0, 5, device=device)
    torch.testing.assert_close(softalign.smith_waterman(scores, -0.5, mode="global").cpu(),
                               torch.full((2,), -2.5))
    torch.testing.assert_close(
        softalign.smith_waterman(scores, -2.0, gap_extend=-0.5, mode="global").cpu(),
        torch.full((2,), -4.0))  # one open, four extends


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("temperature", [0.0, 0.5])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("model", MODELS)
def test_minus_inf_scores_are_forbidden_pairs(model, mode, temperature, device):
    p = make_problem(model, mode, "soft" if mode == "local" else "max", temperature, B=3, M=6,
                     N=5, seed=3)
    mask = torch.rand(p.scores.shape, generator=torch.Generator().manual_seed(1)) < 0.3
    p.scores = p.scores.masked_fill(mask, -math.inf)
    p.scores[1] = -math.inf  # a whole item forbidden
    assert_matches_reference(p, device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("model", MODELS)
def test_minus_inf_penalty_forbids_gaps(model, device):
    scores = torch.randn(2, 5, 5, dtype=torch.float64, device=device)
    gap_extend = -math.inf if model == "affine" else None
    got = softalign.smith_waterman(scores, -math.inf, gap_extend=gap_extend, temperature=0.0,
                                   mode="global")
    torch.testing.assert_close(got, scores.diagonal(dim1=1, dim2=2).sum(-1))  # no gap at all


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("model", MODELS)
def test_nan_stays_in_its_item(model, device):
    p = make_problem(model, "local", "soft", 1.0, B=3, M=5, N=4, seed=2).on(device)
    clean = softalign.smith_waterman(p.scores, **p.kwargs())
    scores = p.scores.detach().clone()
    scores[1, 2, 3] = math.nan
    scores.requires_grad_()
    dirty = softalign.smith_waterman(scores, **p.kwargs())
    assert torch.isnan(dirty[1])
    torch.testing.assert_close(dirty[[0, 2]], clean[[0, 2]])
    dirty.sum().backward()
    assert torch.isfinite(scores.grad[[0, 2]]).all()


def integer_scores(M, N, seed):
    return torch.randint(-4, 6, (M, N), generator=torch.Generator().manual_seed(seed)).double()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("seed", range(4))
def test_temperature_zero_is_the_classic_algorithms(seed, device):
    """Smith-Waterman, Needleman-Wunsch and Gotoh (local and global), exactly."""
    S = integer_scores(7 + seed, 9 - seed, seed)
    rows = S.tolist()
    cases = [
        (dict(gap_open=-2.0), "local", classic_sw(rows, -2.0)),
        (dict(gap_open=-2.0), "global", classic_nw(rows, -2.0, n=S.shape[1])),
        (dict(gap_open=-5.0, gap_extend=-1.0), "local", classic_gotoh_local(rows, -5.0, -1.0)),
        (dict(gap_open=-5.0, gap_extend=-1.0), "global",
         classic_gotoh_global(rows, -5.0, -1.0, n=S.shape[1])),
    ]
    for penalties, mode, expected in cases:
        got = softalign.smith_waterman(S.to(device), temperature=0.0, mode=mode, **penalties)
        assert got.item() == expected, (penalties, mode)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("temperature", [0.0, 0.4])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("model", MODELS)
def test_alignment_is_the_gradient(model, mode, temperature, device):
    p = make_problem(model, mode, "max", temperature, B=3, M=7, N=6, lengths=True, seed=9)
    p = p.on(device)
    score = softalign.smith_waterman(p.scores, **p.kwargs())
    (grad,) = torch.autograd.grad(score.sum(), p.scores)
    fused_score, alignment = softalign.smith_waterman_alignment(p.scores.detach(), **p.kwargs())
    torch.testing.assert_close(fused_score, score.detach(), rtol=0, atol=0)
    torch.testing.assert_close(alignment, grad, rtol=1e-12, atol=1e-12)
    assert alignment.min() >= 0 and alignment.max() <= 1 + 1e-12  # docs/spec.md: entries in [0, 1]
    if temperature == 0:
        assert set(alignment.unique().tolist()) <= {0.0, 1.0}


def test_hard_alignment_is_the_optimal_path():
    # a = "ACG", b = "AG": identity +2, mismatch -1, linear gap -1: A-A, C-gap, G-G scores 3.
    S = torch.tensor([[2.0, -1.0], [-1.0, -1.0], [-1.0, 2.0]])
    score, alignment = softalign.smith_waterman_alignment(S, -1.0, temperature=0.0)
    assert score.item() == 3.0
    assert alignment.tolist() == [[1.0, 0.0], [0.0, 0.0], [0.0, 1.0]]


@pytest.mark.parametrize("device", DEVICES)
def test_results_do_not_depend_on_the_batch(device):
    p = make_problem("affine", "local", "soft", 0.5, B=5, M=8, N=7, penalties="item",
                     lengths=True, seed=4)
    p = p.on(device)
    together = softalign.smith_waterman(p.scores, **p.kwargs())
    for b in range(5):
        alone = softalign.smith_waterman(
            p.scores[b:b + 1], gap_open=p.gap_open[b:b + 1], gap_extend=p.gap_extend[b:b + 1],
            temperature=p.temperature, lengths_a=p.lengths_a[b:b + 1],
            lengths_b=p.lengths_b[b:b + 1], mode=p.mode, reduction=p.reduction)
        assert alone.item() == together[b].item()


@pytest.mark.parametrize("device", DEVICES)
def test_non_contiguous_scores(device):
    p = make_problem("linear", "local", "soft", 1.0, B=3, M=6, N=5, seed=8)
    p.scores = p.scores.transpose(1, 2).contiguous().transpose(1, 2)
    assert not p.scores.is_contiguous()
    assert_matches_reference(p, device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("model", MODELS)
# (B, M, N) for the GPU's schedules: a warp per item (a row per lane), many items (several rows
# per lane), and several stripes of one item.
@pytest.mark.parametrize("shape", [(2, 32, 32), (1100, 32, 32), (2, 70, 40)])
def test_max_end_ties_go_to_the_first_cell_in_row_major_order(shape, model, device):
    """docs/spec.md, "Score": the max end's gradient goes to the first maximal cell in row-major order,
    whichever order a backend visits the cells in (rows of one lane, lanes, stripes)."""
    B, M, N = shape
    scores = torch.full(shape, -1.0)
    # Equal maxima at (5, 20), (5, 25), (7, 10) and, with several stripes, (40, 10) (1-based DP
    # cells, S[i - 1][j - 1]); the first in row-major order is (5, 20).
    tied = [(5, 20), (5, 25), (7, 10)] + ([(40, 10)] if M > 40 else [])
    for i, j in tied:
        scores[:, i - 1, j - 1] = 5.0
    scores = scores.to(device).requires_grad_()
    gaps = dict(gap_open=-100.0, gap_extend=-100.0) if model == "affine" else dict(gap_open=-100.0)
    score = softalign.smith_waterman(scores, temperature=0.0, **gaps)
    assert torch.equal(score.detach().cpu(), torch.full((B,), 5.0))
    score.sum().backward()
    expected = torch.zeros(shape)
    expected[:, 4, 19] = 1.0
    assert torch.equal(scores.grad.cpu(), expected)
