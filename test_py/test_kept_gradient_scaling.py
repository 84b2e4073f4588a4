"""softalign::_scale_by_item, the backward of a kept gradient: values (B, ...) times factors (B,).

CUDA has a kernel of its own (16-byte accesses where an item is a whole number of them, else
one float at a time); the other backends use PyTorch's broadcast multiply. Both must equal it.
"""
import pytest
import torch

from conftest import DEVICES

scale_by_item = torch.ops.softalign._scale_by_item


def expected(values, factors):
    return values * factors.reshape(-1, *([1] * (values.dim() - 1)))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(3, 4, 8), (5, 3, 7), (1, 1, 1), (2, 33, 65), (0, 4, 4),
                                   (3, 0, 4), (4, 16)])
def test_matches_broadcast_multiply(shape, device):
    g = torch.Generator().manual_seed(0)
    values = torch.randn(shape, generator=g).to(device)
    factors = torch.randn(shape[0], generator=g).to(device)
    out = scale_by_item(values, factors)
    assert out.shape == values.shape and out.dtype == values.dtype
    assert torch.equal(out, expected(values, factors))  # one product per element: exact


@pytest.mark.parametrize("device", DEVICES)
def test_strided_and_misaligned_inputs(device):
    base = torch.randn(4 * 8 * 8 + 1, device=device)
    values = base[1:].view(4, 8, 8)  # 4 bytes past a 16-byte boundary: no vector access
    factors = torch.randn(1, device=device).expand(4)  # stride 0, as grad of a sum arrives
    assert torch.equal(scale_by_item(values, factors), expected(values, factors))
    transposed = torch.randn(4, 8, 8, device=device).transpose(1, 2)  # not contiguous
    factors = torch.randn(8, device=device)[::2]  # stride 2
    assert torch.equal(scale_by_item(transposed, factors), expected(transposed, factors))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float16])
def test_other_dtypes(dtype, device):
    values = torch.randn(3, 4, 4, device=device).to(dtype)
    factors = torch.randn(3, device=device).to(dtype)
    assert torch.equal(scale_by_item(values, factors), expected(values, factors))


@pytest.mark.parametrize("device", DEVICES)
def test_special_values_pass_through(device):
    values = torch.tensor([[[1.0, float("inf"), float("nan"), -2.0]],
                           [[0.0, 1.0, -1.0, 3.0]]], device=device)
    factors = torch.tensor([2.0, 0.0], device=device)
    assert torch.equal(scale_by_item(values, factors).isnan(), expected(values, factors).isnan())
    finite = expected(values, factors).isfinite()
    assert torch.equal(scale_by_item(values, factors)[finite], expected(values, factors)[finite])


@pytest.mark.parametrize("device", DEVICES)
def test_bad_factors_named(device):
    values = torch.randn(3, 4, 4, device=device)
    with pytest.raises(RuntimeError, match="factors must be one number per item"):
        scale_by_item(values, torch.randn(2, device=device))
    with pytest.raises(RuntimeError, match="factors must be one number per item"):
        scale_by_item(values, torch.randn(3, 1, device=device))


def test_meta_shape():
    values = torch.empty(3, 4, 5, device="meta")
    out = scale_by_item(values, torch.empty(3, device="meta"))
    assert out.shape == (3, 4, 5) and out.device.type == "meta"


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    values = torch.randn(3, 4, 8, device=device)
    torch.library.opcheck(scale_by_item, (values, torch.randn(3, device=device)))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(3, 9, 11), (2, 40, 70)])
def test_backward_that_frees_the_graph_equals_one_that_keeps_it(shape, device):
    """A training step's backward (the graph freed) scales the kept gradient where it lies on
    the CPU; with retain_graph the kept gradient must survive for the next backward. Every
    route gives the same bits."""
    import softalign
    g = torch.Generator().manual_seed(1)
    scores = torch.randn(shape, generator=g).to(device).requires_grad_()
    gap_open = torch.full((shape[0],), -1.0, device=device, requires_grad=True)
    weights = torch.linspace(0.5, 2.0, shape[0], device=device)
    score = softalign.smith_waterman(scores, gap_open=gap_open, temperature=0.7)
    kept = torch.autograd.grad((score * weights).sum(), [scores, gap_open], retain_graph=True)
    again = torch.autograd.grad((score * weights).sum(), [scores, gap_open], retain_graph=True)
    freed = torch.autograd.grad((score * weights).sum(), [scores, gap_open])
    for a, b, c in zip(kept, again, freed):
        assert torch.equal(a, b) and torch.equal(a, c)
    with pytest.raises(RuntimeError, match="backward"):  # the graph is gone
        torch.autograd.grad(score.sum(), scores)
