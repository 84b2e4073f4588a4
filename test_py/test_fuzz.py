"""Fuzzing the argument surface (docs/spec.md, "Bad input"): ranks 0..4, every dtype family,
devices, mode/reduction strings (garbage included), lengths of any dtype, shape and range,
temperatures from -inf to NaN, penalties with NaN/inf and odd shapes, layouts with stride 0.

Each call must either raise a RuntimeError/TypeError whose message names an argument (one the
oracle below, written from docs/spec.md, found invalid) or return a valid output: the right shape,
dtype and device, gradients of the inputs' shapes, and no NaN unless an input held NaN or +inf.
"""
import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import softalign
from conftest import count_example, hypothesis_settings

ARGUMENTS = ("scores", "gap_open", "gap_extend", "temperature", "lengths_a", "lengths_b", "mode",
             "reduction")
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
NOT_FLOATS = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
              torch.complex64, torch.complex128]
INTEGERS = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]
SPECIAL_VALUES = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1e30, -1e30, 1e-30]
TEMPERATURES = [0.0, -0.0, 1.0, 0.5, 1e-4, 1e4, 1e30, 1e38, 1e39, 1e300, 1.2e-38, 1e-39, 1e-300,
                1e-310, -1.0, -1e-300, math.nan, math.inf, -math.inf, 2]
MODES = ["local", "global", "", "Local", "GLOBAL", "semiglobal", "local ", "glöbal", "local\x00",
         "max"]
REDUCTIONS = ["max", "soft", "", "Max", "mean", "sum", "soft\x00", "local", "söft"]
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


# ------------------------------------------------------------------------------ drawing inputs

def draw_tensor(data, shape, dtype, device, specials=True):
    """A tensor of `shape` and `dtype`: random values, a few special ones, any layout."""
    n = math.prod(shape)
    gen = torch.Generator().manual_seed(data.draw(st.integers(0, 2 ** 16), label="seed"))
    layout = data.draw(st.sampled_from(["contiguous", "transposed", "strided", "expanded"]),
                       label="layout")
    base_shape = list(shape)
    if layout == "expanded" and shape:  # stride 0 along the dimensions drawn here
        for d in range(len(shape)):
            if data.draw(st.booleans(), label=f"expand dim {d}"):
                base_shape[d] = 1
    x = torch.randn(base_shape, generator=gen, dtype=torch.float64) * 3
    if specials and x.numel() and data.draw(st.booleans(), label="specials"):
        for _ in range(data.draw(st.integers(1, 3), label="how many")):
            i = data.draw(st.integers(0, x.numel() - 1), label="where")
            x.view(-1)[i] = data.draw(st.sampled_from(SPECIAL_VALUES), label="special")
    if dtype.is_complex:
        x = torch.complex(x, -x).to(dtype)
    elif dtype == torch.bool:
        x = x > 0
    elif not dtype.is_floating_point:
        x = x.nan_to_num(0, 100, -100).clamp(-100, 100).round().to(dtype)
    else:
        x = x.to(dtype)
    if layout == "expanded":
        x = x.expand(shape)
    elif layout == "transposed" and x.dim() >= 2:
        x = x.transpose(-1, -2).contiguous().transpose(-1, -2)
    elif layout == "strided" and x.dim() >= 1:
        wide = torch.zeros(shape[:-1] + (2 * shape[-1],), dtype=dtype)
        wide[..., ::2] = x
        x = wide[..., ::2]
    return x.to(device)


def draw_shape(data, rank, sizes, label):
    return tuple(data.draw(st.sampled_from(sizes), label=f"{label} size {d}") for d in range(rank))


def draw_penalty(data, name, B, M, N, device, wild):
    kind = data.draw(st.sampled_from(["number", "int", "special", "tensor", "tensor", "tensor"]),
                     label=f"{name} kind")
    if kind == "number":
        return data.draw(st.floats(-5, 0), label=name)
    if kind == "int":
        return data.draw(st.integers(-5, 0), label=name)
    if kind == "special":
        return data.draw(st.sampled_from(SPECIAL_VALUES), label=name)
    if wild:
        rank = data.draw(st.integers(0, 4), label=f"{name} rank")
        shape = draw_shape(data, rank, sorted({0, 1, 2, B, M, N}), name)
        dtype = data.draw(st.sampled_from(FLOATS * 3 + NOT_FLOATS), label=f"{name} dtype")
        device = data.draw(st.sampled_from(DEVICES), label=f"{name} device")
    else:  # one of the spec's shapes
        shape = data.draw(st.sampled_from([(), (B,), (1,), (B, 1, 1), (M, N), (B, M, N), (1, N),
                                           (M, 1), (1, 1, N), (B, 1, N)]), label=f"{name} shape")
        dtype = data.draw(st.sampled_from(FLOATS), label=f"{name} dtype")
    return draw_tensor(data, shape, dtype, device)


def draw_lengths(data, name, B, limit, device, unbatched, wild):
    if not wild:
        if data.draw(st.booleans(), label=f"{name} none"):
            return None
        shape = data.draw(st.sampled_from([(), (1,)]), label=f"{name} shape") if unbatched \
            else (B,)
        dtype = data.draw(st.sampled_from(INTEGERS), label=f"{name} dtype")
        values = [data.draw(st.integers(0, limit), label=f"{name} value")
                  for _ in range(math.prod(shape))]
        return torch.tensor(values, dtype=dtype).reshape(shape).to(device)
    kind = data.draw(st.sampled_from(["none", "tensor", "tensor", "tensor", "list"]),
                     label=f"{name} kind")
    if kind == "none":
        return None
    if kind == "list":
        return [data.draw(st.integers(0, limit), label=name) for _ in range(B)]
    rank = data.draw(st.sampled_from([0, 1, 1, 1, 2]), label=f"{name} rank")
    shape = draw_shape(data, rank, sorted({0, 1, 2, B, B + 1}), name)
    dtype = data.draw(st.sampled_from(INTEGERS * 3 + [torch.bool, torch.float32]),
                      label=f"{name} dtype")
    values = [data.draw(st.integers(-2, limit + 2), label=f"{name} value")
              for _ in range(math.prod(shape))]
    if dtype == torch.uint8:
        values = [max(v, 0) for v in values]  # a negative uint8 would wrap, not be negative
    lengths = torch.tensor(values, dtype=torch.int64).reshape(shape).to(dtype)
    if lengths.dim() == 1 and lengths.numel() > 1 and data.draw(st.booleans(), label="strided"):
        lengths = torch.stack([lengths, lengths], -1)[:, 0]
    return lengths.to(data.draw(st.sampled_from(DEVICES), label=f"{name} device"))


# ------------------------------------------------------------------------------ the oracle

def compute_dtype(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


def invalid_arguments(scores, gap_open, gap_extend, temperature, lengths_a, lengths_b, mode,
                      reduction):
    """The arguments docs/spec.md (and problem.cpp's documented checks) say are invalid."""
    bad = set()
    # Judged without the scores: a number penalty > 0 (a sign mistake), lengths not a tensor.
    for name, p in (("gap_open", gap_open), ("gap_extend", gap_extend)):
        if not torch.is_tensor(p) and p is not None and p > 0:
            bad.add(name)
    for name, lengths in (("lengths_a", lengths_a), ("lengths_b", lengths_b)):
        if lengths is not None and not torch.is_tensor(lengths):
            bad.add(name)
    if scores.dim() not in (2, 3) or not scores.dtype.is_floating_point:
        return bad | {"scores"}  # nothing else can be judged without (B, M, N)
    B, M, N = (1,) + tuple(scores.shape) if scores.dim() == 2 else tuple(scores.shape)
    if mode not in ("local", "global"):
        bad.add("mode")
    if reduction not in ("max", "soft") or (mode == "global" and reduction == "soft"):
        bad.add("reduction")
    t = float(temperature)
    finfo = torch.finfo(compute_dtype(scores.dtype))
    if not (t == 0 or finfo.tiny <= t <= finfo.max):  # NaN, inf, negative, out of range
        bad.add("temperature")
    for name, p in (("gap_open", gap_open), ("gap_extend", gap_extend)):
        if not torch.is_tensor(p):
            continue
        shape = tuple(p.shape)
        if len(shape) == 1:
            shape = (shape[0], 1, 1) if shape[0] in (B, 1) else None
        ok = (p.dtype.is_floating_point and shape is not None and len(shape) <= 3
              and (p.device == scores.device or (p.dim() == 0 and p.device.type == "cpu")))
        if ok:
            padded = (1,) * (3 - len(shape)) + shape
            ok = all(size in (1, full) for size, full in zip(padded, (B, M, N)))
            if mode == "global" and (padded[1] == 0 or padded[2] == 0):
                ok = False  # nothing to charge the gaps of an empty dimension with
        if not ok:
            bad.add(name)
    for name, lengths, limit in (("lengths_a", lengths_a, M), ("lengths_b", lengths_b, N)):
        if lengths is None:
            continue
        if not torch.is_tensor(lengths):
            bad.add(name)
            continue
        ok = (not lengths.dtype.is_floating_point and lengths.dtype != torch.bool
              and lengths.device in (torch.device("cpu"), scores.device))
        if scores.dim() == 2:
            ok = ok and lengths.numel() == 1 and lengths.dim() <= 1
        else:
            ok = ok and lengths.dim() == 1 and lengths.shape[0] == B
        if ok and lengths.numel():
            ok = 0 <= int(lengths.min()) and int(lengths.max()) <= limit
        if not ok:
            bad.add(name)
    return bad


def magnitude(*args):
    """The largest finite |value| of the inputs (numbers and tensors)."""
    top = 0.0
    for x in args:
        if torch.is_tensor(x) and x.is_floating_point() and x.numel():
            x = x.detach().cpu().double()
            finite = x[torch.isfinite(x)]
            top = max(top, finite.abs().max().item() if finite.numel() else 0.0)
        elif isinstance(x, (int, float)) and math.isfinite(x):
            top = max(top, abs(x))
    return top


def poisoned(*args):
    """Whether an input holds NaN or +inf, which docs/spec.md lets propagate (-inf is "forbidden")."""
    for x in args:
        if torch.is_tensor(x) and (x.dtype.is_floating_point or x.dtype.is_complex):
            x = x.detach().cpu()
            if torch.isnan(x).any() or (x == math.inf).any():
                return True
        elif isinstance(x, float) and (math.isnan(x) or x == math.inf):
            return True
    return False


# ------------------------------------------------------------------------------ the fuzz test

ENTRIES = ["wrapper", "wrapper_alignment", "op", "op_alignment"]


@hypothesis_settings(1500)
@given(st.data())
def test_fuzz_argument_surface(data):
    count_example("test_fuzz_argument_surface")
    # Start from a well-formed call and let a few arguments (or all) run wild: a uniformly
    # random call is almost never valid, and valid calls are where wrong answers hide.
    n_wild = data.draw(st.sampled_from([0, 0, 1, 1, 2, 3, len(ARGUMENTS)]), label="how wild")
    wild = set(data.draw(st.permutations(ARGUMENTS), label="wild arguments")[:n_wild])
    device = data.draw(st.sampled_from(DEVICES), label="device")
    if "scores" in wild:
        rank = data.draw(st.sampled_from([0, 1, 2, 3, 3, 4]), label="scores rank")
        dtype = data.draw(st.sampled_from(FLOATS * 2 + NOT_FLOATS), label="scores dtype")
    else:
        rank = data.draw(st.sampled_from([2, 3, 3, 3]), label="scores rank")
        dtype = data.draw(st.sampled_from(FLOATS), label="scores dtype")
    shape = draw_shape(data, rank, [0, 1, 1, 2, 3], "scores")
    scores = draw_tensor(data, shape, dtype, device)
    leaf = None
    if dtype.is_floating_point and data.draw(st.booleans(), label="requires_grad"):
        scores = leaf = scores.detach().requires_grad_()  # keeps the drawn strides
    if scores.dim() == 3:
        B, M, N = scores.shape
    elif scores.dim() == 2:
        B, (M, N) = 1, scores.shape
    else:
        B, M, N = 1, 1, 1
    gap_open = draw_penalty(data, "gap_open", B, M, N, device, "gap_open" in wild)
    gap_extend = (None if data.draw(st.booleans(), label="linear")
                  else draw_penalty(data, "gap_extend", B, M, N, device, "gap_extend" in wild))
    temperature = data.draw(st.sampled_from(TEMPERATURES) if "temperature" in wild
                            else st.sampled_from([0.0, 0.5, 1.0, 1e-4, 1e4]) | st.floats(0, 10),
                            label="t")
    unbatched = scores.dim() == 2
    lengths_a = draw_lengths(data, "lengths_a", B, M, device, unbatched, "lengths_a" in wild)
    lengths_b = draw_lengths(data, "lengths_b", B, N, device, unbatched, "lengths_b" in wild)
    mode = data.draw(st.sampled_from(MODES if "mode" in wild else MODES[:2]), label="mode")
    reduction = data.draw(st.sampled_from(REDUCTIONS if "reduction" in wild else REDUCTIONS[:2]),
                          label="reduction")
    entry = data.draw(st.sampled_from(ENTRIES), label="entry")

    bad = invalid_arguments(scores, gap_open, gap_extend, temperature, lengths_a, lengths_b,
                            mode, reduction)
    # torch.ops wants both penalties as numbers or both as tensors (README); mixed, it may
    # refuse them or read a 0-d tensor as a number (see test_mixed_penalties_through_torch_ops).
    tensors = [torch.is_tensor(p) for p in (gap_open, gap_extend) if p is not None]
    maybe_bad = set()
    if entry.startswith("op") and len(set(tensors)) > 1:
        maybe_bad = {"gap_open", "gap_extend"}
        bad -= maybe_bad  # a 0-d tensor read as a number is no longer judged as a tensor
    fn = {"wrapper": softalign.smith_waterman,
          "wrapper_alignment": softalign.smith_waterman_alignment,
          "op": torch.ops.softalign.smith_waterman,
          "op_alignment": torch.ops.softalign.smith_waterman_alignment}[entry]
    try:
        out = fn(scores, gap_open, gap_extend=gap_extend, temperature=temperature, lengths_a=lengths_a,
                 lengths_b=lengths_b, mode=mode, reduction=reduction)
    except (RuntimeError, TypeError, ValueError) as err:
        message = str(err)
        assert "INTERNAL ASSERT" not in message, message
        assert bad or maybe_bad, f"valid input refused: {message}"
        assert any(name in message for name in bad | maybe_bad), (bad, message)
        count_example("test_fuzz_argument_surface, refused with a named argument")
        return
    assert not bad, f"invalid {sorted(bad)} accepted"
    count_example("test_fuzz_argument_surface, valid output")

    score, alignment = out if entry.endswith("alignment") else (out, None)
    expected_shape = () if scores.dim() == 2 else (B,)
    assert score.shape == expected_shape and score.dtype == dtype and score.device == scores.device
    # No NaN from inputs without NaN or +inf, unless t is so large that finite scores overflow.
    clean = not poisoned(scores, gap_open, gap_extend) and temperature <= 1e30
    if clean:
        assert not torch.isnan(score).any(), score
        if mode == "local":
            assert (score >= 0).all(), score  # the empty alignment scores 0
    if alignment is not None:
        assert alignment.shape == scores.shape and alignment.dtype == dtype
        if clean:
            assert not torch.isnan(alignment).any()
        # docs/spec.md: entries in [0, 1]. Asserted only where t is well above the rounding of the DP
        # values: below, the soft local end's weights exp((v - score) / t) are not normalised
        # (test_numerics.py::test_soft_end_gradient_at_temperatures_near_the_rounding_of_the_score).
        size = magnitude(scores, gap_open, gap_extend)
        if clean and size < 1e6 and (temperature == 0 or temperature >= 1e-2 * max(1.0, size)):
            assert ((alignment >= 0) & (alignment <= 1.001)).all()
    elif leaf is not None:
        (grad,) = torch.autograd.grad(score.sum(), leaf)
        assert grad.shape == leaf.shape and grad.dtype == leaf.dtype
        if clean:
            assert not torch.isnan(grad).any()


# ------------------------------------------------------------------------------ found by fuzzing

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fuzz_findings_temperature_range(dtype):
    """The fuzz test's first finding: a temperature the compute dtype cannot hold (or whose
    1 / t overflows) returned NaN; now it is refused, naming temperature."""
    scores = torch.zeros(2, 3, 3, dtype=dtype)  # zero scores: every DP cell has ties
    big, small = (1e39, 1e-39) if dtype == torch.float32 else (math.inf, 1e-310)
    for t in (big, small):
        with pytest.raises(RuntimeError, match="temperature must be"):
            softalign.smith_waterman(scores, temperature=t)
    tiny = torch.finfo(dtype).tiny  # the smallest accepted: finite, with ties split evenly
    score, alignment = softalign.smith_waterman_alignment(scores, -1.0, temperature=tiny)
    assert (score > 0).all() and (score < 10 * tiny).all()
    assert alignment.min() >= 0 and alignment.max() <= 1 and alignment.sum() > 0
