"""The log-space kernels at small temperatures and exact ties, and at huge ones, against the CPU
backend: the adjoint's weights exp((x_k - v) / t) should sum to 1 per cell (log_space/adjoint.cuh
divide_by_sum), else the rounding of each saved v (up to ulp(v) / 2, which t ln 2 no longer
outweighs) multiplies the adjoint by exp(-err / t) at every cell along the paths (known, strict
xfails below); and the forward's smax (recurrence.h device::smax) must not turn an exact tie
into +inf once |v| / t is large, in any forward; nor t past 2^126 (device::exp2_scale) a -inf
term into NaN."""
import pytest
import torch

import softalign
from problems import MODELS, Problem, assert_grads_match_cpu, evaluate, make_problem
from test_cuda_schedules import ENDS, assert_forward_without_grad_matches_cpu

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


# Known imprecision, not fixed: the affine adjoints after a log-space forward do not divide their
# weights by their sum (log_space/adjoint.cuh, divide_by_sum: they sum to 1 only up to the saved values'
# rounding, an error that grows as t falls). With every adjoint dividing, these passed on an
# H100, but the long affine adjoint lost 17-20%; the linear ones divide.
KNOWN_IMPRECISION = pytest.mark.xfail(strict=True, reason="the affine log-space adjoint's "
                                      "weights are not divided by their sum (see above)")


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
@pytest.mark.parametrize("model", ["linear", pytest.param("affine", marks=KNOWN_IMPRECISION)])
def test_log_space_adjoint_integer_scores_small_temperature(model, mode):
    """Integer scores and gaps (a substitution matrix's: ties everywhere), t = 0.01, one long pair
    (a warp a stripe; the log-space pair below t = 0.5). Without the division d S was off by
    0.04-0.07 and d g by 3-5% (a float32 model of the kernel); with it, 1.3e-3-1.9e-3 and 1.5e-5,
    as the CPU's float32 backend."""
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
    these 64 items, in a float32 model of the kernel). Scores 2 g: linear, a three-way tie in
    H[1][1]; affine, A[1][1] = Y[1][1] in the final smax."""
    B = 64
    g = -torch.linspace(1e4, 2e4, B, dtype=torch.float64)
    p = Problem((2 * g).view(B, 1, 1).clone(), g.clone(), g.clone() if model == "affine" else None,
                1e-6, mode="global")
    got, _ = evaluate(softalign.smith_waterman, p.on("cuda", torch.float32))
    want, _ = evaluate(softalign.smith_waterman, p.on("cpu", torch.float64))
    assert torch.isfinite(got).all(), f"{int((~torch.isfinite(got)).sum())} items +inf"
    torch.testing.assert_close(got.cpu().double(), want, rtol=1e-6, atol=0)


SHAPES = [(70000, 32, 32), (70000, 17, 23), (5, 31, 40), (2, 40, 40)]
TIE_ENDS = [e[:2] for e in ENDS[:3]]


@pytest.mark.parametrize("end", TIE_ENDS, ids=["-".join(e) for e in TIE_ENDS])
@pytest.mark.parametrize("shape", SHAPES, ids=["x".join(map(str, s)) for s in SHAPES])
@pytest.mark.parametrize("model", MODELS)
def test_cuda_forward_without_grad_integer_scores_tiny_temperature(model, shape, end):
    """The exact ties of the test above in the forwards without grad: the streamed one (70000
    items: lanes handing over items mid-chunk), the striped one of one and of two stripes (the
    ring). Integer scores (a substitution matrix's) tie everywhere; at t = 1e-7 a tie at |m| of
    about 315 or more overflowed (7 of 12 items of (12, 32, 32) +inf, local soft NaN, in
    a float32 model of the kernel)."""
    B, M, N = shape
    p = make_problem(model, *end, 1e-7, B=B, M=M, N=N, lengths=True, seed=M + N)
    gen = torch.Generator().manual_seed(B + M)
    p.scores = torch.randint(-4, 12, (B, M, N), generator=gen).double() * 20
    p.gap_open = -11.0
    p.gap_extend = -1.0 if model == "affine" else None
    assert_forward_without_grad_matches_cpu(p)


@pytest.mark.parametrize("end", TIE_ENDS, ids=["-".join(e) for e in TIE_ENDS])
@pytest.mark.parametrize("model", MODELS)
def test_cuda_temperature_past_2_126(model, end):
    """exp2_scale = __fdividef(log2 e, t) was 0 for t > 2^126, and a -inf term times 0 NaN: a
    (1, 1, 1) affine item at t = 1e38 scored NaN (the CPU's float32: 6.93e37)."""
    p = make_problem(model, *end, 1e38, B=1, M=1, N=1)
    p.scores[:] = 0.5
    assert_forward_without_grad_matches_cpu(p)


@pytest.mark.parametrize("path", ["striped", "general"])
@pytest.mark.parametrize("end", TIE_ENDS, ids=["-".join(e) for e in TIE_ENDS])
@pytest.mark.parametrize("model", MODELS)
def test_cuda_gradients_at_temperature_past_2_126(model, end, path):
    """The device smax_weights' scale was __fdividef(log2 e, t) too, 0 past 2^126, and a -inf
    term times 0 NaN: the general path's adjoint (penalties per position) and the striped
    adjoint's end weights at (m, n) (affine: a -inf state there) gave NaN gradients."""
    if path == "striped":
        p = make_problem(model, *end, 1e38, B=1, M=1, N=1, penalties="item")
    else:
        p = make_problem(model, *end, 1e38, B=1, M=1, N=2, penalties="full")
    p.scores[:] = 0.5
    got, _ = assert_grads_match_cpu(p)
    assert torch.isfinite(got).all()
