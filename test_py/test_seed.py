"""The default call reproduces the seed's PyTorch loop (docs/spec.md: to float32 rounding)."""
import pytest
import torch

from conftest import DEVICES
from reference import seed_loop

TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-10}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_default_call_equals_seed_loop(dtype, device):
    gen = torch.Generator().manual_seed(2024)
    scores = torch.randn(16, 32, 32, generator=gen, dtype=dtype)
    expected_in = scores.clone().requires_grad_()
    expected = seed_loop(expected_in, -1.0, temperature=1.0)
    (expected_grad,) = torch.autograd.grad(expected.sum(), expected_in)

    got_in = scores.to(device).requires_grad_()
    got = torch.ops.softalign.smith_waterman(got_in, -1.0, temperature=1.0)  # the seed's call
    (got_grad,) = torch.autograd.grad(got.sum(), got_in)

    rtol = TOLERANCE[dtype]
    torch.testing.assert_close(got.detach().cpu(), expected.detach(), rtol=rtol, atol=0)
    torch.testing.assert_close(got_grad.cpu(), expected_grad, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("temperature", [0.1, 2.5])
def test_seed_loop_at_other_temperatures(temperature):
    scores = torch.randn(4, 9, 7, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    expected = seed_loop(scores, -0.6, temperature)
    got = torch.ops.softalign.smith_waterman(scores, -0.6, temperature=temperature)
    torch.testing.assert_close(got, expected, rtol=1e-10, atol=0)
