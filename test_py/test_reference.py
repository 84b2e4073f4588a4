"""Every docs/spec.md model, on every device, against the float64 reference: values and gradients."""
import pytest
import torch

from conftest import DEVICES
from problems import ENDS, MODELS, MODES, assert_matches_reference, make_problem

TEMPERATURES = [0.0, 0.3, 1.0]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("lengths", [False, True], ids=["full", "lengths"])
@pytest.mark.parametrize("temperature", TEMPERATURES)
@pytest.mark.parametrize("mode,reduction", ENDS)
@pytest.mark.parametrize("model", MODELS)
def test_model(model, mode, reduction, temperature, lengths, device):
    p = make_problem(model, mode, reduction, temperature, lengths=lengths,
                     seed=hash((model, mode, reduction, temperature, lengths)) % 1000)
    assert_matches_reference(p, device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("penalties", ["number", "0d", "item", "item3", "position", "full", "row"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("model", MODELS)
def test_penalty_shapes(model, mode, penalties, device):
    p = make_problem(model, mode, "soft" if mode == "local" else "max", 0.7,
                     penalties=penalties, lengths=True, seed=7)
    assert_matches_reference(p, device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(1, 1, 1), (2, 1, 7), (2, 7, 1), (1, 13, 3), (4, 2, 11)])
@pytest.mark.parametrize("model", MODELS)
def test_odd_shapes(model, shape, device):
    B, M, N = shape
    for mode in MODES:
        assert_matches_reference(make_problem(model, mode, "max", 0.5, B, M, N, seed=B * M + N),
                                 device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("model", MODELS)
def test_low_precision_dtypes(model, dtype, device):
    """float32 computes in float32; float16 and bfloat16 compute in float32 and return their own."""
    p = make_problem(model, "local", "soft", 0.5, B=3, M=9, N=8, penalties="item", seed=11)
    if dtype == torch.float32:
        assert_matches_reference(p, device, dtype, rtol=1e-5, atol=1e-5)
    else:
        # The inputs themselves are rounded to dtype: compare against the reference on them.
        rounded = p.on("cpu", dtype).on("cpu", torch.float64)
        tol = {torch.float16: 2e-3, torch.bfloat16: 2e-2}[dtype]
        assert_matches_reference(rounded, device, dtype, rtol=tol, atol=tol)


@pytest.mark.parametrize("device", DEVICES)
def test_unbatched_input_gives_0d(device):
    p = make_problem("affine", "local", "soft", 1.0, B=1, M=6, N=5, penalties="position")
    p.scores = p.scores[0]
    assert_matches_reference(p, device)
