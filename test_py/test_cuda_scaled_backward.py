"""The CUDA backend's fused forward + adjoint in probability space (ops/cuda/scaled_adjoint.cuh):
the short pairs' linear gradients at t > 0 (B > 1024, M <= 32, N <= 32). Scores and every
gradient against the CPU backend in float64: temperatures from 0.05 (every item refused: the
log-space kernels take every unit) to 100, lengths, whole chunks inside the items, and items
built to be refused among items it takes (their units go to log space, the others must keep the
fused results)."""
import pytest
import torch

import softalign
from problems import evaluate, make_problem, problem_with_refusals

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

ENDS = [("local", "max"), ("local", "soft"), ("global", "max")]
END_IDS = ["-".join(e) for e in ENDS]


def assert_grads_match_cpu(p, rtol=2e-4, atol=2e-4):
    got, got_grads = evaluate(softalign.smith_waterman, p.on("cuda", torch.float32))
    want, want_grads = evaluate(softalign.smith_waterman, p.on("cpu", torch.float64))
    torch.testing.assert_close(got.cpu().double(), want, rtol=rtol, atol=atol, equal_nan=True)
    assert got_grads.keys() == want_grads.keys()
    for name in want_grads:
        torch.testing.assert_close(got_grads[name].cpu().double(), want_grads[name], rtol=rtol,
                                   atol=atol, equal_nan=True,
                                   msg=lambda m: f"d score / d {name}: {m}")
    return got, got_grads


@pytest.mark.parametrize("t", [0.05, 0.25, 1.0, 4.0, 100.0])
@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_scaled_backward_matches_cpu(end, t):
    p = make_problem("linear", *end, t, B=1500, M=32, N=29, penalties="item", lengths=True,
                     seed=int(10 * t) + 1)
    assert_grads_match_cpu(p)


@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_scaled_backward_whole_chunks_inside(end):
    """No lengths, 32 x 32: the interior chunks, and every cell of d S written by the kernel."""
    p = make_problem("linear", *end, 1.0, B=2000, M=32, N=32, penalties="item", seed=4)
    p.scores += 0.5  # long local alignments
    assert_grads_match_cpu(p)


@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_scaled_backward_number_penalty(end):
    """A number penalty (no gradient asked for it) and short items, few rows a lane."""
    p = make_problem("linear", *end, 0.5, B=1100, M=7, N=5, penalties="number", lengths=True,
                     seed=6)
    assert_grads_match_cpu(p)


@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_scaled_backward_refused_items(end):
    p = problem_with_refusals(*end)
    p.lengths_a[30], p.lengths_b[40] = 0, 0  # only boundaries: refused too
    # rtol 1e-3: item 16 (gap +200, refused: the log-space kernels) scores near 9000, where the
    # log-space weights in float32 are off by about 5e-4 (H200: d gap 6e-4 off, relatively).
    got, _ = assert_grads_match_cpu(p, rtol=1e-3)
    assert torch.isnan(got[12])


def test_scaled_backward_alignment_is_a_posterior():
    """smith_waterman_alignment takes the same kernel: entries in [0, 1], and at local max the
    rows of the alignment sum to at most 1 (each residue aligned at most once)."""
    p = make_problem("linear", "local", "max", 1.0, B=2000, M=32, N=32, penalties="item",
                     seed=8).on("cuda", torch.float32)
    score, alignment = softalign.smith_waterman_alignment(p.scores.detach(), **p.kwargs())
    assert alignment.min() >= 0 and alignment.max() <= 1 + 1e-5
    assert alignment.sum(2).max() <= 1 + 1e-4
    want_score, want = softalign.smith_waterman_alignment(
        p.scores.detach().cpu().double(), **p.on("cpu").kwargs())
    torch.testing.assert_close(alignment.cpu().double(), want, rtol=2e-4, atol=2e-4)


def test_scaled_backward_repeats_bit_for_bit():
    p = make_problem("linear", "local", "soft", 0.5, B=3000, M=32, N=32, penalties="item",
                     lengths=True, seed=9)
    runs = [evaluate(softalign.smith_waterman, p.on("cuda", torch.float32)) for _ in range(3)]
    for score, grads in runs[1:]:
        assert torch.equal(score, runs[0][0])
        for name in grads:
            assert torch.equal(grads[name], runs[0][1][name])
