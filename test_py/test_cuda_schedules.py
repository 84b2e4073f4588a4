"""The CUDA backend's striped schedules (ops/cuda/kernel_traits.cuh) against the CPU backend, at the
shapes that pick each one: a warp per item (small batches), several items per warp (large
batches of short pairs), several stripes of one pair pipelined across warps (long pairs, a row
per lane), and taller stripes (many long pairs); lengths make items of one warp differ. The
float32 CPU backend is the reference here (test_properties checks it against the spec's float64
reference); CUDA must match it to float32 rounding, and repeat itself bit for bit."""
import math
import os

import pytest
import torch

import softalign
from problems import MODELS, evaluate, make_problem

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

# (B, M, N): the schedule with_shape (smith_waterman_cuda.cu) picks for it
SCHEDULES = {
    "warp_per_item": (5, 31, 40),
    "items_per_warp": (1100, 17, 23),
    "stripes_pipelined": (3, 300, 130),
    "long_rows_pipelined": (2, 200, 700),  # rows of 45 chunks: mostly the interior ones
    "many_stripes": (1, 1100, 33),
    "tall_stripes": (8100, 130, 9),
}
ENDS = [("local", "max", 1.0), ("local", "soft", 1.0), ("global", "max", 1.0),
        ("local", "max", 0.0)]


def cuda_and_cpu(model, shape, mode, reduction, t, penalties="item"):
    B, M, N = shape
    p = make_problem(model, mode, reduction, t, B=B, M=M, N=N, penalties=penalties,
                     lengths=True, seed=B + M + N)
    cpu = evaluate(softalign.smith_waterman, p.on("cpu", torch.float32))
    cuda = evaluate(softalign.smith_waterman, p.on("cuda", torch.float32))
    return cuda, cpu


def close(got, want, what):
    torch.testing.assert_close(got.cpu(), want, rtol=2e-4, atol=2e-4, equal_nan=True, msg=what)


@pytest.mark.parametrize("end", ENDS, ids=["-".join(map(str, e)) for e in ENDS])
@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("model", MODELS)
def test_cuda_schedule_matches_cpu(model, schedule, end):
    (score, grads), (want, want_grads) = cuda_and_cpu(model, SCHEDULES[schedule], *end)
    close(score, want, "score")
    if end[2] == 0.0:
        return  # t = 0: gradients follow argmax choices that rounding may flip
    for name in want_grads:
        close(grads[name], want_grads[name], f"d score / d {name}")


@pytest.mark.parametrize("end", ENDS[:3], ids=["-".join(map(str, e)) for e in ENDS[:3]])
@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("model", MODELS)
def test_cuda_schedule_masked_scores_match_cpu(model, schedule, end):
    """-inf scores (a mask) all over, and NaN and +inf in an item each: the adjoint then mixes
    its branch-free steps (every value finite or -inf) with its checked ones, step by step and
    warp by warp (kernel_traits.cuh, the plain steps)."""
    B, M, N = SCHEDULES[schedule]
    p = make_problem(model, *end, B=B, M=M, N=N, penalties="item", lengths=True, seed=B + N)
    gen = torch.Generator().manual_seed(M)
    p.scores[torch.rand(B, M, N, generator=gen, dtype=torch.float64) < 0.1] = -math.inf
    if B >= 2:  # in items of the whole block (make_problem keeps item 0's)
        p.lengths_a[1], p.lengths_b[1] = M, N
        p.scores[0, M // 2, N // 2] = math.nan
        p.scores[1, 0, N - 1] = math.inf
    cpu = evaluate(softalign.smith_waterman, p.on("cpu", torch.float32))
    cuda = evaluate(softalign.smith_waterman, p.on("cuda", torch.float32))
    close(cuda[0], cpu[0], "score")
    for name in cpu[1]:
        close(cuda[1][name], cpu[1][name], f"d score / d {name}")


@pytest.mark.parametrize("schedule", ["items_per_warp", "stripes_pipelined"])
@pytest.mark.parametrize("model", MODELS)
def test_cuda_schedule_repeats_bit_for_bit(model, schedule):
    B, M, N = SCHEDULES[schedule]
    p = make_problem(model, "local", "soft", 1.0, B=B, M=M, N=N, penalties="0d", lengths=True,
                     seed=7).on("cuda", torch.float32)
    runs = [evaluate(softalign.smith_waterman, p) for _ in range(3)]
    for score, grads in runs[1:]:
        assert torch.equal(score, runs[0][0])
        for name in grads:
            assert torch.equal(grads[name], runs[0][1][name]), name


# Large batches of short pairs, forward without grad: for the affine model the streamed forward
# (log_space/streamed.cuh), a group of 16 lanes sweeping several items back to back. It takes a call when
# the batch gives every group at least two items whatever the occupancy (70000 items: at least 4
# per group) and an item's N + 1 columns are at least the group's lanes (N = 15 the threshold,
# N = 7 falls back to the striped forward). Both models take their scaled forwards here at t > 0
# (prob_space/linear_forward.cuh, prob_space/affine_forward.cuh; test_cuda_probability_space.py and
# test_cuda_probability_space_affine.py, whose test_scaled_affine_forward_agrees_with_streamed runs
# the streamed forward at t > 0 with SOFTALIGN_CUDA_LOG_SPACE=1): the affine streamed forward's
# cases below are those at t = 0.
STREAMED = [(70000, 17, 23), (70000, 32, 15), (70000, 5, 7), (70000, 32, 32)]


@pytest.mark.parametrize("model", MODELS)
def test_cuda_penalty_gradients_of_several_stripes_do_not_depend_on_the_batch(model):
    """docs/spec.md: results do not depend on batch size. (16, 8192, 16) and (1, 8192, 16) take the same
    schedule (a warp a stripe, 256 stripes), whose stripes' partial penalty gradients the host
    added with at::sum, whose tree depends on how many items it reduces:
    each item alone must get its gradients of the batch bit for bit."""
    p = make_problem(model, "local", "soft", 1.0, B=16, M=8192, N=16, penalties="item", seed=34)
    score, grads = evaluate(softalign.smith_waterman, p.on("cuda", torch.float32))
    for b in range(16):
        q = p.on("cpu")
        q.scores, q.gap_open = q.scores[b:b + 1], q.gap_open[b:b + 1]
        if q.gap_extend is not None:
            q.gap_extend = q.gap_extend[b:b + 1]
        alone, alone_grads = evaluate(softalign.smith_waterman, q.on("cuda", torch.float32))
        assert torch.equal(alone[0], score[b]), b
        for name in grads:
            assert torch.equal(alone_grads[name][0], grads[name][b]), (b, name)


@pytest.mark.skipif(not torch.cuda.is_available() or
                    torch.cuda.get_device_properties(0).total_memory < 60 * 2**30 or
                    not os.environ.get("SOFTALIGN_HOURS_LONG_TESTS"),
                    reason="needs about 45 GiB of device memory, and minutes: one thread sweeps "
                           "the row (set SOFTALIGN_HOURS_LONG_TESTS=1)")
def test_cuda_row_of_2_31_minus_2_columns():
    """make_problem takes N < 2^31, where the striped kernels' N + 32 steps overflowed int (no
    cell swept: 0): such rows go to the general path, whose one thread per item takes minutes
    over 2^31 cells (still running after 150 s on an H100), so this runs only when asked for."""
    N = 2**31 - 2
    scores = torch.full((1, 1, N), -1.0, device="cuda")
    scores[0, 0, -1] = 5.0
    assert softalign.smith_waterman(scores, -1.0, temperature=0.0).item() == 5.0


@pytest.mark.parametrize("masked", [False, True], ids=["plain", "masked"])
@pytest.mark.parametrize("end", ENDS, ids=["-".join(map(str, e)) for e in ENDS])
@pytest.mark.parametrize("shape", STREAMED, ids=["x".join(map(str, s)) for s in STREAMED])
@pytest.mark.parametrize("model", MODELS)
def test_cuda_streamed_forward_matches_cpu(model, shape, end, masked):
    """Lengths (0 included) make items of one group differ; masked: -inf scores all over, and a
    NaN and a +inf in items in the middle of a group."""
    B, M, N = shape
    p = make_problem(model, *end, B=B, M=M, N=N, penalties="item", lengths=True, seed=M + N)
    if masked:
        gen = torch.Generator().manual_seed(N)
        p.scores[torch.rand(B, M, N, generator=gen, dtype=torch.float64) < 0.1] = -math.inf
        p.scores[1001, M // 2, N // 2] = math.nan
        p.scores[2002, 0, N - 1] = math.inf
        p.lengths_a[1001:2003] = M
        p.lengths_b[1001:2003] = N
    assert_forward_without_grad_matches_cpu(p)


# Long pairs, forward without grad (a warp a stripe of 32 rows): linear at t = 1 in the scaled
# forward (prob_space/linear_forward.cuh, chunks of 16 steps, the ring a chunk's columns at a time) and at t = 0 in
# log space (kernel_traits.cuh, the ring streamed by RingStream); affine in log space, the ring's three
# planes a chunk's columns at a time. Items of different stripe counts in one call (lengths), rows
# of 700 columns, N + 1 odd and even, and n + 32 a multiple of 16 (N = 96 without lengths: the
# stripes' steps end with a whole chunk).
LONG = [(3, 300, 130), (1, 1100, 33), (2, 200, 700), (6, 70, 96)]


@pytest.mark.parametrize("lengths", [True, False], ids=["lengths", "whole"])
@pytest.mark.parametrize("end", ENDS, ids=["-".join(map(str, e)) for e in ENDS])
@pytest.mark.parametrize("shape", LONG, ids=["x".join(map(str, s)) for s in LONG])
@pytest.mark.parametrize("model", MODELS)
def test_cuda_long_forward_without_grad_matches_cpu(model, shape, end, lengths):
    B, M, N = shape
    p = make_problem(model, *end, B=B, M=M, N=N, penalties="item", lengths=lengths, seed=M + N)
    assert_forward_without_grad_matches_cpu(p)


def assert_forward_without_grad_matches_cpu(p):
    """CUDA's forward without grad against the CPU's, and again bit for bit."""
    cpu, cuda = p.on("cpu", torch.float32), p.on("cuda", torch.float32)
    with torch.no_grad():
        want = softalign.smith_waterman(cpu.scores, **cpu.kwargs())
        got = softalign.smith_waterman(cuda.scores, **cuda.kwargs())
        again = softalign.smith_waterman(cuda.scores, **cuda.kwargs())
    close(got, want, "score")
    torch.testing.assert_close(again, got, rtol=0, atol=0, equal_nan=True)  # bit for bit
