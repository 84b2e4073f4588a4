"""Timing helpers shared by the demo and the benchmark (docs/performance.md, "How to reproduce").

    seed_loop                         the seed's PyTorch loop (test_py/reference.py), the baseline
    random_inputs(shape, device, n)   n random float32 score tensors, never zeros
    step(fn, inputs, backward)        a callable that runs one forward (or forward + backward)
    cpu_median(call, reps, warmup)    median wall time in seconds (perf_counter)
    cuda_median(call, reps, ...)      median time in seconds from CUDA events, groups of calls
    cuda_graphed(call, count)         the same calls replayed from CUDA graphs (no host cost per call)
    fmt_time(seconds)                 '0.123 ms' / '1.23 s'

A timed call takes the repetition index, so that it can rotate through several input sets.
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Callable, Optional, Sequence

import torch

_REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(_REPO / "test_py"))
from reference import seed_loop  # noqa: E402  (the baseline lives with the tests, not copied)

__all__ = ["seed_loop", "random_inputs", "step", "cpu_median", "cuda_median", "cuda_graphed",
           "fmt_time"]

Call = Callable[[int], object]


def random_inputs(shape, device="cpu", count=1, requires_grad=False, seed=0) -> list[torch.Tensor]:
    """`count` standard-normal float32 tensors: scores a DP really has to work on (never zeros)."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    return [torch.randn(shape, generator=gen).to(device).requires_grad_(requires_grad)
            for _ in range(count)]


def step(fn: Callable[[torch.Tensor], torch.Tensor], inputs: Sequence[torch.Tensor],
         backward: bool) -> Call:
    """Call i runs fn on inputs[i % len(inputs)]; with backward, also `score.sum().backward()`.

    The gradient is reset before each backward so that no accumulation is timed.
    """
    def forward(i: int):
        return fn(inputs[i % len(inputs)])

    def forward_backward(i: int):
        x = inputs[i % len(inputs)]
        x.grad = None
        fn(x).sum().backward()

    return forward_backward if backward else forward


def cpu_median(call: Call, reps: int, warmup: int = 1) -> float:
    """Median over `reps` single calls, in seconds, after `warmup` untimed calls."""
    for i in range(warmup):
        call(i)
    times = []
    for i in range(reps):
        start = time.perf_counter()
        call(i)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def cuda_median(call: Call, reps: int, warmup: int = 3, budget_s: Optional[float] = None,
                min_reps: int = 3, min_group_s: float = 2e-3) -> float:
    """Median time per call in seconds, from CUDA events around groups of calls.

    Short calls are grouped (enough calls to fill `min_group_s`) so that the events' own
    resolution and overhead do not dominate; the median is over `reps` groups, fewer (but at
    least `min_reps`) where `reps` groups would take longer than `budget_s`. One of the warm-up
    calls is timed, to size the groups.
    """
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def elapsed(first: int, count: int) -> float:
        start.record()
        for i in range(first, first + count):
            call(i)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e-3

    call(0)  # lazy initialisation, allocator growth: untimed
    per_call = max(elapsed(1, 1), 1e-7)
    for i in range(2, warmup):
        call(i)
    group = max(1, int(min_group_s / per_call))
    if budget_s is not None:
        reps = max(min_reps, min(reps, int(budget_s / (per_call * group))))
    return statistics.median([elapsed(k * group, group) / group for k in range(reps)])


def cuda_graphed(call: Call, count: int) -> Call:
    """Call i replays a CUDA graph of call(i % count): `count` graphs, one per input set, each
    captured by PyTorch's whole-network recipe (warm-up calls on a side stream, then the
    capture). The same kernels as call, without its host work (Python, dispatch, autograd)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(3):
            call(i)
    torch.cuda.current_stream().wait_stream(side)
    graphs = []
    for i in range(count):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            call(i)
        graphs.append(graph)
    return lambda i: graphs[i % count].replay()


def fmt_time(seconds: float) -> str:
    """Three significant digits, in ms below a second."""
    return f"{seconds:.2f} s" if seconds >= 1.0 else f"{seconds * 1e3:.3g} ms"
