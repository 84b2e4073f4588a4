"""The log-space kernels at small temperatures and exact ties, against the CPU backend in float64
(session 34's review, by a float32 emulation of the kernels' cell math): the adjoint's weights
exp((x_k - v) / t) must sum to 1 per cell (stripes.cuh divide_by_sum), else the rounding of each
saved v (up to ulp(v) / 2, which t ln 2 no longer outweighs) multiplies the adjoint by
exp(-err / t) at every cell along the paths; and the forward's smax (recurrence.h device::smax)
must not turn an exact tie into +inf once |v| / t is large."""
import pytest
import torch

import softalign
from problems import Problem, evaluate

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


@pytest.mark.parametrize("temperature", [1e-2, 1e-4])
def test_log_space_adjoint_tied_weights_sum_to_one(temperature):
    """(64, 1, 1) global linear items: H[1][1] = smax(S, H[0][1] + g, H[1][0] + g) with S far
    below the two tied gap terms (2 g each): d score / d g = 2 exactly (half the alignment goes
    through each gap). With |g| / t around 1e7, v = 2 g + t ln 2 rounds to 2 g or to the next
    float, and weights not divided by their sum were both 1 (d g = 4) or both exp(-ulp / t)."""
    B = 64
    g = -(torch.linspace(1e3, 2e3, B, dtype=torch.float64) * (temperature / 1e-2) * 100)
    p = Problem((3 * g).view(B, 1, 1), g.clone(), None, temperature, mode="global")
    _, grads = evaluate(softalign.smith_waterman, p.on("cuda", torch.float32))
    torch.testing.assert_close(grads["gap_open"].cpu().double(),
                               torch.full((B,), 2.0, dtype=torch.float64), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("mode", ["local", "global"])
@pytest.mark.parametrize("model", ["linear", "affine"])
def test_log_space_adjoint_integer_scores_small_temperature(model, mode):
    """Integer scores and gaps (a substitution matrix's: ties everywhere), t = 0.01, one long pair
    (a warp a stripe; the log-space pair below t = 0.5). Without the division d S was off by
    0.04-0.07 and d g by 3-5% in emulation; with it, 1.3e-3-1.9e-3 and 1.5e-5, as the CPU's
    float32 backend."""
    gen = torch.Generator().manual_seed(11)
    scores = torch.randint(-2, 4, (1, 1024, 1024), generator=gen).double()
    gap = torch.tensor(-1.0, dtype=torch.float64)
    p = Problem(scores, gap, gap.clone() if model == "affine" else None, 0.01, mode=mode)
    got, got_grads = evaluate(softalign.smith_waterman, p.on("cuda", torch.float32))
    want, want_grads = evaluate(softalign.smith_waterman, p.on("cpu", torch.float64))
    torch.testing.assert_close(got.cpu().double(), want, rtol=1e-5, atol=1e-3)
    torch.testing.assert_close(got_grads["scores"].cpu().double(), want_grads["scores"],
                               rtol=0, atol=5e-3)
    for name in ("gap_open", "gap_extend"):
        if name in want_grads:
            torch.testing.assert_close(got_grads[name].cpu().double(), want_grads[name],
                                       rtol=1e-3, atol=0, msg=lambda m: f"d {name}: {m}")


@pytest.mark.parametrize("model", ["linear", "affine"])
def test_log_space_forward_exact_tie_stays_finite(model):
    """device::smax takes a term's exponent as fmaf(x, c, -fl(m c)): for a term tied with the max
    that is fl(m c)'s rounding residual, up to ulp(m c) / 2, past 128 once |m| / t passes about
    1.5e9: m = 2 g = -3e4 at t = 1e-6 gave ex2(944) = inf and a score of +inf (about half of
    these 64 items, in emulation). Scores 2 g: linear, a three-way tie in H[1][1]; affine,
    A[1][1] = Y[1][1] in the final smax."""
    B = 64
    g = -torch.linspace(1e4, 2e4, B, dtype=torch.float64)
    p = Problem((2 * g).view(B, 1, 1).clone(), g.clone(), g.clone() if model == "affine" else None,
                1e-6, mode="global")
    got, _ = evaluate(softalign.smith_waterman, p.on("cuda", torch.float32))
    want, _ = evaluate(softalign.smith_waterman, p.on("cpu", torch.float64))
    assert torch.isfinite(got).all(), f"{int((~torch.isfinite(got)).sum())} items +inf"
    torch.testing.assert_close(got.cpu().double(), want, rtol=1e-6, atol=0)
