"""Property-based tests: random problems over every option docs/spec.md defines, checked against
the float64 reference (values and gradients), CUDA against CPU, and two invariants that need no
reference (NaN stays in its item; an item's result does not depend on its batch).

A drawn problem: shapes with 0 and 1 included (B <= 12, M, N <= 4; unbatched too), gap model,
mode, reduction, temperature (0 included), penalty shapes (problems.py's kinds) and dtypes,
lengths of several integer dtypes, scores in float16/bfloat16/float32/float64, -inf masks, and
inputs that are non-contiguous (transposed, strided) or expanded (stride 0).
"""
import math
from dataclasses import dataclass

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import softalign
from conftest import count_example, hypothesis_settings
from problems import penalty
from reference import reference

PENALTY_KINDS = ["number", "0d", "item", "item3", "position", "full", "row"]
PER_ITEM_KINDS = {"item", "item3", "full"}  # one value (or plane) per item
DTYPES = [torch.float64, torch.float64, torch.float32, torch.float16, torch.bfloat16]
TOLERANCE = {torch.float64: 1e-9, torch.float32: 5e-5, torch.float16: 3e-3,
             torch.bfloat16: 2.5e-2}
LAYOUTS = ["contiguous", "contiguous", "transposed", "strided", "expanded"]


@dataclass
class Arg:
    """One tensor argument: the leaf gradients are taken w.r.t. and the view passed to the op."""
    values: torch.Tensor  # float64, the full shape, already rounded to dtype
    dtype: torch.dtype
    layout: str
    expand_dims: tuple = ()

    def make(self, device, dtype=None, requires_grad=True):
        """(leaf, input) on `device` in `dtype` (default: the drawn one) with the drawn layout."""
        dtype = dtype or self.dtype
        x = self.values
        if self.layout == "expanded":
            index = tuple(slice(0, 1) if d in self.expand_dims else slice(None)
                          for d in range(x.dim()))
            leaf = x[index].to(device, dtype).contiguous().requires_grad_(requires_grad)
            return leaf, leaf.expand(x.shape)
        x = x.to(device, dtype)
        if self.layout == "transposed" and x.dim() >= 2:
            x = x.transpose(-1, -2).contiguous().transpose(-1, -2)
        elif self.layout == "strided" and x.dim() >= 1:
            wide = torch.zeros(x.shape[:-1] + (2 * x.shape[-1],), dtype=dtype, device=device)
            wide[..., ::2] = x
            x = wide[..., ::2]
        leaf = x.detach().requires_grad_(requires_grad)
        return leaf, leaf


@dataclass
class Drawn:
    scores: Arg
    gap_open: object  # Arg or a number
    gap_extend: object  # Arg, a number or None
    temperature: float
    lengths_a: object
    lengths_b: object
    mode: str
    reduction: str
    penalty_kind: str

    def call(self, fn, device="cpu", dtype=None, lengths_device=None):
        """fn(...) and the gradients of its sum w.r.t. every tensor leaf (zeros where unused)."""
        leaves, inputs = {}, {}
        for name in ("scores", "gap_open", "gap_extend"):
            arg = getattr(self, name)
            if isinstance(arg, Arg):
                leaves[name], inputs[name] = arg.make(device, dtype)
            else:
                inputs[name] = arg
        lengths = {name: None if getattr(self, name) is None
                   else getattr(self, name).to(lengths_device or device)
                   for name in ("lengths_a", "lengths_b")}
        out = fn(inputs["scores"], inputs["gap_open"], gap_extend=inputs["gap_extend"],
                 temperature=self.temperature, mode=self.mode, reduction=self.reduction,
                 **lengths)
        grads = dict.fromkeys(leaves)
        if out.requires_grad:
            values = torch.autograd.grad(out.sum(), list(leaves.values()), allow_unused=True)
            grads = dict(zip(leaves, values))
        grads = {k: (g if g is not None else torch.zeros_like(leaves[k])) for k, g in grads.items()}
        return out.detach(), grads

    def alignment(self, device="cpu"):
        """softalign.smith_waterman_alignment on the same inputs (no autograd)."""
        inputs = {name: (arg.make(device, requires_grad=False)[1] if isinstance(arg, Arg)
                         else arg)
                  for name, arg in (("scores", self.scores), ("gap_open", self.gap_open),
                                    ("gap_extend", self.gap_extend))}
        return softalign.smith_waterman_alignment(
            inputs["scores"], inputs["gap_open"], gap_extend=inputs["gap_extend"],
            temperature=self.temperature, lengths_a=self.lengths_a, lengths_b=self.lengths_b,
            mode=self.mode, reduction=self.reduction)

    def reference_call(self):
        """The float64 reference on the very values the op sees (rounded to their dtypes)."""
        return self.call(reference, "cpu", torch.float64, "cpu")


def rounded(x, dtype):
    return x.to(dtype).double()


@st.composite
def problems(draw, max_b=3, max_mn=4, dtypes=DTYPES, layouts=LAYOUTS, masks=True):
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2 ** 20), label="seed"))
    unbatched = draw(st.sampled_from([False, False, False, True]), label="unbatched")
    B = 1 if unbatched else draw(st.integers(0, max_b), label="B")
    sizes = st.sampled_from([0, 1, 1] + list(range(2, max_mn + 1)))
    M, N = draw(sizes, label="M"), draw(sizes, label="N")
    model = draw(st.sampled_from(["linear", "affine"]), label="model")
    mode = draw(st.sampled_from(["local", "global"]), label="mode")
    # reduction="soft" is for local mode only (global has one end cell)
    reduction = draw(st.sampled_from(["max", "soft"] if mode == "local" else ["max"]),
                     label="reduction")
    temperature = draw(st.sampled_from([0.0, 0.0, 0.1, 0.5, 1.0, 3.0]) | st.floats(0.05, 5),
                       label="temperature")
    dtype = draw(st.sampled_from(dtypes), label="dtype")
    penalty_dtype = draw(st.sampled_from([dtype, dtype, torch.float32, torch.float64]),
                         label="penalty dtype")
    kind = draw(st.sampled_from(PENALTY_KINDS), label="penalty kind")

    scores = torch.randn(B, M, N, generator=gen, dtype=torch.float64) * 2
    if masks and scores.numel() and draw(st.booleans(), label="-inf mask"):
        where = draw(st.sampled_from(["cells", "row", "column", "item"]), label="mask")
        b, i, j = (int(torch.randint(0, s, (), generator=gen)) for s in (B, M, N))
        if where == "cells":
            scores[torch.rand(scores.shape, generator=gen) < 0.3] = -math.inf
        elif where == "row":
            scores[b, i, :] = -math.inf
        elif where == "column":
            scores[b, :, j] = -math.inf
        else:
            scores[b] = -math.inf
    # Ties between DP cells are broken by rounding: keep the "max" end's argmax unambiguous by
    # expanding the scores along M or N only where no argmax over cells is taken.
    scores_layout = draw(st.sampled_from(layouts), label="scores layout")
    expandable = [0] if (mode == "local" and reduction == "max") else [0, 1, 2]
    scores_expand = tuple(d for d in expandable if draw(st.booleans(), label=f"expand {d}"))
    if scores_layout == "expanded":
        index = tuple(slice(0, 1) if d in scores_expand else slice(None) for d in range(3))
        scores = scores[index].expand(B, M, N).clone()
    if unbatched:
        scores = scores[0]
        scores_expand = tuple(d - 1 for d in scores_expand if d > 0)
    scores_arg = Arg(rounded(scores, dtype), dtype, scores_layout, scores_expand)

    def penalty_arg(value, name):
        p = penalty(kind, value, B, M, N, gen)
        if not torch.is_tensor(p):
            return p
        if p.numel() and masks and draw(st.sampled_from([False] * 9 + [True]),
                                        label=f"{name} -inf"):
            p.view(-1)[0] = -math.inf  # a forbidden gap somewhere (or everywhere, if 0-d)
        layout = draw(st.sampled_from(layouts), label=f"{name} layout")
        expand = tuple(d for d in range(p.dim()) if draw(st.booleans(), label=f"{name} {d}"))
        if layout == "expanded":
            index = tuple(slice(0, 1) if d in expand else slice(None) for d in range(p.dim()))
            p = p[index].expand(p.shape).clone()
        return Arg(rounded(p, penalty_dtype), penalty_dtype, layout, expand)

    gap_open = penalty_arg(-1.0, "gap_open")
    gap_extend = penalty_arg(-0.4, "gap_extend") if model == "affine" else None

    lengths_a = lengths_b = None
    if draw(st.booleans(), label="lengths"):
        ldtype = draw(st.sampled_from([torch.int64, torch.int32, torch.int16, torch.uint8]),
                      label="lengths dtype")
        lengths_a = torch.randint(0, M + 1, (B,), generator=gen).to(ldtype)
        lengths_b = torch.randint(0, N + 1, (B,), generator=gen).to(ldtype)
        if unbatched and draw(st.booleans(), label="0-d lengths"):
            lengths_a, lengths_b = lengths_a[0], lengths_b[0]
        if draw(st.booleans(), label="only lengths_a"):
            lengths_b = None
    return Drawn(scores_arg, gap_open, gap_extend, temperature, lengths_a, lengths_b, mode,
                 reduction, kind)


def empty_global_penalty(p: Drawn):
    """docs/spec.md: global mode, M or N = 0, and a penalty varying along that empty dimension."""
    if p.mode != "global":
        return None
    shape = p.scores.values.shape
    M, N = shape[-2], shape[-1]
    for name in ("gap_open", "gap_extend"):
        arg = getattr(p, name)
        if isinstance(arg, Arg) and arg.values.dim() >= 2:
            if (M == 0 and arg.values.shape[-2] == 0) or (N == 0 and arg.values.shape[-1] == 0):
                return name
    return None


def assert_close(got, expected, tol, what):
    torch.testing.assert_close(got.cpu().double(), expected.double(), rtol=tol, atol=tol,
                               equal_nan=False, msg=lambda m: f"{what}: {m}")


# ------------------------------------------------------------------------------ vs reference

@hypothesis_settings(1000)
@given(problems(max_b=12))  # the reference is vectorised over B; B > 8 fills several SIMD groups
def test_random_problems_match_the_reference(p):
    count_example("test_random_problems_match_the_reference")
    empty = empty_global_penalty(p)
    if empty:
        with pytest.raises(RuntimeError, match=f"{empty} of shape .* varies along an empty"):
            p.call(softalign.smith_waterman)
        with pytest.raises(ValueError, match=empty):
            p.reference_call()
        return
    expected, expected_grads = p.reference_call()
    got, got_grads = p.call(softalign.smith_waterman)
    dtype = p.scores.dtype
    if p.scores.values.numel():
        count_example("test_random_problems_match_the_reference, with B * M * N > 0")
    assert got.dtype == dtype and got.shape == expected.shape
    assert_close(got, expected, TOLERANCE[dtype], "score")
    # t = 0 gradients follow argmax choices, which rounding in a lower precision may flip.
    if p.temperature == 0 and dtype != torch.float64:
        return
    for name, g in got_grads.items():
        arg = getattr(p, name)
        assert g.shape == expected_grads[name].shape and g.dtype == arg.dtype, name
        tol = max(TOLERANCE[dtype], TOLERANCE[arg.dtype])
        assert_close(g, expected_grads[name], tol, f"d score / d {name}")
    # The fused alignment is d score / d scores, without autograd.
    fused, alignment = p.alignment()
    assert fused.dtype == alignment.dtype == dtype and alignment.shape == p.scores.values.shape
    assert_close(fused, got, TOLERANCE[dtype], "fused score")
    if p.scores.layout != "expanded":  # else the leaf's gradient is a sum over the expansion
        assert_close(alignment, got_grads["scores"], TOLERANCE[dtype], "alignment")


# ------------------------------------------------------------------------------ CUDA vs CPU

@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@hypothesis_settings(150)
@given(problems(max_b=8, max_mn=12, dtypes=[torch.float32, torch.float64, torch.float16]),
       st.sampled_from(["cpu", "cuda"]))
def test_cuda_matches_cpu(p, lengths_device):
    count_example("test_cuda_matches_cpu")
    if empty_global_penalty(p):
        return
    cpu, cpu_grads = p.call(softalign.smith_waterman, "cpu")
    cuda, cuda_grads = p.call(softalign.smith_waterman, "cuda", lengths_device=lengths_device)
    tol = max(TOLERANCE[p.scores.dtype], 1e-5)  # docs/spec.md: the same within float32 rounding
    assert cuda.device.type == "cuda" and cuda.dtype == cpu.dtype
    assert_close(cuda, cpu, tol, "score")
    if p.temperature == 0 and p.scores.dtype != torch.float64:
        return
    for name in cpu_grads:
        tol = max(tol, TOLERANCE[getattr(p, name).dtype])
        assert_close(cuda_grads[name], cpu_grads[name].double(), tol, f"d score / d {name}")


# ------------------------------------------------------------------------------ invariants

def item_of(p: Drawn, b):
    """Item b of a batched problem as a batch of its own: per-item tensors sliced, shared ones
    kept (docs/spec.md: a 1-D penalty is always one value per item)."""
    def slice_arg(arg, per_item):
        if not isinstance(arg, Arg) or not per_item:
            return arg
        return Arg(arg.values[b:b + 1], arg.dtype, arg.layout, arg.expand_dims)
    per_item = p.penalty_kind in PER_ITEM_KINDS
    lengths = [None if x is None else x[b:b + 1] for x in (p.lengths_a, p.lengths_b)]
    return Drawn(slice_arg(p.scores, True), slice_arg(p.gap_open, per_item),
                 slice_arg(p.gap_extend, per_item), p.temperature, *lengths, p.mode,
                 p.reduction, p.penalty_kind)


def batched(p: Drawn):
    return p.scores.values.dim() == 3 and p.scores.values.shape[0] >= 2 and \
        not empty_global_penalty(p)


@hypothesis_settings(300)
@given(problems(max_b=5, max_mn=6, dtypes=[torch.float64, torch.float32, torch.bfloat16]),
       st.data())
def test_an_item_alone_equals_the_item_in_its_batch(p, data):
    """Bit for bit, values and gradients: no result depends on the other items of a batch."""
    count_example("test_an_item_alone_equals_the_item_in_its_batch")
    if not batched(p):
        return
    count_example("test_an_item_alone_equals_the_item_in_its_batch, with B >= 2")
    together, together_grads = p.call(softalign.smith_waterman)
    b = data.draw(st.integers(0, p.scores.values.shape[0] - 1), label="item")
    alone, alone_grads = item_of(p, b).call(softalign.smith_waterman)
    assert torch.equal(alone[0], together[b])
    per_item = {"scores"} | ({"gap_open", "gap_extend"} if p.penalty_kind in PER_ITEM_KINDS
                             else set())
    for name in alone_grads:
        arg = getattr(p, name)
        if name in per_item and not (arg.layout == "expanded" and 0 in arg.expand_dims):
            assert torch.equal(alone_grads[name][0], together_grads[name][b]), name


@hypothesis_settings(300)
@given(problems(max_b=5, max_mn=6, dtypes=[torch.float64, torch.float32], layouts=["contiguous"],
                masks=False), st.data())
def test_nan_stays_in_its_item(p, data):
    """A NaN in one item's scores: that item scores NaN, every other item's value and gradient
    is bit-identical to the run without it."""
    count_example("test_nan_stays_in_its_item")
    if not batched(p):
        return
    B, M, N = p.scores.values.shape
    la = M if p.lengths_a is None else p.lengths_a.long()
    lb = N if p.lengths_b is None else p.lengths_b.long()
    items = [b for b in range(B) if int(la if isinstance(la, int) else la[b]) > 0
             and int(lb if isinstance(lb, int) else lb[b]) > 0]
    if not items:
        return
    count_example("test_nan_stays_in_its_item, with B >= 2")
    b = data.draw(st.sampled_from(items), label="item")
    i = data.draw(st.integers(0, (la if isinstance(la, int) else int(la[b])) - 1), label="i")
    j = data.draw(st.integers(0, (lb if isinstance(lb, int) else int(lb[b])) - 1), label="j")
    clean, clean_grads = p.call(softalign.smith_waterman)
    values = p.scores.values.clone()
    values[b, i, j] = math.nan
    dirty_problem = Drawn(Arg(values, p.scores.dtype, "contiguous"), p.gap_open, p.gap_extend,
                          p.temperature, p.lengths_a, p.lengths_b, p.mode, p.reduction,
                          p.penalty_kind)
    dirty, dirty_grads = dirty_problem.call(softalign.smith_waterman)
    others = [k for k in range(B) if k != b]
    assert torch.isnan(dirty[b])
    assert torch.equal(dirty[others], clean[others])
    assert torch.equal(dirty_grads["scores"][others], clean_grads["scores"][others])
