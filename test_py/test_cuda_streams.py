"""Number penalties on a GPU across streams. The library keeps the device tensor of the first
few numbers for the process (problem.cpp, cuda_number), filled on the stream of the number's
first use; a call on another stream must wait for that fill rather than read the tensor early.
The check runs in a fresh process, so that the number's first use is the one made here."""
import pytest
import torch

from fresh_process import run_in_fresh_process

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

FIRST_USE_ON_A_SIDE_STREAM = r"""
import torch
import softalign

softalign.load_library()
S = torch.randn(6, 20, 30, device="cuda", generator=torch.Generator("cuda").manual_seed(3))
value = -0.73125  # first used here, in this process
want = softalign.smith_waterman(S.cpu(), gap_open=value)
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    torch.cuda._sleep(100_000_000)  # the fill of the number, queued behind it, runs late
    on_side = softalign.smith_waterman(S, gap_open=value)
# The current stream does not wait for `side`: only the kept number's event orders the fill.
got = softalign.smith_waterman(S, gap_open=value)
torch.cuda.synchronize()
print("max error", float((got.cpu() - want).abs().max()), float((on_side.cpu() - want).abs().max()))
assert torch.allclose(got.cpu(), want, rtol=2e-4, atol=2e-4), (got, want)
assert torch.allclose(on_side.cpu(), want, rtol=2e-4, atol=2e-4), (on_side, want)
"""


def test_cuda_number_first_filled_on_another_stream():
    run_in_fresh_process(FIRST_USE_ON_A_SIDE_STREAM)
