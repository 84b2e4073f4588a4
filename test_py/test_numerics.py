"""Numerical edges: extreme temperatures and scores, -inf masks, length 8192 in float32,
NaN confined to its item, batch-composition independence and bit-identical repeated runs.
Every test asserts the numbers it checks: against the float64 reference, a closed form, an exact
integer dynamic programme, or a bit-for-bit rerun."""
import math

import numpy as np
import pytest
import torch

import softalign
from conftest import DEVICES
from problems import MODELS, MODES, Problem, assert_matches_reference, evaluate, make_problem
from reference import reference

# (mode, reduction) pairs that mean something different (reduction applies to local only).
ENDS = [("local", "max"), ("local", "soft"), ("global", "max")]


def alignment_counts(m, n):
    """Number of alignments of an (m, n) pair: linear gaps (every lattice path, the Delannoy
    number) and affine gaps (the spec's three states, Y never followed by X), counted exactly."""
    lin = [[1] * (n + 1) for _ in range(m + 1)]
    for i in range(1, m + 1):
        for j in range(1, n + 1):
            lin[i][j] = lin[i - 1][j - 1] + lin[i - 1][j] + lin[i][j - 1]
    A = [[0] * (n + 1) for _ in range(m + 1)]
    X = [[0] * (n + 1) for _ in range(m + 1)]
    Y = [[0] * (n + 1) for _ in range(m + 1)]
    A[0][0] = 1
    for i in range(m + 1):
        for j in range(n + 1):
            if i and j:
                A[i][j] = A[i - 1][j - 1] + X[i - 1][j - 1] + Y[i - 1][j - 1]
            if i:
                X[i][j] = A[i - 1][j] + X[i - 1][j]
            if j:
                Y[i][j] = A[i][j - 1] + X[i][j - 1] + Y[i][j - 1]
    return lin[m][n], A[m][n] + X[m][n] + Y[m][n]


# ------------------------------------------------------------------------------ temperatures

@pytest.mark.parametrize("temperature", [1e-4, 1e4])
@pytest.mark.parametrize("model", MODELS)
def test_zero_scores_count_the_alignments(model, temperature):
    """S = 0, zero penalties: the global score is t * log(#alignments) exactly, at any t."""
    M, N = 4, 5
    gap_extend = 0.0 if model == "affine" else None
    got = softalign.smith_waterman(torch.zeros(M, N, dtype=torch.float64), 0.0, gap_extend=gap_extend,
                                   temperature=temperature, mode="global")
    linear, affine = alignment_counts(M, N)
    assert linear == 681  # the Delannoy number D(4, 5)
    count = affine if model == "affine" else linear
    assert got.item() == pytest.approx(temperature * math.log(count), rel=1e-12)


@pytest.mark.parametrize("temperature", [1e-4, 1e4])
@pytest.mark.parametrize("end", ENDS, ids=["-".join(e) for e in ENDS])
@pytest.mark.parametrize("model", MODELS)
def test_extreme_temperatures_match_the_reference(model, end, temperature):
    mode, reduction = end
    p = make_problem(model, mode, reduction, temperature, B=2, M=3, N=4, penalties="item",
                     lengths=True, seed=21)
    assert_matches_reference(p)
    p32 = p.on("cpu", torch.float32).on("cpu")  # the float32 inputs, in float64 for the reference
    assert_matches_reference(p32, dtype=torch.float32, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("model", MODELS)
def test_low_temperature_is_within_t_log_count_of_the_classic_score(model):
    """0 <= smax_t - max <= t * log(#alignments): at t = 1e-4 the soft score is the classic one."""
    S = torch.randint(-4, 6, (6, 7), generator=torch.Generator().manual_seed(5)).double()
    gap_extend = -1.0 if model == "affine" else None
    t = 1e-4
    for mode in MODES:
        hard = softalign.smith_waterman(S, -2.0, gap_extend=gap_extend, temperature=0.0, mode=mode).item()
        soft = softalign.smith_waterman(S, -2.0, gap_extend=gap_extend, temperature=t, mode=mode,
                                        reduction="soft" if mode == "local" else "max").item()
        # Far more terms than alignments (3 choices per step, any start and end cell).
        bound = t * ((6 + 7) * math.log(3) + 2 * math.log(6 * 7 + 1))
        assert hard <= soft <= hard + bound, (mode, hard, soft)


def test_temperature_outside_the_compute_dtype_range_is_an_error():
    """Found by test_fuzz: t = 1e39 became inf in float32 and t = 1e-40 overflowed 1 / t; both
    returned NaN. Now a clear error naming temperature (t = 0 stays the hard recurrence)."""
    S = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    for dtype, bad in [(torch.float32, 1e39), (torch.float32, 1e-40), (torch.float16, 1e-39),
                       (torch.bfloat16, 1e300), (torch.float64, 1e-310)]:
        with pytest.raises(RuntimeError, match="temperature must be 0 or within"):
            softalign.smith_waterman(S.to(dtype), temperature=bad)
    # The edges of the range work and give the reference's numbers (ties split evenly).
    for dtype, t in [(torch.float32, 1.2e-38), (torch.float32, 1e38), (torch.float64, 1e-300),
                     (torch.float64, 1e300)]:
        for model in MODELS:
            p = Problem(S.double().unsqueeze(0), -1.0, -1.0 if model == "affine" else None, t,
                        mode="global")
            p = p.on("cpu", dtype).on("cpu")
            assert_matches_reference(p, dtype=dtype, rtol=1e-6, atol=0)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_plus_inf_score_propagates_through_the_max_end(dtype, model):
    S = torch.zeros(1, 2, 2, dtype=dtype)
    S[0, 0, 0] = math.inf
    gap_extend = -0.5 if model == "affine" else None
    assert softalign.smith_waterman(S, -1.0, gap_extend=gap_extend, reduction="max").item() == math.inf
    assert softalign.smith_waterman(S, -1.0, gap_extend=gap_extend, mode="global").item() == math.inf


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_plus_inf_score_propagates_through_the_soft_end(dtype, model, device):
    """Several +inf cells in the soft end: exp(inf - inf) made the sum NaN. The item beside it keeps
    finite gradients, also where the per-item route scales the +inf item's kept gradient by a grad
    of 0."""
    S = torch.zeros(2, 2, 2, dtype=dtype)
    S[0, 0, 0] = math.inf  # H (or A) is +inf at (1, 1) and at every cell it reaches
    gap_extend = -0.5 if model == "affine" else None
    assert reference(S[:1].double(), -1.0, gap_extend, reduction="soft").item() == math.inf
    leaf = S.to(device).requires_grad_()
    score = softalign.smith_waterman(leaf, -1.0, gap_extend=gap_extend, reduction="soft")
    assert score[0].item() == math.inf
    (grad,) = torch.autograd.grad(score[1], leaf)  # item 1 alone
    assert torch.isfinite(grad).all()


@pytest.mark.parametrize("dtype, t", [(torch.float32, 1e-6), (torch.float64, 1e-15)])
def test_soft_end_gradient_at_temperatures_near_the_rounding_of_the_score(dtype, t):
    # gap 0: H[1][1] = H[1][2] = H[2][1] = 2 tie, so the soft end weighs several cells.
    S = torch.tensor([[[2.0, -1.0, -3.0], [-1.0, -2.0, -1.0], [-3.0, -1.0, -2.0]]])
    leaf = S.double().requires_grad_()
    (expected,) = torch.autograd.grad(reference(leaf, 0.0, temperature=t, reduction="soft").sum(),
                                      leaf)
    assert expected[0, 0, 0].item() == pytest.approx(1.0, abs=1e-12)  # every path starts at S[0][0]
    _, alignment = softalign.smith_waterman_alignment(S.to(dtype), 0.0, temperature=t,
                                                      reduction="soft")
    torch.testing.assert_close(alignment.double(), expected, rtol=0, atol=1e-3)


# ------------------------------------------------------------------------------ large scores

@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("end", ENDS, ids=["-".join(e) for e in ENDS])
@pytest.mark.parametrize("model", MODELS)
def test_scores_of_magnitude_1e4(model, end, dtype):
    mode, reduction = end
    p = make_problem(model, mode, reduction, 1.0, B=2, M=4, N=4, penalties="item", seed=31)
    p.scores = p.scores * 1e4
    p.gap_open = p.gap_open * 1e4
    if p.gap_extend is not None:
        p.gap_extend = p.gap_extend * 1e4
    p = p.on("cpu", dtype).on("cpu")  # the inputs rounded to dtype, in float64 for the reference
    assert p.scores.abs().max() > 5e3
    expected, expected_grads = evaluate(reference, p.on("cpu"))
    got, got_grads = evaluate(softalign.smith_waterman, p.on("cpu", dtype))
    tol = 1e-12 if dtype == torch.float64 else 1e-6
    torch.testing.assert_close(got.double(), expected, rtol=tol, atol=0)
    for name in expected_grads:  # t = 1 against scores of 1e4: one path carries all the weight
        torch.testing.assert_close(got_grads[name].double(), expected_grads[name], rtol=0,
                                   atol=tol * 1e4, msg=name)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_integer_scores_of_1e4_at_t0_are_exact(dtype):
    from reference import classic_gotoh_global, classic_sw
    S = torch.randint(-10000, 10001, (9, 8), generator=torch.Generator().manual_seed(2))
    rows = S.double().tolist()
    got = softalign.smith_waterman(S.to(dtype), -3000.0, temperature=0.0)
    assert got.item() == classic_sw(rows, -3000.0)
    got = softalign.smith_waterman(S.to(dtype), -5000.0, gap_extend=-1000.0, temperature=0.0, mode="global")
    assert got.item() == classic_gotoh_global(rows, -5000.0, -1000.0)


# ------------------------------------------------------------------------------ -inf masks

@pytest.mark.parametrize("temperature", [0.0, 0.7])
@pytest.mark.parametrize("end", ENDS, ids=["-".join(e) for e in ENDS])
@pytest.mark.parametrize("model", MODELS)
def test_minus_inf_whole_rows_and_items(model, end, temperature):
    mode, reduction = end
    p = make_problem(model, mode, reduction, temperature, B=3, M=4, N=5, seed=41)
    p.scores[0, 1, :] = -math.inf  # a[1] may not be matched: it must be gapped or left out
    p.scores[1, :, 2] = -math.inf  # b[2] likewise
    p.scores[2] = -math.inf        # the whole item: no match at all
    assert_matches_reference(p)


@pytest.mark.parametrize("model", MODELS)
def test_minus_inf_item_scores_are_the_gap_only_alignments(model):
    """A whole item of -inf scores at t = 0: local affine scores 0 (no match is possible);
    global scores the all-gap alignment, (m + n) g, or 2 o + (m + n - 2) e (X then Y)."""
    m, n, o, e = 4, 3, -2.0, -0.5
    S = torch.full((2, m, n), -math.inf, dtype=torch.float64, requires_grad=True)
    gap_extend = e if model == "affine" else None
    glob = softalign.smith_waterman(S, o, gap_extend=gap_extend, temperature=0.0, mode="global")
    expected = 2 * o + (m + n - 2) * e if model == "affine" else (m + n) * o
    assert glob.tolist() == [expected, expected]
    (grad,) = torch.autograd.grad(glob.sum(), S)
    assert grad.abs().sum().item() == 0.0
    loc = softalign.smith_waterman(S, o, gap_extend=gap_extend, temperature=1.0, reduction="soft")
    if model == "affine":
        assert loc.tolist() == [0.0, 0.0]
    (grad,) = torch.autograd.grad(loc.sum(), S)
    assert grad.abs().sum().item() == 0.0


def test_minus_inf_row_equals_dropping_the_residue_when_gaps_are_free_at_t0():
    """With zero gap penalties a forbidden row changes nothing but that row: the local score
    is the score of S with the row removed."""
    S = torch.randint(-3, 5, (7, 6), generator=torch.Generator().manual_seed(3)).double()
    masked = S.clone()
    masked[3] = -math.inf
    dropped = torch.cat([S[:3], S[4:]])
    got = softalign.smith_waterman(masked, 0.0, temperature=0.0)
    assert got.item() == softalign.smith_waterman(dropped, 0.0, temperature=0.0).item()


# ------------------------------------------------------------------------------ length 8192

def classic_linear(S, g, local):
    """Exact Smith-Waterman / Needleman-Wunsch with integer numpy arrays, one row at a time:
    H[i][j] = max(T[j], H[i][j-1] + g) is a running max of T[k] - k g, shifted back by j g."""
    M, N = S.shape
    k = np.arange(N + 1, dtype=np.int64)
    prev = np.zeros(N + 1, dtype=np.int64) if local else k * g
    best = 0
    for i in range(1, M + 1):
        T = np.empty(N + 1, dtype=np.int64)
        T[0] = 0 if local else i * g
        T[1:] = np.maximum(prev[:-1] + S[i - 1], prev[1:] + g)
        if local:
            T[1:] = np.maximum(T[1:], 0)
        cur = np.maximum.accumulate(T - k * g) + k * g
        best = max(best, int(cur[1:].max()))
        prev = cur
    return best if local else int(prev[N])


def classic_affine(S, o, e, local):
    """Exact Gotoh (the spec's A, X, Y) with integer numpy arrays, one row at a time; Y's run along
    the row is a running max like classic_linear's."""
    M, N = S.shape
    NEG = np.int64(-(1 << 50))  # -inf for integers, far below any reachable score
    k = np.arange(N + 1, dtype=np.int64)
    A = np.full(N + 1, NEG)
    X = np.full(N + 1, NEG)
    Y = np.full(N + 1, NEG)
    if not local:
        A[0] = 0
        Y[1:] = o + (k[1:] - 1) * e
    best = 0
    for i in range(1, M + 1):
        An = np.full(N + 1, NEG)
        Xn = np.full(N + 1, NEG)
        start = np.maximum(np.maximum(A[:-1], X[:-1]), Y[:-1])
        if local:
            start = np.maximum(start, 0)
        An[1:] = S[i - 1] + start
        Xn = np.maximum(A + o, X + e)
        if local:
            Xn[0] = NEG
        # Y[j] = max over k < j of max(A[k], X[k]) + o + (j - 1 - k) e
        U = np.maximum(An, Xn) - k * e
        run = np.maximum.accumulate(U)
        Yn = np.full(N + 1, NEG)
        Yn[1:] = run[:-1] + o + (k[1:] - 1) * e
        Yn = np.maximum(Yn, NEG)
        A, X, Y = An, Xn, Yn
        best = max(best, int(A[1:].max()))
    return best if local else int(max(A[N], X[N], Y[N]))


LONG_SHAPES = [(8192, 64), (64, 8192)]


def test_exact_integer_dps_agree_with_the_reference_on_small_inputs():
    """The vectorised checkers of the long tests against reference.py's plain-python ones."""
    from reference import classic_gotoh_global, classic_gotoh_local, classic_nw, classic_sw
    gen = torch.Generator().manual_seed(0)
    for M, N in [(1, 1), (3, 7), (8, 2), (6, 6)]:
        S = torch.randint(-4, 6, (M, N), generator=gen)
        rows, Sn = S.double().tolist(), S.numpy().astype(np.int64)
        assert classic_linear(Sn, -2, True) == classic_sw(rows, -2.0)
        assert classic_linear(Sn, -2, False) == classic_nw(rows, -2.0)
        assert classic_affine(Sn, -5, -1, True) == classic_gotoh_local(rows, -5.0, -1.0)
        assert classic_affine(Sn, -5, -1, False) == classic_gotoh_global(rows, -5.0, -1.0)


@pytest.mark.parametrize("shape", LONG_SHAPES, ids=["8192x64", "64x8192"])
@pytest.mark.parametrize("model", MODELS)
def test_length_8192_float32_at_t0_is_exact(model, shape):
    S = torch.randint(-4, 6, shape, generator=torch.Generator().manual_seed(8))
    Sn = S.numpy().astype(np.int64)
    for mode in MODES:
        if model == "affine":
            got = softalign.smith_waterman(S.float(), -5.0, gap_extend=-1.0, temperature=0.0, mode=mode)
            expected = classic_affine(Sn, -5, -1, mode == "local")
        else:
            got = softalign.smith_waterman(S.float(), -2.0, temperature=0.0, mode=mode)
            expected = classic_linear(Sn, -2, mode == "local")
        assert got.item() == expected, mode


@pytest.mark.parametrize("shape", LONG_SHAPES, ids=["8192x64", "64x8192"])
def test_length_8192_float32_hard_alignment_is_an_optimal_path(shape):
    """At t = 0 the alignment (d score / d S) is one local path whose own score is the optimum:
    sum of aligned S plus g for every residue of its span left unaligned."""
    S = torch.randint(-4, 6, shape, generator=torch.Generator().manual_seed(9)).float()
    score, alignment = softalign.smith_waterman_alignment(S, -2.0, temperature=0.0)
    pairs = alignment.nonzero()
    assert set(alignment.unique().tolist()) == {0.0, 1.0}
    assert (pairs.diff(dim=0) > 0).all()  # strictly increasing in i and j: one path
    k = len(pairs)
    span = (pairs[-1] - pairs[0] + 1).sum().item()
    path_score = (S * alignment).sum().item() - 2.0 * (span - 2 * k)
    assert path_score == score.item() == classic_linear(S.long().numpy(), -2, True)


@pytest.mark.parametrize("shape", LONG_SHAPES, ids=["8192x64", "64x8192"])
@pytest.mark.parametrize("model", MODELS)
def test_length_8192_float32_soft_matches_float64(model, shape):
    """float32 over 8192 rows or columns against float64. Each step rounds the DP values, so
    the weights exp((x - max) / t) are off by about eps32 * |H| / t: tiny for local scores
    (|H| ~ 50), ~1e-3 for global ones (|H| ~ 1e4 after 8192 gaps)."""
    eps32 = torch.finfo(torch.float32).eps
    S = torch.randn((1,) + shape, generator=torch.Generator().manual_seed(10), dtype=torch.float64)
    gap_extend = -0.5 if model == "affine" else None
    t = 0.5
    for mode, reduction in ENDS:
        kw = dict(gap_open=-1.5, gap_extend=gap_extend, temperature=t, mode=mode,
                  reduction=reduction)
        s64, a64 = softalign.smith_waterman_alignment(S, **kw)
        s32, a32 = softalign.smith_waterman_alignment(S.float(), **kw)
        assert s32.dtype == a32.dtype == torch.float32
        magnitude = s64.abs().max().item()
        assert (magnitude < 100) == (mode == "local")
        torch.testing.assert_close(s32.double(), s64, rtol=1e-6 if mode == "local" else 5e-5,
                                   atol=0)
        torch.testing.assert_close(a32.double(), a64, rtol=0, atol=10 * eps32 * magnitude / t)
        assert a32.min() >= 0 and a32.max() <= 1 + 1e-6
        if mode == "global":  # every row (the longer side) is aligned or gapped exactly once
            assert a64.sum().item() <= min(shape) + 1e-9


# ------------------------------------------------------------------------------ NaN

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("where", ["scores", "gap_open", "gap_extend"])
@pytest.mark.parametrize("end", ENDS, ids=["-".join(e) for e in ENDS])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_nan_is_confined_to_its_item(dtype, end, where, device):
    """A NaN in item 1's scores or per-item penalty: item 1 scores NaN; every other item's value
    and gradients are bit-identical to the run without the NaN."""
    mode, reduction = end
    for temperature in (0.0, 0.8):
        clean = make_problem("affine", mode, reduction, temperature, B=4, M=5, N=6,
                             penalties="item", lengths=True, seed=51).on(device, dtype)
        dirty = make_problem("affine", mode, reduction, temperature, B=4, M=5, N=6,
                             penalties="item", lengths=True, seed=51)
        dirty.lengths_a[1], dirty.lengths_b[1] = 5, 6
        clean.lengths_a[1], clean.lengths_b[1] = 5, 6
        target = {"scores": dirty.scores[1], "gap_open": dirty.gap_open,
                  "gap_extend": dirty.gap_extend}[where]
        if where == "scores":
            target[2, 3] = math.nan
        else:
            target[1] = math.nan
        dirty = dirty.on(device, dtype)
        v0, g0 = evaluate(softalign.smith_waterman, clean)
        v1, g1 = evaluate(softalign.smith_waterman, dirty)
        assert torch.isnan(v1[1]) and not torch.isnan(v0).any()
        keep = [0, 2, 3]
        assert torch.equal(v1[keep], v0[keep])
        for name in g0:
            assert torch.equal(g1[name][keep], g0[name][keep]), name
            assert torch.isfinite(g1[name][keep]).all(), name


# ------------------------------------------------------------------------------ determinism

def alone_and_together(p: Problem, b):
    """Item b of p as a batch of its own (per-item tensors sliced)."""
    def item(x):
        return x[b:b + 1] if torch.is_tensor(x) and x.dim() >= 1 else x
    q = Problem(item(p.scores), item(p.gap_open), item(p.gap_extend), p.temperature,
                item(p.lengths_a), item(p.lengths_b), p.mode, p.reduction)
    return q


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("end", ENDS, ids=["-".join(e) for e in ENDS])
@pytest.mark.parametrize("model", MODELS)
def test_item_alone_equals_item_in_any_batch(model, end, dtype, device):
    """Bit for bit: an item's score and gradients do not depend on the batch around it (its
    size, its position, its neighbours' lengths), whatever the backend vectorises across."""
    mode, reduction = end
    B = 37  # odd: covers any SIMD width's remainder and uneven thread chunks
    p = make_problem(model, mode, reduction, 0.6, B=B, M=9, N=11, penalties="item",
                     lengths=True, seed=61).on(device, dtype)
    score, grads = evaluate(softalign.smith_waterman, p)
    _, alignment = softalign.smith_waterman_alignment(p.scores.detach(), **p.kwargs())
    for b in [0, 1, 7, 8, 15, 16, 31, 36]:
        q = alone_and_together(p, b)
        q = Problem(*(x.detach().requires_grad_() if torch.is_tensor(x) and x.is_floating_point()
                      else x for x in (q.scores, q.gap_open, q.gap_extend)), q.temperature,
                    q.lengths_a, q.lengths_b, q.mode, q.reduction)
        s1, g1 = evaluate(softalign.smith_waterman, q)
        assert torch.equal(s1[0], score[b]), b
        for name in grads:
            assert torch.equal(g1[name][0], grads[name][b]), (b, name)
        _, a1 = softalign.smith_waterman_alignment(q.scores.detach(), **q.kwargs())
        assert torch.equal(a1[0], alignment[b]), b


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("model", MODELS)
def test_repeated_runs_are_bit_identical(model, dtype, device):
    p = make_problem(model, "local", "soft", 0.5, B=64, M=17, N=23, penalties="position",
                     lengths=True, seed=71).on(device, dtype)
    first, first_grads = evaluate(softalign.smith_waterman, p)
    for _ in range(3):
        again, again_grads = evaluate(softalign.smith_waterman, p)
        assert torch.equal(again, first)
        for name in first_grads:
            assert torch.equal(again_grads[name], first_grads[name]), name
