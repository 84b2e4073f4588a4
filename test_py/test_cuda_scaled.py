"""The CUDA backend's scaled forward (ops/cuda/scaled.cuh): the short pairs' linear forward
without grad at t > 0 (B > 1024, M <= 32), evaluated in probability space, each row's values
with an exponent of their own; the items it refuses are redone in log space by a second launch.
Against the CPU backend in float64: temperatures from 0.05 to 100, long rows (the exponents
move by thousands), and items built to be refused (exp(s / t) past float's range, NaN and +inf
scores, gaps whose exp(g / t) vanishes) among items it takes, so that each launch must write
its own items and only those."""
import math

import pytest
import torch

import softalign
from fresh_process import ROOT, run_in_fresh_process
from problems import make_problem

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

ENDS = [("local", "max"), ("local", "soft"), ("global", "max")]
END_IDS = ["-".join(e) for e in ENDS]


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
def test_scaled_forward_matches_cpu(end, t):
    p = make_problem("linear", *end, t, B=1500, M=32, N=29, penalties="item", lengths=True,
                     seed=int(10 * t))
    assert_matches_cpu(p)


@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_scaled_forward_long_rows(end):
    """3000 columns at t = 0.1: the global values fall by about 40000 powers of two along a row,
    the local ones rise and fall back with each alignment."""
    p = make_problem("linear", *end, 0.1, B=1100, M=9, N=3000, penalties="item", lengths=True,
                     seed=3)
    p.scores += 0.3  # longer alignments: local values that rise far
    assert_matches_cpu(p)


@pytest.mark.parametrize("end", ENDS, ids=END_IDS)
def test_scaled_forward_refused_items(end):
    B, M, N = 1500, 20, 25
    p = make_problem("linear", *end, 1.0, B=B, M=M, N=N, penalties="item", lengths=True, seed=5)
    p.lengths_a[10:20], p.lengths_b[10:20] = M, N
    p.scores[10] *= 1e3             # exp(s / t) overflows
    p.scores[11] = 100.0            # and here for every cell
    p.scores[12, 3, 4] = math.nan
    p.scores[13, 0, N - 1] = math.inf
    p.scores[14, :, 5] = -math.inf  # taken: E = 0, as in log space
    p.gap_open[15] = -500.0         # exp(g / t) vanishes
    p.gap_open[16] = 200.0          # and overflows
    p.scores[17, :, :] = -30.0      # E underflows: taken (SPEC's values follow the gaps)
    p.scores[18, 5:, :] = 40.0      # values past float's range within one step
    got = assert_matches_cpu(p)
    assert torch.isnan(got[12])  # and every other item as the CPU has it


def test_scaled_forward_repeats_bit_for_bit():
    p = make_problem("linear", "local", "soft", 0.5, B=3000, M=32, N=32, penalties="item",
                     lengths=True, seed=9).on("cuda", torch.float32)
    with torch.no_grad():
        runs = [softalign.smith_waterman(p.scores, **p.kwargs()) for _ in range(3)]
    for again in runs[1:]:
        assert torch.equal(again, runs[0])


LOG_SPACE_ONLY = f"""
import os
import sys
sys.path.insert(0, {str(ROOT / "test_py")!r})
os.environ["SOFTALIGN_CUDA_LOG_SPACE"] = "1"  # before the first call, which reads it
import torch
import softalign
from problems import make_problem
for mode, reduction in [("local", "soft"), ("global", "max")]:
    p = make_problem("linear", mode, reduction, 0.5, B=1500, M=32, N=29, penalties="item",
                     lengths=True, seed=1)
    q = p.on("cuda", torch.float32)
    with torch.no_grad():
        got = softalign.smith_waterman(q.scores, **q.kwargs())
        want = softalign.smith_waterman(p.scores, **p.kwargs())
    torch.testing.assert_close(got.cpu().double(), want, rtol=2e-4, atol=2e-4)
"""


def test_log_space_only_keeps_the_log_space_forward():
    """SOFTALIGN_CUDA_LOG_SPACE=1 sends the same calls to the log-space forward, which must
    match the CPU backend as well."""
    run_in_fresh_process(LOG_SPACE_ONLY)
