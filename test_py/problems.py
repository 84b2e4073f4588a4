"""Random problems for every docs/spec.md model, and one comparison of the op against the reference."""
import math
from dataclasses import dataclass, field
from typing import Optional

import torch

import softalign
from reference import reference

MODELS = ["linear", "affine"]
MODES = ["local", "global"]
REDUCTIONS = ["max", "soft"]
# (mode, reduction) pairs: "soft" reduces local mode's end cells; global has one end cell.
ENDS = [("local", "max"), ("local", "soft"), ("global", "max")]


@dataclass
class Problem:
    """The arguments of one call; tensors on the CPU in float64, moved by `on`."""
    scores: torch.Tensor
    gap_open: object = -1.0
    gap_extend: object = None
    temperature: float = 1.0
    lengths_a: Optional[torch.Tensor] = None
    lengths_b: Optional[torch.Tensor] = None
    mode: str = "local"
    reduction: str = "max"
    grads: dict = field(default_factory=dict)

    def kwargs(self):
        return dict(gap_open=self.gap_open, gap_extend=self.gap_extend,
                    temperature=self.temperature, lengths_a=self.lengths_a,
                    lengths_b=self.lengths_b, mode=self.mode, reduction=self.reduction)

    def on(self, device, dtype=torch.float64):
        """A copy on `device`: scores in `dtype`, penalty tensors likewise, leaves needing grad."""
        def move(x, dt):
            if not torch.is_tensor(x):
                return x
            y = x.detach().to(device=device, dtype=dt if x.is_floating_point() else x.dtype)
            return y.requires_grad_(x.is_floating_point())
        return Problem(move(self.scores, dtype), move(self.gap_open, dtype),
                       move(self.gap_extend, dtype), self.temperature,
                       move(self.lengths_a, None), move(self.lengths_b, None), self.mode,
                       self.reduction)


def penalty(kind, value, B, M, N, gen):
    """A penalty of one of the spec's accepted shapes, around `value`."""
    shapes = {"number": None, "0d": (), "item": (B,), "item3": (B, 1, 1),
              "position": (M, N), "full": (B, M, N), "row": (1, N)}
    shape = shapes[kind]
    if shape is None:
        return value
    return value + 0.3 * torch.rand(shape, generator=gen, dtype=torch.float64)


def make_problem(model="linear", mode="local", reduction="max", temperature=1.0, B=3, M=5, N=6,
                 penalties="0d", lengths=False, seed=0):
    gen = torch.Generator().manual_seed(seed)
    scores = torch.randn(B, M, N, generator=gen, dtype=torch.float64)
    p = Problem(scores, penalty(penalties, -1.0, B, M, N, gen),
                penalty(penalties, -0.4, B, M, N, gen) if model == "affine" else None,
                temperature, mode=mode, reduction=reduction)
    if lengths:
        p.lengths_a = torch.randint(0, M + 1, (B,), generator=gen)
        p.lengths_b = torch.randint(0, N + 1, (B,), generator=gen)
        p.lengths_a[0], p.lengths_b[0] = M, N  # one item keeps the whole block
    return p


def problem_with_refusals(mode, reduction, B=1500, model="linear"):
    """Items, t = 1, that the CUDA scaled kernels must refuse (items 10-13, 15, 16, 18, and
    affine 19: their log-space sweeps take them) among items they take (the rest; linear also
    14 and 17, which the affine kernel refuses: a score whose exp2 flushes may be a row's only
    way in, prob_space/affine_forward.cuh's rule score)."""
    M, N = 20, 25
    p = make_problem(model, mode, reduction, 1.0, B=B, M=M, N=N, penalties="item",
                     lengths=True, seed=5)
    p.lengths_a[10:20], p.lengths_b[10:20] = M, N
    p.scores[10] *= 1e3             # exp(s / t) overflows
    p.scores[11] = 100.0            # and here for every cell
    p.scores[12, 3, 4] = math.nan
    p.scores[13, 0, N - 1] = math.inf
    p.scores[14, :, 5] = -math.inf  # taken: E = 0, as in log space
    p.gap_open[15] = -500.0         # exp(g / t) vanishes
    p.gap_open[16] = 200.0          # and overflows
    p.scores[17, :, :] = -100.0     # E underflows to 0: taken (the values follow the gaps)
    p.scores[18, 5:, :] = 40.0      # values past float's range within one step
    if model == "affine":
        p.gap_extend[19] = 300.0    # exp(e / t) overflows
    return p


def evaluate(fn, p: Problem):
    """fn(**p) and the gradients of its sum w.r.t. every float tensor argument."""
    score = fn(p.scores, **p.kwargs())
    leaves = {k: v for k, v in [("scores", p.scores), ("gap_open", p.gap_open),
                                ("gap_extend", p.gap_extend)]
              if torch.is_tensor(v) and v.requires_grad}
    values = [None] * len(leaves)
    if leaves and score.requires_grad:  # a score that needs no input has zero gradients
        values = torch.autograd.grad(score.sum(), list(leaves.values()), allow_unused=True)
    grads = {k: (g if g is not None else torch.zeros_like(v))
             for (k, v), g in zip(leaves.items(), values)}
    return score.detach(), grads


def assert_grads_match_cpu(p: Problem, rtol=2e-4, atol=2e-4):
    """The score and every gradient on CUDA in float32 against the CPU backend in float64."""
    got, got_grads = evaluate(softalign.smith_waterman, p.on("cuda", torch.float32))
    want, want_grads = evaluate(softalign.smith_waterman, p.on("cpu", torch.float64))
    torch.testing.assert_close(got.cpu().double(), want, rtol=rtol, atol=atol, equal_nan=True)
    assert got_grads.keys() == want_grads.keys()
    for name in want_grads:
        torch.testing.assert_close(got_grads[name].cpu().double(), want_grads[name], rtol=rtol,
                                   atol=atol, equal_nan=True,
                                   msg=lambda m: f"d score / d {name}: {m}")
    return got, got_grads


def assert_matches_reference(p: Problem, device="cpu", dtype=torch.float64, rtol=1e-9,
                             atol=1e-9, check_grads=True):
    """The op on `device` in `dtype` against the float64 reference: value and every gradient."""
    expected, expected_grads = evaluate(reference, p.on("cpu"))
    got, got_grads = evaluate(softalign.smith_waterman, p.on(device, dtype))
    assert got.dtype == dtype and got.shape == expected.shape
    torch.testing.assert_close(got.cpu().double(), expected, rtol=rtol, atol=atol,
                               equal_nan=True)
    if check_grads:
        assert got_grads.keys() == expected_grads.keys()
        for name in expected_grads:
            assert got_grads[name].shape == expected_grads[name].shape, name
            torch.testing.assert_close(got_grads[name].cpu().double(), expected_grads[name],
                                       rtol=rtol, atol=atol, equal_nan=True,
                                       msg=lambda m: f"d score / d {name}: {m}")
