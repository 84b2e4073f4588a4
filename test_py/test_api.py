"""The API's surface: keyword-only arguments, the penalty sign, bools, global with a soft end,
a tensor temperature and its gradient, NaN items, argument errors, a second copy of the library,
and the docstrings."""
import doctest
import math
import re
import shutil

import pytest
import torch

import softalign
from conftest import DEVICES
from fresh_process import run_in_fresh_process
from reference import reference

OPS = [torch.ops.softalign.smith_waterman, torch.ops.softalign.smith_waterman_alignment]
ENTRIES = {"wrapper": softalign.smith_waterman, "op": torch.ops.softalign.smith_waterman,
           "wrapper_alignment": softalign.smith_waterman_alignment,
           "op_alignment": torch.ops.softalign.smith_waterman_alignment}


def scores_of(B=2, M=4, N=5, seed=0, device="cpu"):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(B, M, N, generator=gen, dtype=torch.float64).to(device)


def score_of(out):
    return out[0] if isinstance(out, tuple) else out


# ---------------------------------------------------------------- keyword-only arguments

@pytest.mark.parametrize("op", OPS, ids=["score", "alignment"])
def test_every_argument_after_gap_open_is_keyword_only_in_every_public_schema(op):
    name = op._qualified_op_name
    schemas = torch._C._jit_get_schemas_for_operator(name)
    assert len(schemas) == 8
    for schema in schemas:
        args = schema.arguments
        assert [a.name for a in args[:2]] == ["scores", "gap_open"], schema
        assert not any(a.kwarg_only for a in args[:2]), schema
        assert all(a.kwarg_only for a in args[2:]), schema


@pytest.mark.parametrize("entry", ENTRIES)
def test_a_third_positional_argument_is_refused(entry):
    # sw(S, -1.0, 0.5) meant temperature 0.5; it would have run with gap_extend = +0.5.
    with pytest.raises((TypeError, RuntimeError)):
        ENTRIES[entry](scores_of(), -1.0, 0.5)


def test_the_seed_call_still_runs_and_gives_the_reference():
    S = scores_of()
    got = torch.ops.softalign.smith_waterman(S, -1.0, temperature=1.0)
    torch.testing.assert_close(got, reference(S, -1.0, temperature=1.0), rtol=1e-12, atol=1e-12)


def test_torchscript_calls_with_keywords_resolve_number_and_tensor_overloads():
    @torch.jit.script
    def by_number(s: torch.Tensor, t: float) -> torch.Tensor:
        return torch.ops.softalign.smith_waterman(s, -1.0, gap_extend=-0.3, temperature=t)

    @torch.jit.script
    def by_tensor_temperature(s: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return torch.ops.softalign.smith_waterman(s, -1.0, gap_extend=-0.3, temperature=t)

    S = scores_of()
    want = reference(S, -1.0, -0.3, temperature=0.7)
    torch.testing.assert_close(by_number(S, 0.7), want, rtol=1e-12, atol=1e-12)
    t = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    got = by_tensor_temperature(S, t)
    torch.testing.assert_close(got.detach(), want, rtol=1e-12, atol=1e-12)
    (dt,) = torch.autograd.grad(got.sum(), t)
    assert dt.item() != 0


# ---------------------------------------------------------------- penalty sign and bools

@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("which", ["gap_open", "gap_extend"])
@pytest.mark.parametrize("other", ["number", "tensor"])
def test_a_positive_number_penalty_is_refused_naming_it_and_the_sign(entry, which, other):
    S = scores_of()
    fine = -0.5 if other == "number" else torch.tensor(-0.5, dtype=torch.float64)
    kwargs = {"gap_open": fine, "gap_extend": fine, which: 11.0}
    with pytest.raises((ValueError, RuntimeError), match=rf"{which} must be <= 0.*{which}=-11"):
        ENTRIES[entry](S, kwargs["gap_open"], gap_extend=kwargs["gap_extend"])


@pytest.mark.parametrize("entry", ENTRIES)
def test_zero_and_minus_infinity_penalties_are_allowed(entry):
    S = scores_of()
    for gap in (0.0, -math.inf):
        got = score_of(ENTRIES[entry](S, gap, gap_extend=gap, temperature=0.5))
        torch.testing.assert_close(got, reference(S, gap, gap, temperature=0.5), rtol=1e-12,
                                   atol=1e-12)


def test_a_positive_tensor_penalty_runs():
    # A learned penalty may drift positive: only numbers are checked.
    S = scores_of()
    got = softalign.smith_waterman(S, torch.tensor(0.25, dtype=torch.float64))
    torch.testing.assert_close(got, reference(S, 0.25), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("value", [True, False])
@pytest.mark.parametrize("which", ["gap_open", "gap_extend"])
def test_a_bool_penalty_is_refused(entry, value, which):
    kwargs = {"gap_open": -1.0, "gap_extend": -0.5, which: value}
    with pytest.raises((TypeError, RuntimeError), match=rf"{which} must be a number.*bool"):
        ENTRIES[entry](scores_of(), kwargs["gap_open"], gap_extend=kwargs["gap_extend"])


def test_an_int_penalty_through_torch_ops_is_a_number():
    S = scores_of()
    torch.testing.assert_close(torch.ops.softalign.smith_waterman(S, -2),
                               reference(S, -2.0), rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- global with a soft end

@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("temperature", ["number", "tensor"])
def test_global_with_a_soft_reduction_is_refused_naming_reduction(entry, temperature):
    t = 1.0 if temperature == "number" else torch.tensor(1.0)
    with pytest.raises(RuntimeError, match='reduction="soft" applies to mode="local" only'):
        ENTRIES[entry](scores_of(), -1.0, temperature=t, mode="global", reduction="soft")


# ---------------------------------------------------------------- tensor temperature

PENALTIES = {
    "numbers": lambda B, M, N: (-1.0, -0.3),
    "item": lambda B, M, N: (-1.0 - 0.2 * torch.rand(B, dtype=torch.float64),
                             -0.3 - 0.1 * torch.rand(B, dtype=torch.float64)),
    "position": lambda B, M, N: (-1.0 - 0.2 * torch.rand(M, N, dtype=torch.float64),
                                 -0.3 - 0.1 * torch.rand(M, N, dtype=torch.float64)),
}
ENDS = [("local", "max"), ("local", "soft"), ("global", "max")]


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("shape", ["0d", "item"])
def test_a_tensor_temperature_gives_exactly_the_number_call(entry, shape):
    S = scores_of(B=4)
    values = [0.5, 0.0, 2.0, 0.5]
    t = torch.tensor(0.5) if shape == "0d" else torch.tensor(values)
    got = ENTRIES[entry](S, -1.0, gap_extend=-0.3, temperature=t)
    for b in range(4):
        u = 0.5 if shape == "0d" else values[b]
        want = ENTRIES[entry](S[b:b + 1], -1.0, gap_extend=-0.3, temperature=u)
        if isinstance(got, tuple):
            assert torch.equal(got[0][b:b + 1], want[0]) and torch.equal(got[1][b:b + 1], want[1])
        else:
            assert torch.equal(got[b:b + 1], want)


@pytest.mark.parametrize("model", ["linear", "affine"])
@pytest.mark.parametrize("penalties", PENALTIES)
@pytest.mark.parametrize("mode,reduction", ENDS)
@pytest.mark.parametrize("shape", ["0d", "item"])
def test_temperature_gradient_matches_the_float64_reference(model, penalties, mode, reduction,
                                                            shape):
    torch.manual_seed(1)
    B, M, N = 3, 4, 5
    S = scores_of(B, M, N, seed=2)
    o, e = PENALTIES[penalties](B, M, N)
    e = e if model == "affine" else None
    lengths = torch.tensor([4, 2, 3]), torch.tensor([5, 5, 1])
    t0 = torch.tensor(0.7, dtype=torch.float64) if shape == "0d" else \
        torch.tensor([0.7, 0.4, 1.3], dtype=torch.float64)
    t = t0.clone().requires_grad_()
    weights = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    kw = dict(lengths_a=lengths[0], lengths_b=lengths[1], mode=mode, reduction=reduction)
    score = softalign.smith_waterman(S, o, gap_extend=e, temperature=t, **kw)
    (dt,) = torch.autograd.grad((score * weights).sum(), t)

    def ref(tt):
        if tt.dim() == 0:
            return reference(S, o, e, temperature=tt.item(), **kw)
        return torch.stack([reference(S[b:b + 1], o if not torch.is_tensor(o) or o.dim() != 1
                                      else o[b:b + 1],
                                      e if not torch.is_tensor(e) or e.dim() != 1 else e[b:b + 1],
                                      temperature=tt[b].item(), lengths_a=lengths[0][b:b + 1],
                                      lengths_b=lengths[1][b:b + 1], mode=mode,
                                      reduction=reduction)[0] for b in range(B)])

    torch.testing.assert_close(score.detach(), ref(t0), rtol=1e-10, atol=1e-10)
    h = 1e-6
    want = torch.zeros_like(t0)
    for k in range(t0.numel()):
        step = torch.zeros_like(t0).view(-1)
        step[k] = h
        step = step.view(t0.shape)
        diff = ((ref(t0 + step) - ref(t0 - step)) * weights).sum() / (2 * h)
        want.view(-1)[k] = diff
    torch.testing.assert_close(dt, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("model", ["linear", "affine"])
@pytest.mark.parametrize("penalties", ["item", "position"])
@pytest.mark.parametrize("mode,reduction", ENDS)
@pytest.mark.parametrize("shape", ["0d", "item"])
def test_gradcheck_with_a_tensor_temperature(model, penalties, mode, reduction, shape, device):
    torch.manual_seed(3)
    B, M, N = 2, 3, 4
    S = scores_of(B, M, N, seed=4, device=device).requires_grad_()
    o, e = (p.to(device).requires_grad_() for p in PENALTIES[penalties](B, M, N))
    t = (torch.tensor(0.8, dtype=torch.float64) if shape == "0d"
         else torch.tensor([0.8, 0.5], dtype=torch.float64)).to(device).requires_grad_()
    lengths = torch.tensor([3, 2], device=device)

    def fn(S, o, t, e=None):
        return softalign.smith_waterman(S, o, gap_extend=e, temperature=t, lengths_b=lengths,
                                        mode=mode, reduction=reduction)

    inputs = (S, o, t) + ((e,) if model == "affine" else ())
    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-6)


def test_torch_ops_keeps_the_gradient_of_a_tensor_temperature_with_every_penalty_kind():
    S = scores_of()
    grads = []
    for o, e in [(-1.0, -0.3), (torch.tensor(-1.0, dtype=torch.float64), -0.3),
                 (-1.0, torch.tensor(-0.3, dtype=torch.float64)),
                 (torch.tensor(-1.0, dtype=torch.float64), torch.tensor(-0.3, dtype=torch.float64))]:
        t = torch.tensor(0.6, dtype=torch.float64, requires_grad=True)
        torch.ops.softalign.smith_waterman(S, o, gap_extend=e, temperature=t).sum().backward()
        grads.append(t.grad)
    assert grads[0] is not None and grads[0].item() != 0
    for g in grads[1:]:
        assert torch.equal(g, grads[0])


def test_temperature_gradient_at_zero_is_zero():
    t = torch.tensor([0.0, 0.5], dtype=torch.float64, requires_grad=True)
    softalign.smith_waterman(scores_of(), -1.0, temperature=t).sum().backward()
    assert t.grad[0].item() == 0.0 and t.grad[1].item() != 0.0


@pytest.mark.parametrize("bad,message", [
    (torch.tensor(-1.0), "temperature must be finite and >= 0"),
    (torch.tensor([0.5, math.nan]), "temperature must be finite and >= 0"),
    (torch.tensor([1, 2]), "temperature must be a number or a floating-point tensor"),
    (torch.tensor([0.5, 0.5, 0.5]), r"temperature as a tensor must be 0-d or hold one value"),
    (torch.ones(2, 1), r"temperature as a tensor must be 0-d or hold one value"),
])
@pytest.mark.parametrize("entry", ENTRIES)
def test_a_bad_tensor_temperature_is_refused_naming_it(entry, bad, message):
    with pytest.raises(RuntimeError, match=message):
        ENTRIES[entry](scores_of(), -1.0, temperature=bad)


# ---------------------------------------------------------------- NaN items

NAN_ROUTES = ["kept", "recomputed", "temperature", "alignment"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("route", NAN_ROUTES)
@pytest.mark.parametrize("model", ["linear", "affine"])
@pytest.mark.parametrize("mode,reduction", ENDS)
@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])  # float32: CUDA's fast kernels
def test_every_gradient_of_a_nan_item_is_nan_and_other_items_are_untouched(
        route, model, mode, reduction, temperature, device, dtype):
    B, M, N = 3, 4, 5
    S = scores_of(B, M, N, seed=6, device=device).to(dtype)
    S[1, 2, 3] = math.nan
    if route == "recomputed":  # per-position penalties: the backward recomputes the DP
        o = torch.full((M, N), -1.0, dtype=dtype, device=device)
    else:
        o = torch.full((B,), -1.0, dtype=dtype, device=device)
    e = (o * 0.3) if model == "affine" else None
    t = torch.tensor(temperature, dtype=dtype) if route == "temperature" else temperature
    kw = dict(temperature=t, mode=mode, reduction=reduction)

    def run(S, o, e):
        if route == "alignment":
            score, alignment = softalign.smith_waterman_alignment(S, o, gap_extend=e, **kw)
            return score, [alignment]
        leaves = [x.clone().requires_grad_() for x in (S, o) + ((e,) if e is not None else ())]
        score = softalign.smith_waterman(leaves[0], leaves[1],
                                         gap_extend=leaves[2] if e is not None else None, **kw)
        return score.detach(), torch.autograd.grad(score.sum(), leaves)

    score, grads = run(S, o, e)
    assert torch.isnan(score[1]) and not torch.isnan(score[[0, 2]]).any()
    assert torch.isnan(grads[0][1]).all()
    assert not torch.isnan(grads[0][[0, 2]]).any()
    for g in grads[1:]:
        if g.dim() == 1:  # one value per item: item 1's
            assert torch.isnan(g[1]) and not torch.isnan(g[[0, 2]]).any()
        else:  # shared by the items: item 1's NaN reaches every position
            assert torch.isnan(g).all()
    # The other items: the same as without the NaN item.
    keep = [0, 2]
    pick = lambda x: x if x is None or x.dim() != 1 else x[keep]  # noqa: E731
    clean_score, clean_grads = run(S[keep], pick(o), pick(e))
    torch.testing.assert_close(score[keep], clean_score, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(grads[0][keep], clean_grads[0], rtol=1e-12, atol=1e-12)


def test_a_nan_item_makes_a_shared_penalty_gradient_nan():
    S = scores_of()
    S[0, 0, 0] = math.nan
    o = torch.tensor(-1.0, dtype=torch.float64, requires_grad=True)
    softalign.smith_waterman(S, o).sum().backward()
    assert torch.isnan(o.grad)


def test_minus_infinity_global_scores_keep_zero_gradients():
    # No alignment at all: -inf, and no gradient (docs/spec.md), not NaN.
    S = scores_of(B=1).requires_grad_()
    score = softalign.smith_waterman(S, -math.inf, mode="global")
    score.sum().backward()
    assert score.item() == -math.inf and torch.equal(S.grad, torch.zeros_like(S))


# ---------------------------------------------------------------- argument errors

np = pytest.importorskip("numpy")


@pytest.mark.parametrize("call,error,message", [
    (lambda S: softalign.smith_waterman(S, None), TypeError,
     r"gap_open must be a number or a floating-point torch.Tensor, got NoneType"),
    (lambda S: softalign.smith_waterman(None, -1.0), TypeError, r"scores must be a floating"),
    (lambda S: softalign.smith_waterman(S.tolist()), TypeError,
     r"scores must be .*got list .*torch.as_tensor"),
    (lambda S: softalign.smith_waterman(S.numpy()), TypeError,
     r"scores must be .*got ndarray .*torch.as_tensor"),
    (lambda S: softalign.smith_waterman(S, [-1.0, -2.0]), TypeError,
     r"gap_open must be .*got list .*torch.as_tensor"),
    (lambda S: softalign.smith_waterman(S, np.array([-1.0, -2.0])), TypeError,
     r"gap_open must be .*got ndarray .*torch.as_tensor"),
    (lambda S: softalign.smith_waterman(S, gap_extend="-1"), TypeError,
     r"gap_extend must be a number"),
    (lambda S: softalign.smith_waterman(S, temperature="1"), TypeError,
     r"temperature must be a number"),
    (lambda S: softalign.smith_waterman(S, lengths_a=[4, 4]), TypeError,
     r"lengths_a must be None or an integer torch.Tensor"),
    (lambda S: softalign.smith_waterman_alignment(S, mode=None), TypeError,
     r'mode must be "local" or "global", got NoneType'),
    (lambda S: softalign.smith_waterman_alignment(S, reduction=1), TypeError,
     r'reduction must be "max" or "soft", got int'),
], ids=["none penalty", "none scores", "list scores", "numpy scores", "list penalty",
        "numpy penalty", "string extend", "string temperature", "list lengths", "none mode",
        "int reduction"])
def test_wrong_argument_types_get_an_error_naming_the_argument(call, error, message):
    with pytest.raises(error, match=message):
        call(scores_of())


@pytest.mark.parametrize("args,message", [
    ((None, -1.0), r"scores must be a floating-point tensor .*got None"),
    ((torch.zeros(2, 3, 4), None), r"gap_open must be a number or a floating-point tensor, got None"),
], ids=["none scores", "none penalty"])
def test_none_through_torch_ops_is_named(args, message):
    with pytest.raises(RuntimeError, match=message):
        torch.ops.softalign.smith_waterman(*args)


# ---------------------------------------------------------------- two copies of the library

def test_a_second_copy_of_the_library_is_refused_without_aborting(tmp_path):
    first = softalign.library_path()
    copy = tmp_path / "libsoftalign_copy.so"
    shutil.copy(first, copy)
    code = f"""
import torch, softalign
first = softalign.load_library({first!r})
torch.ops.load_library({str(copy)!r})  # a second copy: registers nothing, warns
assert torch.ops.softalign._library_path() == {first!r}, torch.ops.softalign._library_path()
S = torch.randn(2, 3, 4)
assert torch.equal(softalign.smith_waterman(S), torch.ops.softalign.smith_waterman(S))
try:
    softalign.load_library({str(copy)!r})
except RuntimeError as err:
    assert {first!r} in str(err) and {str(copy)!r} in str(err), str(err)
else:
    raise AssertionError("a second path was accepted")
print("survived")
"""
    run = run_in_fresh_process(code)
    assert "survived" in run.stdout
    # The second copy names both files where it cannot raise.
    assert str(copy) in run.stderr and first in run.stderr, run.stderr


# ---------------------------------------------------------------- docstrings

@pytest.mark.parametrize("fn", [softalign.smith_waterman, softalign.smith_waterman_alignment])
def test_help_documents_every_argument_the_sign_t_zero_and_an_example(fn):
    import inspect
    doc = fn.__doc__
    for name in inspect.signature(fn).parameters:
        assert re.search(rf"^\s+(\w+, )?{name}\b[^\n]*:", doc, re.M), name
    for phrase in ["(B, M, N)", "float64", "default", "<= 0", "gap_open=-11", "t = 0",
                   "keyword-only", "Example", "(B,)"]:
        assert phrase in doc, phrase
    # The example's outputs are the library's.
    parser = doctest.DocTestParser()
    test = parser.get_doctest(doc, {}, fn.__name__, None, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    runner.run(test)
    assert runner.failures == 0 and runner.tries >= 2


def test_the_op_packets_and_overloads_carry_docstrings():
    for op in OPS:
        for doc in [op.__doc__] + [getattr(op, o).__doc__ for o in op.overloads()]:
            assert "keyword-only" in doc and "<= 0" in doc and "temperature_tensor" in doc
