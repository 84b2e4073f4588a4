"""The CPU backend's float32 SIMD schedules (docs/design.md, "CPU schedules"): in batches of
fewer than 16 items, items of at least 32 rows and 64 columns swept in bands of 16 rows, one row
a lane (ops/cpu/sweep_band.h), by several threads at once when the items are fewer than the
threads; the rest in groups of 16 items, one item a lane (ops/cpu/sweep_lanes.h). Each against
the float64 reference, batches that mix both, and bits that do not depend on the threads, nor on
the batch while it keeps its size class (docs/spec.md)."""
import pytest
import torch

import softalign
from problems import ENDS, MODELS, Problem, assert_matches_reference, evaluate, make_problem

pytestmark = pytest.mark.skipif(
    not torch.backends.cpu.get_cpu_capability().startswith("AVX"),
    reason="the SIMD schedules need AVX2")

BAND_ROWS, BAND_MIN_COLUMNS, GROUP_WIDTH = 16, 64, 16


def banded_problem(model, mode, reduction, t, penalties, B=3, M=35, N=66, seed=0):
    """Items of 2-3 bands (the last one partial) whose lengths keep them banded."""
    p = make_problem(model, mode, reduction, t, B=B, M=M, N=N, penalties=penalties, seed=seed)
    gen = torch.Generator().manual_seed(seed + 1)
    p.lengths_a = torch.randint(2 * BAND_ROWS, M + 1, (B,), generator=gen)
    p.lengths_b = torch.randint(BAND_MIN_COLUMNS, N + 1, (B,), generator=gen)
    return p


@pytest.mark.parametrize("penalties", ["0d", "item", "position", "full"])
@pytest.mark.parametrize("t", [1.0, 0.0])
@pytest.mark.parametrize("end", ENDS)
@pytest.mark.parametrize("model", MODELS)
def test_bands_match_reference(model, end, t, penalties):
    p = banded_problem(model, *end, t, penalties)
    p32 = p.on("cpu", torch.float32).on("cpu")  # the float32 inputs, in float64 for the reference
    assert_matches_reference(p32, dtype=torch.float32, rtol=2e-5, atol=2e-5)


def with_threads(n, fn, *args):
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        return fn(*args)
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("shape", [(1, 300, 200), (1, 40, 700), (2, 120, 90)])
@pytest.mark.parametrize("end", ENDS)
@pytest.mark.parametrize("model", MODELS)
def test_bands_bits_do_not_depend_on_threads(model, end, shape):
    """One item's bands on 1, 2 or 3 threads (each a few steps behind the band above): the same
    bits, since every sum is taken in an order fixed by the item alone."""
    B, M, N = shape
    p = make_problem(model, *end, 0.7, B=B, M=M, N=N, penalties="full", seed=M + N)
    p = p.on("cpu", torch.float32)
    want, want_grads = with_threads(1, evaluate, softalign.smith_waterman, p)
    for threads in [2, 3]:
        got, got_grads = with_threads(threads, evaluate, softalign.smith_waterman, p)
        assert torch.equal(got, want), threads
        for name in want_grads:
            assert torch.equal(got_grads[name], want_grads[name]), (threads, name)


@pytest.mark.parametrize("B", [1, 2, 15, 16, 17])
@pytest.mark.parametrize("end", ENDS)
@pytest.mark.parametrize("model", MODELS)
def test_mixed_batches(model, end, B):
    """Batches whose items take either schedule (lengths around the bands' minimum; batches of 16
    and more: groups only), against the float64 backend, and each item alone as in its batch:
    bit for bit below 16 items, where the item's own size picks its schedule either way."""
    M, N = 48, 80
    p = make_problem(model, *end, 1.0, B=B, M=M, N=N, penalties="item", seed=B)
    gen = torch.Generator().manual_seed(B)
    p.lengths_a = torch.randint(2 * BAND_ROWS - 4, M + 1, (B,), generator=gen)
    p.lengths_b = torch.randint(BAND_MIN_COLUMNS - 8, N + 1, (B,), generator=gen)
    p.lengths_a[0], p.lengths_b[0] = M, N
    got, got_grads = evaluate(softalign.smith_waterman, p.on("cpu", torch.float32))
    want, want_grads = evaluate(softalign.smith_waterman, p.on("cpu", torch.float64))
    torch.testing.assert_close(got.double(), want, rtol=2e-5, atol=2e-5)
    for name in want_grads:
        torch.testing.assert_close(got_grads[name].double(), want_grads[name], rtol=2e-5,
                                   atol=2e-5, msg=lambda m: f"d score / d {name}: {m}")
    p32 = p.on("cpu", torch.float32)
    for b in sorted({0, B // 2, B - 1}):
        alone = Problem(p32.scores[b:b + 1].detach().requires_grad_(),
                        p32.gap_open[b:b + 1].detach().requires_grad_(),
                        None if p32.gap_extend is None
                        else p32.gap_extend[b:b + 1].detach().requires_grad_(),
                        p32.temperature, p.lengths_a[b:b + 1], p.lengths_b[b:b + 1], p.mode,
                        p.reduction)
        score, grads = evaluate(softalign.smith_waterman, alone)
        if B < GROUP_WIDTH:
            assert torch.equal(score[0], got[b]), b
            for name in grads:
                assert torch.equal(grads[name][0], got_grads[name][b]), (b, name)
        else:
            torch.testing.assert_close(score[0], got[b], rtol=2e-5, atol=2e-5)
            for name in grads:
                torch.testing.assert_close(grads[name][0], got_grads[name][b], rtol=2e-5,
                                           atol=2e-5)


@pytest.mark.parametrize("model", MODELS)
def test_bands_with_minus_inf_and_nan(model):
    """-inf scores (a masked block) take no path; a NaN item is NaN in its score and every
    gradient (docs/spec.md), its neighbours untouched."""
    p = banded_problem(model, "local", "soft", 1.0, "item", B=2, M=40, N=70, seed=3)
    p.lengths_a[:], p.lengths_b[:] = 40, 70
    p.scores[0, 10:20, :] = -float("inf")
    p.scores[1, 33, 5] = float("nan")
    got, grads = evaluate(softalign.smith_waterman, p.on("cpu", torch.float32))
    want, want_grads = evaluate(softalign.smith_waterman, p.on("cpu", torch.float64))
    assert torch.isnan(got[1]) and all(torch.isnan(g[1]).all() for g in grads.values())
    torch.testing.assert_close(got[0].double(), want[0], rtol=2e-5, atol=2e-5)
    assert torch.equal(grads["scores"][0, 10:20], torch.zeros(10, 70))
    torch.testing.assert_close(grads["scores"][0].double(), want_grads["scores"][0], rtol=2e-5,
                               atol=2e-5)


@pytest.mark.parametrize("inputs", ["ties", "nan", "plus_inf", "minus_inf_block"])
@pytest.mark.parametrize("end", ENDS)
@pytest.mark.parametrize("model", MODELS)
def test_bands_at_t0_max_plus_and_general_steps(model, end, inputs):
    """t = 0: chunks of 64 steps whose values are all below +inf take max-plus steps, the others
    recurrence.h's (NaN and +inf care); both give the float64 backend's results. Small integer
    scores make ties: the first maximal cell in row-major order takes the gradient."""
    B, M, N = 2, 70, 300
    gen = torch.Generator().manual_seed(7)
    scores = torch.randint(-3, 4, (B, M, N), generator=gen).double()
    if inputs == "nan":
        scores[1, 40, 150] = float("nan")
    elif inputs == "plus_inf":
        scores[1, 20, 200] = float("inf")
    elif inputs == "minus_inf_block":
        scores[:, 30:50, 100:180] = -float("inf")
    extend = -1.0 if model == "affine" else None
    p = Problem(scores, -2.0, extend, 0.0, mode=end[0], reduction=end[1])
    got, got_grads = evaluate(softalign.smith_waterman, p.on("cpu", torch.float32))
    want, want_grads = evaluate(softalign.smith_waterman, p.on("cpu", torch.float64))
    torch.testing.assert_close(got.double(), want, rtol=0, atol=0, equal_nan=True)
    for name in want_grads:
        torch.testing.assert_close(got_grads[name].double(), want_grads[name], rtol=0, atol=0,
                                   equal_nan=True, msg=lambda m: f"d score / d {name}: {m}")
