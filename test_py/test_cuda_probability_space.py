"""The CUDA backend's scaled forward (ops/cuda/prob_space/linear_forward.cuh): the linear forward without grad at
t > 0, evaluated in probability space, each row's values with an exponent of their own; the
items it refuses are swept again in log space (items one stripe tall, M <= 32: by the same warp;
items of several stripes, a warp a stripe: by a second launch). Against the CPU backend in
float64: temperatures from 0.05 to 100 (at 0.05 every item is refused), long rows (the exponents
move by thousands), whole chunks inside the items (no lengths), rows whose values fall and rise
again by more than float's range, and items built to be refused (exp(s / t) past float's range,
NaN and +inf scores, gaps whose exp(g / t) vanishes) among items it takes, so that each sweep
must write its own items and only those. The stacked tests (items of several stripes) run the
affine model's stacked forward too (prob_space/affine_forward.cuh)."""
import math
import os

import pytest
import torch

import softalign
from fresh_process import ROOT, run_in_fresh_process
from problems import assert_grads_match_cpu, evaluate, make_problem, problem_with_refusals

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

ENDS = [("local", "max"), ("local", "soft"), ("global", "max")]
END_IDS = ["-".join(e) for e in ENDS]

# The scaled forward's two shapes (launch/striped.cuh's with_shape): B > 1024 takes a quarter warp
# an item, four rows a lane; B <= 1024 a warp an item, a row a lane, whose lanes reach column 0
# over several chunks. `batch(B)` is a test's B in the first, or 700 items in the second.
SHAPES = {"quarter_warps": None, "warps": 700}


@pytest.fixture(params=list(SHAPES))
def batch(request):
    few = SHAPES[request.param]
    return lambda many: many if few is None else few


def forward(p, device, dtype):
    q = p.on(device, dtype)
    with torch.no_grad():
        return softalign.smith_waterman(q.scores, **q.kwargs())


def assert_matches_cpu(p):
    got = forward(p, "cuda", torch.float32)
    want = forward(p, "cpu", torch.float64)
    torch.testing.assert_close(got.cpu().double(), want, rtol=2e-4, atol=2e-4, equal_nan=True)
    return got


@pytest.mark.parametrize("t", [0.05, 0.25, 1.0, 4.0, 100.0])
@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_scaled_forward_matches_cpu(end, t, batch):
    p = make_problem("linear", *end, t, B=batch(1500), M=32, N=29, penalties="item", lengths=True,
                     seed=int(10 * t))
    assert_matches_cpu(p)


@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_scaled_forward_whole_chunks_inside(end, batch):
    """No lengths: every chunk of a warp's items lies inside them (the sweep without the
    borders' checks)."""
    p = make_problem("linear", *end, 1.0, B=batch(2000), M=32, N=40, penalties="item", seed=4)
    assert_matches_cpu(p)


@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_scaled_forward_long_rows(end, batch):
    """1000 columns at t = 0.2: the global values fall by about 7000 powers of two along a row,
    the local ones rise and fall back with each alignment. The tolerance (0.03 at global scores
    near -980) is below t ln 2 = 0.139 (a power of two of Z lost) and above the CPU's float32
    rounding (0.013 at most). At 3000 columns float32 itself is off by up to 0.107 there (the
    error grows as N^2), too close to a power of two to tell them apart."""
    p = make_problem("linear", *end, 0.2, B=batch(1100), M=9, N=1000, penalties="item",
                     lengths=True, seed=3)
    p.scores += 0.3  # longer alignments: local values that rise far
    got = forward(p, "cuda", torch.float32)
    want = forward(p, "cpu", torch.float64)
    torch.testing.assert_close(got.cpu().double(), want, rtol=3e-5, atol=1e-3)


def diagonal(S, end_i, end_j, cells, log2_total):
    """Scores along the diagonal of `cells` cells ending at cell (end_i, end_j) that sum to
    log2_total powers of two of Z at t = 1."""
    for q in range(cells):
        S[:, end_i - cells + q, end_j - cells + q] = log2_total / cells / math.log2(math.e)


@pytest.mark.parametrize("reduction", ["max", "soft"])
@pytest.mark.parametrize("case", ["peak_then_rise", "rows_far_below_the_top"])
def test_scaled_forward_rows_that_fall_and_rise_again(case, reduction, batch):
    """A row's values 2^126 below its end's running maximum at a chunk's start, then back near
    2^127 within the chunk (its cells must still count in the end), and a row whose end sits
    2^127 below the lane's top exponent but holds a sum near 2^127 (it must still count when the
    lane's rows merge). Both were dropped before."""
    B, M, N = batch(1100), 16, 64
    p = make_problem("linear", "local", reduction, 1.0, B=B, M=M, N=N, seed=0)
    p.gap_open = -4.0
    p.scores.fill_(-3.0)
    if case == "peak_then_rise":
        diagonal(p.scores, 16, 20, 16, 127.7)  # rows 1-16, ending at (16, 20)
        diagonal(p.scores, 16, 48, 4, 127.7)   # rows 13-16, ending at (16, 48)
    else:
        diagonal(p.scores, 16, 20, 3, 126.5)
        diagonal(p.scores, 16, 28, 3, 127.5)
        diagonal(p.scores, 13, 64, 4, 127.0)
    assert_matches_cpu(p)


@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_scaled_forward_paying_gaps(end, batch):
    """Gap penalties about +2 at t = 0.5 (G > 1: values grow along every row, also past a short
    item's last column, beside items of 32 columns in the same warps)."""
    p = make_problem("linear", *end, 0.5, B=batch(1500), M=32, N=32, penalties="item", lengths=True,
                     seed=11)
    p.gap_open = p.gap_open + 2.5  # 1.5 .. 1.8: within gap_bound with chunks of 16 steps too
    assert_matches_cpu(p)


def down_column_zero(p, first_row, cells):
    """Every item's best path runs down column 0 to row first_row - 1, then along a diagonal of
    `cells` cells from (first_row, 1)."""
    for q in range(cells):
        p.scores[:, first_row - 1 + q, q] = 5.0


def test_scaled_forward_global_gaps_near_zero(batch):
    """Global items at t = 1 with gaps of -1e-10, whose best paths leave column 0 at row 17:
    column 0's z, 2^(i g log2(e) / t - k) with k = -1, rounds to 2 there, and the lanes that reach
    column 0 after a renormalisation (a warp an item: lanes from kW = 16 on) took it in a k one
    higher, Z(i, 0) twice its value (74.95 where the CPU gives 74.38, in a float32 model of the
    kernel at G = 32, R = 1, kW = 16)."""
    p = make_problem("linear", "global", "max", 1.0, B=batch(1500), M=32, N=29, penalties="item",
                     seed=6)
    p.gap_open = torch.full_like(p.gap_open, -1e-10)
    down_column_zero(p, 18, 14)
    assert_matches_cpu(p)


@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_scaled_forward_refused_items(end, batch):
    got = assert_matches_cpu(problem_with_refusals(*end, B=batch(1500)))
    assert torch.isnan(got[12])  # and every other item as the CPU has it


def test_scaled_forward_repeats_bit_for_bit(batch):
    p = make_problem("linear", "local", "soft", 0.5, B=batch(3000), M=32, N=32, penalties="item",
                     lengths=True, seed=9).on("cuda", torch.float32)
    with torch.no_grad():
        runs = [softalign.smith_waterman(p.scores, **p.kwargs()) for _ in range(3)]
    for again in runs[1:]:
        assert torch.equal(again, runs[0])


# Items of several stripes (M > 32, a warp a stripe of 32 rows): each stripe hands its last row
# to the stripe below through the ring, as H; a stripe that refuses its item flags it, and a
# log-space forward takes the whole item again. With lengths, items of one stripe among them.
# The host takes this forward at temperatures from 0.5 on (prob_space/linear_forward.cuh's kLongStepsMinTemperature;
# chunks of 16 steps), and log space below: t = 0.45 here is the log-space forward's. Local items
# take chunks of 32 steps from t = 1 on (kLongestStepsMinTemperature) where their gaps allow.
# Each case runs without grad and with grad: a forward + backward takes the same sweep, which then
# saves what the log-space adjoint reads (SaveLog), the items it refuses going to the log-space
# saving forward.
# Affine too (prob_space/affine_forward.cuh's stacked forward: D and U through the ring), for the
# forward without grad; with grad the affine model keeps the log-space forward + backward.
STACKED = dict(B=256, M=150, N=260)


@pytest.fixture(params=[False, True], ids=["forward", "forward_backward"])
def grad(request):
    return request.param


@pytest.fixture(params=["linear", "affine"])
def model(request, grad):
    if request.param == "affine" and grad:
        pytest.skip("the affine forward + backward is in log space (test_cuda_schedules.py)")
    return request.param


def stacked_run(p, grad):
    """The call on CUDA in float32: the scores, and with grad the gradients."""
    if grad:
        return evaluate(softalign.smith_waterman, p.on("cuda", torch.float32))
    return forward(p, "cuda", torch.float32), {}


def stacked_matches_cpu(p, grad, rtol=2e-4, atol=2e-4):
    """The score (and with grad, every gradient) against the CPU in float64: (score, grads)."""
    if grad:
        return assert_grads_match_cpu(p, rtol, atol)
    got = forward(p, "cuda", torch.float32)
    want = forward(p, "cpu", torch.float64)
    torch.testing.assert_close(got.cpu().double(), want, rtol=rtol, atol=atol, equal_nan=True)
    return got, {}


@pytest.mark.parametrize("t", [0.45, 0.5, 1.0, 2.0, 20.0])
@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_scaled_stacked_forward_matches_cpu(end, t, grad, model):
    p = make_problem(model, *end, t, **STACKED, penalties="item", lengths=True,
                     seed=int(10 * t))
    stacked_matches_cpu(p, grad)


@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_scaled_stacked_forward_gaps_refused(end, grad, model):
    """Gaps of about -4 at t = 0.5: |g| log2(e) / t past gap_bound (6 with chunks of 16 steps),
    so every item is refused without a step of its own: the second launch alone."""
    p = make_problem(model, *end, 0.5, **STACKED, penalties="item", lengths=True, seed=13)
    p.gap_open = p.gap_open - 3.0
    stacked_matches_cpu(p, grad)


@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_scaled_stacked_forward_long_rows(end, grad, model):
    """Ten stripes of 700 columns at t = 0.5: the exponents of global rows fall by thousands,
    and each stripe's lane 0 takes the row above from H far outside any float's range of Z.
    Gradients to 1e-3: the log-space adjoint's weights, exp of differences of values in the
    hundreds, carry float32's rounding of those values (the refused items of
    test_cuda_probability_space_gradients.py: 6e-4 at scores near 9000)."""
    p = make_problem(model, *end, 0.5, B=128, M=310, N=700, penalties="item", seed=5)
    p.scores += 0.3
    stacked_matches_cpu(p, grad, rtol=1e-3 if grad else 3e-5, atol=2e-3)


@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_scaled_stacked_forward_chunks_by_gap(end, grad, model):
    """t = 1, every other item with gaps of about -3 (|g| log2(e) / t = 3.9-4.3: beyond
    gap_bound(32), within gap_bound(16)), the others about -1: local warps take chunks of 32 or
    16 steps by their item's gap, side by side in one launch (the affine stacked forward always
    takes 16)."""
    p = make_problem(model, *end, 1.0, **STACKED, penalties="item", lengths=True, seed=22)
    p.gap_open[::2] -= 2.0
    stacked_matches_cpu(p, grad)


@pytest.mark.parametrize("t", [0.5, 1.0])
@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_scaled_stacked_forward_paying_gaps(end, t, grad, model):
    p = make_problem(model, *end, t, **STACKED, penalties="item", lengths=True, seed=12)
    p.gap_open = p.gap_open + 2.5  # 1.5 .. 1.8: within gap_bound with chunks of 32 steps too
    stacked_matches_cpu(p, grad)


@pytest.mark.parametrize("reduction", ["max", "soft"])
def test_scaled_stacked_forward_rise_past_a_long_chunk(reduction, grad, model):
    """Diagonals of 64 cells rising 4.6 powers of two a cell at t = 1 (2^148 in 32 columns of
    the rows that cross them, 2^74 in 16): items whose chunks of 32 steps overflow, swept again
    in log space, beside items of gaps that keep chunks of 16 (odd items, gaps about -3); the
    affine stacked forward takes chunks of 16 throughout."""
    p = make_problem(model, "local", reduction, 1.0, **STACKED, penalties="item", seed=23)
    p.gap_open[1::2] -= 2.0
    diagonal(p.scores[:64], 120, 200, 64, 64 * 4.6)
    stacked_matches_cpu(p, grad)


@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_scaled_stacked_forward_last_stripe_partly_outside(end, grad, model):
    """The last stripe holds the item's last 8 rows and 24 rows below it, whose cells (scores 0
    in the tile) must reach no end, in the chunks inside the item's columns too: with scores of
    -4 they would outgrow every cell of the item."""
    p = make_problem(model, *end, 1.0, B=640, M=40, N=120, penalties="item", seed=4)
    p.scores = 0.1 * p.scores - 4.0
    p.scores[:, 36, 60] = 2.0  # a local max above 0: the affine rule near refuses scores near 0
    stacked_matches_cpu(p, grad)


def test_scaled_stacked_forward_global_gaps_near_zero(grad, model):
    """test_scaled_forward_global_gaps_near_zero's column 0 in the second stripe (rows 33-64,
    lanes from 16 on reaching column 0 in its second chunk): with grad, the saving forward's H
    there is what the adjoint reads."""
    p = make_problem(model, "global", "max", 1.0, **STACKED, penalties="item", seed=8)
    p.gap_open = torch.full_like(p.gap_open, -1e-10)
    if model == "affine":  # X(i, 0) = O F^(i - 1)
        p.gap_extend = torch.full_like(p.gap_extend, -1e-10)
    down_column_zero(p, 50, 60)
    stacked_matches_cpu(p, grad)


@pytest.mark.parametrize("t", [1.0, 0.25], ids=["scaled", "log_space"])
def test_stacked_backward_argmax_column_past_2_24(t):
    """The max end's cell (i, j) goes from the saving forward to the adjoint's seed through the
    workspace's ends, four floats an end: a column past 2^24 must come back whole (stored
    as float(j), N = 2^24 + 1 came back as 2^24, the seed landed on a cell of
    S = -inf and d S was 0 everywhere). One item of two stripes, in probability space (t = 1) and
    in log space (t = 0.25); S = -inf but at (0, N - 1), so that cell (1, N) is the only maximum
    and d S there is its match weight, worked out from row 1's fixed point h = smax(0, g, h + g)
    (row 0 is 0 and row 1 has no other match before column N). About 11 GB of device memory."""
    if torch.cuda.get_device_properties(0).total_memory < 24 * 2**30:
        pytest.skip("needs about 11 GB of device memory")
    N, s, g = 2**24 + 1, 10.0, -1.0
    h = 0.0
    for _ in range(200):
        h = t * math.log(1 + math.exp(g / t) + math.exp((h + g) / t))
    terms = [0.0, s, g, h + g]
    z = sum(math.exp(x / t) for x in terms)
    scores = torch.full((1, 33, N), -math.inf, device="cuda")
    scores[0, 0, N - 1] = s
    scores.requires_grad_(True)
    score = softalign.smith_waterman(scores, gap_open=g, temperature=t)
    (d_scores,) = torch.autograd.grad(score.sum(), [scores])
    assert score.item() == pytest.approx(t * math.log(z), abs=1e-4)
    assert d_scores[0, 0, N - 1].item() == pytest.approx(math.exp(s / t) / z, abs=1e-5)
    assert d_scores.sum().item() == pytest.approx(math.exp(s / t) / z, abs=1e-5)


def stacked_with_refusals(model, mode, reduction):
    """Items refused in one stripe only (1-3), among items taken (the others)."""
    p = make_problem(model, mode, reduction, 1.0, **STACKED, penalties="item", seed=7)
    p.scores[1, 70, 5] = math.nan     # the third stripe
    p.scores[2, 40:, :] = 40.0        # past float's range within a step, from the second
    p.scores[3, 149, 259] = math.inf  # the last stripe's last cell
    return p


@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_scaled_stacked_forward_refused_items(end, grad, model):
    """Each refused item is taken again whole, and the items beside them keep their own results,
    bit for bit those of a batch without refusals (docs/spec.md)."""
    p = stacked_with_refusals(model, *end)
    got, got_grads = stacked_matches_cpu(p, grad)
    assert torch.isnan(got[1]) and got[3] == math.inf
    plain = stacked_with_refusals(model, *end)
    plain.scores[1:4] = torch.randn(3, STACKED["M"], STACKED["N"], dtype=torch.float64)
    again, again_grads = stacked_run(plain, grad)
    taken = [0, *range(4, STACKED["B"])]
    assert torch.equal(again[taken], got[taken])
    for name in got_grads:
        assert torch.equal(again_grads[name][taken], got_grads[name][taken]), name


def test_scaled_stacked_forward_repeats_bit_for_bit(grad, model):
    p = make_problem(model, "local", "soft", 0.5, **STACKED, penalties="item", lengths=True,
                     seed=9)
    runs = [stacked_run(p, grad) for _ in range(3)]
    for score, grads in runs[1:]:
        assert torch.equal(score, runs[0][0])
        for name in grads:
            assert torch.equal(grads[name], runs[0][1][name]), name


@pytest.mark.skipif("SOFTALIGN_CUDA_LOG_SPACE" in os.environ, reason="log space for every call")
@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_scaled_stacked_affine_forward_takes_ordinary_items(tmp_path, end):
    """Ordinary affine items of several stripes at t = 1 are taken by the stacked affine forward:
    most of those of more than one stripe differ in bits from the log-space forward (a refused
    item is the log-space forward's, bit for bit), all agree with it to float32 rounding. The
    threshold holds on an H100."""
    shape = dict(B=64, M=150, N=260)
    scaled, log_space = scaled_and_log_space(tmp_path, shape, 1.0, end=end, model="affine")
    p = make_problem("affine", *end, 1.0, penalties="item", lengths=True, seed=1, **shape)
    stacked = (p.lengths_a > 32) & (p.lengths_b > 0)
    assert int((scaled != log_space)[stacked].sum()) > 0.6 * int(stacked.sum())


LOG_SPACE_ONLY = """
import os
import sys
sys.path.insert(0, {test_py!r})
os.environ["SOFTALIGN_CUDA_LOG_SPACE"] = "1"  # before the first call, which reads it
import torch
import softalign
from problems import make_problem, problem_with_refusals
p = make_problem({model!r}, {mode!r}, {reduction!r}, {t!r}, penalties="item", lengths=True,
                 seed=1, **{shape!r}).on("cuda", torch.float32)
with torch.set_grad_enabled({grad!r}):
    score = softalign.smith_waterman(p.scores, **p.kwargs())
result = torch.autograd.grad(score.sum(), [p.scores])[0] if {grad!r} else score
torch.save(result.cpu(), {out!r})
"""


def scaled_and_log_space(tmp_path, shape, t=0.5, grad=False, end=("local", "soft"),
                         model="linear"):
    """One call's scores (with grad, its d score / d S) from the scaled forward and, in a fresh
    process with SOFTALIGN_CUDA_LOG_SPACE=1, from the log-space one; they must agree to float32
    rounding."""
    out = tmp_path / "log_space.pt"
    mode, reduction = end
    run_in_fresh_process(LOG_SPACE_ONLY.format(test_py=str(ROOT / "test_py"), out=str(out),
                                               shape=shape, t=t, grad=grad, mode=mode,
                                               reduction=reduction, model=model))
    log_space = torch.load(out)
    p = make_problem(model, mode, reduction, t, penalties="item", lengths=True, seed=1,
                     **shape)
    score, grads = stacked_run(p, grad)
    scaled = (grads["scores"] if grad else score).cpu()
    torch.testing.assert_close(scaled, log_space, rtol=2e-4, atol=2e-4)
    return scaled, log_space


@pytest.mark.skipif("SOFTALIGN_CUDA_LOG_SPACE" in os.environ, reason="log space for every call")
def test_log_space_only_keeps_the_log_space_forward(tmp_path, batch):
    """SOFTALIGN_CUDA_LOG_SPACE=1 sends the same call to the log-space forward, whose bits differ
    in some items (so that the variable is seen to act, and the call is seen to take the scaled
    forward)."""
    scaled, log_space = scaled_and_log_space(tmp_path, dict(B=batch(1500), M=32, N=29))
    assert not torch.equal(scaled, log_space)


@pytest.mark.skipif("SOFTALIGN_CUDA_LOG_SPACE" in os.environ, reason="log space for every call")
@pytest.mark.parametrize("t", [0.5, 1.0])
@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_log_space_only_keeps_the_stacked_forward_too(tmp_path, end, t, grad):
    """Items of several stripes: most of them differ in some bits (with grad, in d S), so that
    they are seen to be taken, not refused (a refused item is the log-space forward's, bit for
    bit); at t = 1 local items in chunks of 32 steps. Every end: the host takes the scaled
    forward (and with grad, the saving one) for each."""
    scaled, log_space = scaled_and_log_space(tmp_path, STACKED, t, grad, end)
    differ = (scaled != log_space).reshape(STACKED["B"], -1).any(1)
    assert int(differ.sum()) > STACKED["B"] // 2
