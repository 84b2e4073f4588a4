"""The op as PyTorch sees it: gradcheck, opcheck, TorchScript, torch.compile."""
import os
import shutil
import subprocess
import sys

import pytest
import torch

import softalign
from conftest import DEVICES
from fresh_process import ROOT, run_in_fresh_process
from problems import ENDS, MODELS, make_problem


def tensor_args(p):
    """The call as the .tensor overload takes it: penalties as tensors that need grad."""
    q = p.on(p.scores.device)
    if not torch.is_tensor(q.gap_open):
        q.gap_open = torch.tensor(q.gap_open, dtype=torch.float64, requires_grad=True)
    return q


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode,reduction", ENDS)
@pytest.mark.parametrize("model", MODELS)
def test_gradcheck(model, mode, reduction, device):
    p = tensor_args(make_problem(model, mode, reduction, 0.7, B=2, M=4, N=5,
                                 penalties="position", lengths=True, seed=1).on(device))
    inputs = [p.scores, p.gap_open] + ([p.gap_extend] if model == "affine" else [])

    def fn(scores, gap_open, gap_extend=None):
        return torch.ops.softalign.smith_waterman(
            scores, gap_open, gap_extend=gap_extend, temperature=p.temperature, lengths_a=p.lengths_a,
            lengths_b=p.lengths_b, mode=p.mode, reduction=p.reduction)

    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("model", MODELS)
def test_opcheck(model, device):
    p = tensor_args(make_problem(model, "local", "soft", 0.7, B=2, M=4, N=5, penalties="item",
                                 lengths=True, seed=2).on(device))
    args = (p.scores, p.gap_open)
    kwargs = dict(gap_extend=p.gap_extend, temperature=p.temperature, lengths_a=p.lengths_a,
                  lengths_b=p.lengths_b, mode=p.mode, reduction=p.reduction)
    torch.library.opcheck(torch.ops.softalign.smith_waterman.tensor, args, kwargs)
    detach = lambda a: a.detach() if torch.is_tensor(a) else a  # noqa: E731
    torch.library.opcheck(torch.ops.softalign.smith_waterman_alignment.tensor,
                          tuple(map(detach, args)), {k: detach(v) for k, v in kwargs.items()})


class SoftAlignModel(torch.nn.Module):
    """Learned penalties -> soft Smith-Waterman: what a user scripts and ships to C++."""

    def __init__(self):
        super().__init__()
        self.gap_open = torch.nn.Parameter(torch.tensor(-1.5, dtype=torch.float64))
        self.gap_extend = torch.nn.Parameter(torch.tensor(-0.5, dtype=torch.float64))

    def forward(self, scores: torch.Tensor, lengths_a: torch.Tensor) -> torch.Tensor:
        return torch.ops.softalign.smith_waterman(scores, self.gap_open, gap_extend=self.gap_extend,
                                                  temperature=0.5, lengths_a=lengths_a,
                                                  mode="local", reduction="soft")


@pytest.mark.parametrize("device", DEVICES)
def test_torchscript_round_trip(tmp_path, device):
    model = SoftAlignModel().to(device)
    scores = torch.randn(3, 6, 7, dtype=torch.float64, device=device, requires_grad=True)
    lengths = torch.tensor([6, 3, 0], device=device)
    path = tmp_path / "model.pt"
    torch.jit.script(model).save(str(path))
    loaded = torch.jit.load(str(path))

    expected = model(scores, lengths)
    got = loaded(scores, lengths)
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    expected_grads = torch.autograd.grad(expected.sum(), [scores, model.gap_open])
    got_grads = torch.autograd.grad(got.sum(), [scores, loaded.gap_open])
    for g, e in zip(got_grads, expected_grads):
        torch.testing.assert_close(g, e, rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_torch_compile_fullgraph(device):
    torch._dynamo.reset()
    model = SoftAlignModel().to(device)
    compiled = torch.compile(model, fullgraph=True)
    scores = torch.randn(3, 6, 7, dtype=torch.float64, device=device, requires_grad=True)
    lengths = torch.tensor([6, 3, 0], device=device)
    expected = model(scores, lengths)
    got = compiled(scores, lengths)
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    (expected_grad,) = torch.autograd.grad(expected.sum(), scores)
    (got_grad,) = torch.autograd.grad(got.sum(), scores)
    torch.testing.assert_close(got_grad, expected_grad, rtol=0, atol=0)


def test_number_overload_matches_tensor_overload():
    scores = torch.randn(2, 5, 4)
    by_number = torch.ops.softalign.smith_waterman(scores, -1.0, gap_extend=-0.3, temperature=0.5)
    by_tensor = torch.ops.softalign.smith_waterman(scores, torch.tensor(-1.0),
                                                   gap_extend=torch.tensor(-0.3), temperature=0.5)
    torch.testing.assert_close(by_number, by_tensor, rtol=0, atol=0)


@pytest.mark.parametrize("which", ["gap_open", "gap_extend"])
@pytest.mark.parametrize("op_", ["smith_waterman", "smith_waterman_alignment"])
def test_number_beside_a_tensor_penalty_keeps_its_gradient(op_, which):
    """Eager torch.ops resolution fell through to the numbers' overload, which read a one-element
    tensor as a float (Tensor.__float__): the penalty's gradient silently disappeared. Now the
    open_tensor / extend_tensor overloads take such calls (the alignment op's too, which has no
    autograd but read a CUDA tensor back to the host as a float)."""
    scores = torch.randn(2, 4, 5, dtype=torch.float64)
    penalty = torch.tensor(-1.0 if which == "gap_open" else -0.5, dtype=torch.float64,
                           requires_grad=True)
    gap_open, gap_extend = (penalty, -0.5) if which == "gap_open" else (-1.0, penalty)
    got = getattr(torch.ops.softalign, op_)(scores, gap_open, gap_extend=gap_extend,
                                            temperature=0.7)
    want = getattr(softalign, op_)(scores, gap_open, gap_extend=gap_extend, temperature=0.7)
    if op_ == "smith_waterman_alignment":  # no autograd: the values, without a float()
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
        return
    assert got.requires_grad
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    (got_grad,) = torch.autograd.grad(got.sum(), penalty)
    (want_grad,) = torch.autograd.grad(want.sum(), penalty)
    torch.testing.assert_close(got_grad, want_grad, rtol=0, atol=0)


LOADED_ELSEWHERE = """
import pytest, torch
torch.ops.load_library({copy!r})
import softalign  # loads the library on import: after the caller's copy, it takes that one
print(float(softalign.smith_waterman(torch.zeros(2, 2))))
with pytest.raises(RuntimeError, match="already loaded"):
    softalign.load_library({other!r})
"""


def test_wrapper_takes_a_library_the_caller_loaded(tmp_path):
    """torch.ops.load_library(a copy), then the wrapper: it loaded its own copy too, whose
    TORCH_LIBRARY aborted the process."""
    copy = tmp_path / "libsoftalign.so"
    shutil.copy(softalign.load_library(), copy)
    run_in_fresh_process(LOADED_ELSEWHERE.format(copy=str(copy),
                                                 other=softalign.library_path()))


@pytest.mark.parametrize("script", [["examples/benchmark.py", "--help"],
                                    ["-c", "import sys; sys.path.insert(0, 'examples'); import demo"]],
                         ids=["benchmark", "demo"])
def test_examples_run_without_pythonpath(script):
    """README runs `python3 examples/benchmark.py --device cuda` with no PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run([sys.executable, *script], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("model", MODELS)
def test_kept_gradient_and_recomputed_gradient_agree(model, device):
    # Per-item penalties take the route that keeps d score / d inputs from the forward; the same
    # values as position penalties take the route whose backward recomputes the DP.
    B, M, N = 3, 6, 7
    scores = torch.randn(B, M, N, dtype=torch.float64, device=device)
    per_item = [torch.tensor([-1.0, -0.7, -1.3], dtype=torch.float64, device=device),
                torch.tensor([-0.4, -0.2, -0.5], dtype=torch.float64, device=device)]
    lengths = torch.tensor([6, 2, 0], device=device)
    weights = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64, device=device)

    def grads(penalties):
        s = scores.clone().requires_grad_()
        pens = [p.clone().requires_grad_() for p in penalties[:1 + (model == "affine")]]
        extend = dict(gap_extend=pens[1]) if model == "affine" else {}
        score = torch.ops.softalign.smith_waterman(s, pens[0], **extend, temperature=0.6,
                                                   lengths_a=lengths, mode="local",
                                                   reduction="soft")
        return score, torch.autograd.grad((score * weights).sum(), [s] + pens)

    kept_score, kept = grads(per_item)
    positions = [p.view(B, 1, 1).expand(B, M, N).contiguous() for p in per_item]
    recomputed_score, recomputed = grads(positions)
    torch.testing.assert_close(kept_score, recomputed_score, rtol=0, atol=0)
    torch.testing.assert_close(kept[0], recomputed[0], rtol=1e-12, atol=1e-12)
    for k, r in zip(kept[1:], recomputed[1:]):
        torch.testing.assert_close(k, r.sum((1, 2)), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("penalties", ["number", "position"])
def test_double_backward_is_refused(penalties):
    scores = torch.randn(2, 4, 5, dtype=torch.float64, requires_grad=True)
    gap_open = -1.0 if penalties == "number" else torch.full((2, 4, 5), -1.0, dtype=torch.float64)
    (grad,) = torch.autograd.grad(softalign.smith_waterman(scores, gap_open).sum(), scores,
                                  create_graph=True)
    with pytest.raises(RuntimeError, match="does not support double backward"):
        grad.sum().backward()
