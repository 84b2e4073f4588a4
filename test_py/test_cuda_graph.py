"""CUDA graph capture: the op's forward, and its forward + backward, captured into a
torch.cuda.CUDAGraph by PyTorch's whole-network recipe (warm up on a side stream, then capture),
replayed on new values copied into the static inputs, must equal eager calls bit for bit; on
the striped kernels (per-item penalties, one stripe and several) and the thread-per-item path
(per-position penalties), with and without lengths. During capture the lengths' range check
(a read back to the host) is skipped: device lengths are trusted, and the kernels clamp them.
The linear forward of items_per_warp is the scaled one (prob_space/linear_forward.cuh).
A capture may also be a process's very first call (the streamed kernel then asks its occupancy
inside the capture)."""
import pytest
import torch

import softalign
from fresh_process import run_in_fresh_process
from problems import MODELS

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

# path: ((B, M, N), penalty shape)
PATHS = {"striped": ((4, 40, 30), "item"), "items_per_warp": ((1100, 17, 23), "item"),
         "stripes_pipelined": ((3, 300, 130), "item"),
         "general": ((3, 9, 11), "position")}
ENDS = [("local", "soft"), ("global", "max")]


def make_inputs(model, path, lengths, seed):
    """Device tensors of one call: scores, penalties (leaves needing grad), lengths, weights."""
    (B, M, N), penalties = PATHS[path]
    gen = torch.Generator().manual_seed(seed)
    shape = (B, 1, 1) if penalties == "item" else (B, M, N)
    x = {"scores": torch.randn(B, M, N, generator=gen),
         "gap_open": -1.0 - 0.3 * torch.rand(shape, generator=gen),
         "weights": torch.randn(B, generator=gen)}
    if model == "affine":
        x["gap_extend"] = -0.4 - 0.1 * torch.rand(shape, generator=gen)
    if lengths:
        x["lengths_a"] = torch.randint(0, M + 1, (B,), generator=gen)
        x["lengths_b"] = torch.randint(0, N + 1, (B,), generator=gen)
        x["lengths_a"][0], x["lengths_b"][0] = M, N
    return {k: v.cuda() for k, v in x.items()}


LEAVES = ["scores", "gap_open", "gap_extend"]


def call(x, end, backward):
    """The score, and with `backward` the gradients of sum(weights * score) as well."""
    mode, reduction = end
    leaves = [x[k].requires_grad_(backward) for k in LEAVES if k in x]
    score = softalign.smith_waterman(x["scores"], x["gap_open"], gap_extend=x.get("gap_extend"),
                                     temperature=1.0, lengths_a=x.get("lengths_a"),
                                     lengths_b=x.get("lengths_b"), mode=mode,
                                     reduction=reduction)
    if not backward:
        return [score]
    return [score.detach(), *torch.autograd.grad(score, leaves, grad_outputs=x["weights"])]


def capture(static, end, backward):
    """PyTorch's recipe: warm-up calls on a side stream, then one call captured."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            call(static, end, backward)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outputs = call(static, end, backward)
    return graph, outputs


def replay(graph, static, new):
    with torch.no_grad():
        for k in static:
            static[k].copy_(new[k])
    graph.replay()


def assert_equal(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w.detach(), rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("backward", [False, True], ids=["forward", "forward_backward"])
@pytest.mark.parametrize("lengths", [False, True], ids=["", "lengths"])
@pytest.mark.parametrize("end", ENDS, ids=["-".join(e) for e in ENDS])
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("model", MODELS)
def test_cuda_graph_replays_equal_eager(model, path, end, lengths, backward):
    static = make_inputs(model, path, lengths, seed=0)
    graph, outputs = capture(static, end, backward)
    for seed in (1, 2):
        new = make_inputs(model, path, lengths, seed)
        replay(graph, static, new)
        assert_equal(outputs, call(new, end, backward))
    if lengths:
        # Out of range: unchecked during replay, clamped by the kernels to [0, M] and [0, N].
        (B, M, N), _ = PATHS[path]
        new = make_inputs(model, path, lengths, seed=3)
        new["lengths_a"][:2] = torch.tensor([-5, M + 7])
        new["lengths_b"][:2] = torch.tensor([N + 1, -1])
        replay(graph, static, new)
        new["lengths_a"].clamp_(0, M)
        new["lengths_b"].clamp_(0, N)
        assert_equal(outputs, call(new, end, backward))
    torch.cuda.synchronize()


def test_cuda_graph_number_penalty_with_a_tensor_one():
    # The Python wrapper turns the number into a device tensor by a fill, capturable.
    static = make_inputs("affine", "striped", True, seed=0)
    static["gap_extend"] = None
    graph = torch.cuda.CUDAGraph()
    run = lambda x: softalign.smith_waterman(x["scores"], x["gap_open"], gap_extend=-0.5,  # noqa: E731
                                             lengths_a=x["lengths_a"], reduction="soft")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        run(static)
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(graph):
        out = run(static)
    new = make_inputs("affine", "striped", True, seed=1)
    replay(graph, {k: v for k, v in static.items() if v is not None}, new)
    torch.testing.assert_close(out, run(new), rtol=0, atol=0)


def test_cuda_graph_capture_refuses_host_lengths():
    # Copying host lengths to the device waits for it, which capture forbids: a clear error.
    scores = torch.randn(2, 5, 6, device="cuda")
    lengths = torch.tensor([5, 3])
    softalign.smith_waterman(scores, lengths_a=lengths)  # outside capture: fine
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="during CUDA graph capture"):
        with torch.cuda.graph(graph):
            softalign.smith_waterman(scores, lengths_a=lengths)


FIRST_CALL_CAPTURED = r"""
import os

import torch
import softalign

os.environ.pop("SOFTALIGN_CUDA_GENERAL", None)  # the striped kernels, whatever the caller has set
softalign.load_library()
# The short pairs' affine shape, streamed at this batch (test_cuda_schedules.py): its launch asks
# the occupancy of its kernel once per process, so here that query runs inside the capture.
gen = torch.Generator().manual_seed(5)
S = torch.randn(70000, 9, 16, generator=gen)
o, e = torch.full((70000, 1, 1), -1.1), torch.full((70000, 1, 1), -0.4)
want = softalign.smith_waterman(S, o, gap_extend=e, temperature=0.7)  # the CPU backend
S, o, e = S.cuda(), o.cuda(), e.cuda()
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):  # no call on the GPU before this one
    got = softalign.smith_waterman(S, o, gap_extend=e, temperature=0.7)
graph.replay()
eager = softalign.smith_waterman(S, o, gap_extend=e, temperature=0.7)
torch.cuda.synchronize()
print("max error", float((got.cpu() - want).abs().max()))
torch.testing.assert_close(got, eager, rtol=0, atol=0)  # as every replay here: bit for bit
assert torch.allclose(got.cpu(), want, rtol=2e-4, atol=2e-4)
"""


def test_cuda_graph_capture_as_the_first_call():
    run_in_fresh_process(FIRST_CALL_CAPTURED, timeout=300)
