"""softalign benchmark: the table of docs/performance.md (`make bench`).

    python examples/benchmark.py [--device cpu|cuda] [--threads N [N ...]] [--quick]

Every row: case (B, M, N), gap model, pass (forward, or forward + `score.sum().backward()`),
implementation, median time, GCUPS = B*M*N / time / 1e9, the fraction of the ceiling, the
target and whether it is met, and for sizes <= 64 x 64 the seed's PyTorch loop as the baseline
ratio. All inputs are random float32 N(0, 1) scores, gap open -1 (linear) or
-1 / -0.5 (affine), temperature 1, local, reduction "max". On the GPU, sizes that small also get
a row of the same calls replayed from CUDA graphs ("graphed"): the kernels' own time, where the
eager call's is the host's (Python, dispatch, autograd). The CPU table also has the classic hard
alignment (t = 0, BLOSUM62, -11 / -1) of one (4096, 4096) pair of random proteins, with
parasail's striped 16-bit Smith-Waterman beside it when `import parasail` works (the same score
asserted).

The targets and ceilings below are docs/performance.md's; this program is where they live.
"""
from __future__ import annotations

import argparse
import itertools
import math
import platform
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch

sys.path.append(str(Path(__file__).resolve().parents[1] / "python"))  # an installed softalign first
import softalign  # noqa: E402
from timing import (cpu_median, cuda_graphed, cuda_median, fmt_time, random_inputs, seed_loop,
                    step)

GAPS = {"linear": (-1.0, None), "affine": (-1.0, -0.5)}
PASSES = ("fwd", "fwd+bwd")
LOOP_MAX_SIDE = 64  # the seed loop is timed where affordable: M, N <= 64 (linear gaps only)

# CPU (docs/performance.md, "CPU"). The one-thread targets at (64, 256, 256) double
# as the ceiling, per thread: the fraction column is GCUPS / (threads x ceiling).
CPU_CASES = [(16, 32, 32), (64, 256, 256), (8, 1024, 1024), (4, 2048, 2048), (1, 4096, 4096),
             (1, 20000, 20000)]
CPU_FORWARD_ONLY = {(1, 20000, 20000)}  # its forward + backward: tools (docs/performance.md)
CPU_QUICK_SKIPS = {(4, 2048, 2048), (1, 20000, 20000)}  # --quick: a smoke run
CPU_CEILING_PER_THREAD = {"fwd": 0.150, "fwd+bwd": 0.060}  # GCUPS (150 and 60 M cells/s)
CPU_TARGET_SIZE = (64, 256, 256)  # where the cells/s targets apply (one thread)
CPU_ONE_PAIR = (1, 4096, 4096)  # one long pair: its own targets (one thread, linear)
CPU_ONE_PAIR_TARGETS = {"fwd": 0.1, "fwd+bwd": 0.04}  # GCUPS
CPU_HARD_TARGET = 2.5  # GCUPS, t = 0 forward of one (4096, 4096) pair, one thread
CPU_SCALING_TARGETS = {(64, 256, 256): 1.8, (1, 4096, 4096): 1.7, (8, 1024, 1024): 1.7}
CPU_LOOP_SPEEDUP_TARGET = 1000.0  # (16, 32, 32): >= 1000x the PyTorch loop

# GPU (docs/performance.md, "The ceilings"; measured on an H200): ceilings and the targets per case.
GPU_CASES = [(16, 32, 32), (65536, 32, 32), (32, 1024, 1024), (1, 4096, 4096)]
GPU_CEILING = {"fwd": 930.0, "fwd+bwd": 530.0}  # GCUPS, measured on the H200
GPU_TARGETS = {  # linear gaps; ("ms", x): median <= x ms; ("GCUPS", x): GCUPS >= x
    (16, 32, 32): {"fwd": ("ms", 0.020), "fwd+bwd": ("ms", 0.050)},
    (65536, 32, 32): {"fwd": ("GCUPS", 500.0), "fwd+bwd": ("GCUPS", 200.0)},
    (32, 1024, 1024): {"fwd": ("GCUPS", 400.0), "fwd+bwd": ("GCUPS", 150.0)},
    (1, 4096, 4096): {"fwd": ("GCUPS", 20.0), "fwd+bwd": ("GCUPS", 10.0)},
}
AFFINE_FRACTION = 0.6  # affine targets: >= 60% of the linear figures
MAX_INPUT_SETS = 16  # inputs rotated on the GPU while they fit in L2 (docs/performance.md)


@dataclass
class Target:
    unit: str  # "ms" (at most), "GCUPS" (at least), "x loop" or "x 1 thr" (at least)
    value: float

    def __str__(self) -> str:
        if self.unit == "ms":
            return f"<= {self.value:.3g} ms"
        gap = "" if self.unit.startswith("x") else " "
        return f">= {self.value:g}{gap}{self.unit}"

    def met(self, row: "Row") -> Optional[bool]:
        measured = {"ms": row.median * 1e3, "GCUPS": row.gcups, "x loop": row.vs_loop,
                    "x 1 thr": row.scaling}[self.unit]
        if measured is None:
            return None
        return measured <= self.value if self.unit == "ms" else measured >= self.value


@dataclass
class Row:
    case: tuple
    gaps: str
    pass_: str
    impl: str
    median: float
    ceiling: float  # GCUPS
    threads: Optional[int] = None
    target: Optional[Target] = None
    vs_loop: Optional[float] = None
    scaling: Optional[float] = None  # one thread's time / this row's
    memory: Optional[float] = None  # peak extra resident memory / the scores' bytes (CPU)

    @property
    def gcups(self) -> float:
        return math.prod(self.case) / self.median / 1e9

    def cells(self) -> list[str]:
        met = self.target.met(self) if self.target else None
        return [
            "({}, {}, {})".format(*self.case), self.gaps, self.pass_, self.impl,
            "" if self.threads is None else str(self.threads), fmt_time(self.median),
            significant(self.gcups), percent(self.gcups / self.ceiling),
            "" if self.vs_loop is None else times(self.vs_loop),
            "" if self.scaling is None else f"{self.scaling:.2f}x",
            "" if self.memory is None else f"{self.memory:.2f}x",
            str(self.target) if self.target else "",
            "" if met is None else ("yes" if met else "NO"),
        ]


HEADERS = ["case (B, M, N)", "gaps", "pass", "impl", "thr", "median", "GCUPS", "of ceiling",
           "vs loop", "vs 1 thr", "memory", "target", "met"]


def print_table(headers: list[str], rows: list[list[str]], text_columns: int) -> None:
    """Columns aligned, the first `text_columns` to the left; columns empty in every row dropped."""
    if not rows:
        print("(nothing measured)")
        return
    keep = [k for k in range(len(headers)) if any(r[k] for r in rows)]
    widths = {k: max(len(headers[k]), *(len(r[k]) for r in rows)) for k in keep}
    line = lambda cells: "  ".join(  # noqa: E731
        cells[k].ljust(widths[k]) if k < text_columns else cells[k].rjust(widths[k])
        for k in keep)
    print(line(headers))
    print("  ".join("-" * widths[k] for k in keep))
    for r in rows:
        print(line(r))


def op(gaps: str):
    gap_open, gap_extend = GAPS[gaps]
    return lambda x: softalign.smith_waterman(x, gap_open, gap_extend=gap_extend, temperature=1.0)


def loop_baseline(x: torch.Tensor) -> torch.Tensor:
    return seed_loop(x, GAPS["linear"][0], 1.0)


def significant(value: float, digits: int = 3) -> str:
    """`value` to `digits` significant digits, without an exponent (0.0000672, 12.3, 512)."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    return f"{value:.{max(0, digits - 1 - math.floor(math.log10(abs(value))))}f}"


def percent(fraction: float) -> str:
    return "<0.01%" if fraction < 1e-4 else significant(100 * fraction) + "%"


def times(ratio: float) -> str:
    return f"{ratio:,.0f}x" if ratio >= 10 else f"{ratio:.2g}x"


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            models = [l.split(":", 1)[1].strip() for l in info if l.startswith("model name")]
        return f"{models[0]} ({len(models)} logical CPUs)"
    except (OSError, IndexError):
        return platform.machine()


def reps_for(seconds_per_call: float, budget_s: float, lo: int, hi: int) -> int:
    return max(lo, min(hi, int(budget_s / max(seconds_per_call, 1e-9))))


# ----------------------------------------------------------------------------------------------
# CPU
# ----------------------------------------------------------------------------------------------
def peak_rss_reset() -> Optional[int]:
    """Resets the process's peak resident memory (Linux: /proc/self/clear_refs) and returns the
    resident memory now, in bytes; None where the kernel does not offer it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return rss_bytes("VmRSS")
    except OSError:
        return None


def rss_bytes(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise OSError(field)


def time_cpu(fn, shape, backward: bool, budget_s: float, min_reps: int):
    """(median seconds, peak resident memory of the first call beyond its inputs, in bytes)."""
    count = 1 if math.prod(shape) > 1e8 else 4
    call = step(fn, random_inputs(shape, count=count, requires_grad=backward), backward)
    base = peak_rss_reset()
    first = cpu_median(call, reps=1, warmup=0)  # the warm-up call, timed for the estimate
    extra = None if base is None else rss_bytes("VmHWM") - base
    return cpu_median(call, reps_for(first, budget_s, min_reps, 300), warmup=0), extra


def cpu_target(case, gaps: str, pass_: str, threads: int) -> Optional[Target]:
    if threads == 2:
        return Target("x 1 thr", CPU_SCALING_TARGETS[case]) if case in CPU_SCALING_TARGETS else None
    if threads == 1 and gaps == "linear" and case == CPU_ONE_PAIR:
        return Target("GCUPS", CPU_ONE_PAIR_TARGETS[pass_])
    if threads == 1 and gaps == "linear" and case == CPU_TARGET_SIZE:
        return Target("GCUPS", CPU_CEILING_PER_THREAD[pass_])
    if threads == 1 and gaps == "linear" and max(case[1:]) <= LOOP_MAX_SIDE:
        return Target("x loop", CPU_LOOP_SPEEDUP_TARGET)
    return None


def bench_cpu(threads: list[int], quick: bool) -> None:
    budget_s, min_reps, loop_reps = (0.5, 1, 1) if quick else (12.0, 3, 3)
    print(f"CPU: {cpu_name()}, torch {torch.__version__}, "
          f"float32, threads {threads}, time budget {budget_s:g} s per measurement")
    print("ceiling = the one-thread targets x threads: "
          f"{CPU_CEILING_PER_THREAD['fwd'] * 1e3:g} M cells/s forward, "
          f"{CPU_CEILING_PER_THREAD['fwd+bwd'] * 1e3:g} M cells/s forward+backward per thread")
    rows = []
    one_thread = {}  # (case, gaps, pass) -> median at one thread, for the scaling column
    for n in sorted(threads):
        torch.set_num_threads(n)
        for case, gaps, pass_ in itertools.product(CPU_CASES, GAPS, PASSES):
            backward = pass_ == "fwd+bwd"
            if (backward and case in CPU_FORWARD_ONLY) or (quick and case in CPU_QUICK_SKIPS):
                continue
            median, extra = time_cpu(op(gaps), case, backward, budget_s, min_reps)
            row = Row(case, gaps, pass_, "softalign", median, CPU_CEILING_PER_THREAD[pass_] * n,
                      threads=n, target=cpu_target(case, gaps, pass_, n))
            row.memory = None if extra is None else extra / (math.prod(case) * 4)
            if n == 1:
                one_thread[case, gaps, pass_] = median
            elif (case, gaps, pass_) in one_thread:
                row.scaling = one_thread[case, gaps, pass_] / median
            if gaps == "linear" and max(case[1:]) <= LOOP_MAX_SIDE:
                inputs = random_inputs(case, count=2, requires_grad=backward)
                loop = cpu_median(step(loop_baseline, inputs, backward), loop_reps)
                row.vs_loop = loop / median
                rows.append(Row(case, gaps, pass_, "seed loop", loop, row.ceiling, threads=n))
            rows.append(row)
        rows += hard_alignment_rows(n, budget_s, min_reps)
    rows.sort(key=lambda r: (r.case, r.gaps != "linear", r.pass_, r.threads, r.impl))
    print("memory: the first call's peak resident memory beyond its inputs, in scores' sizes")
    print_table(HEADERS, [r.cells() for r in rows], text_columns=4)


def hard_alignment_rows(threads: int, budget_s: float, min_reps: int) -> list[Row]:
    """The classic hard alignment (t = 0) of one (4096, 4096) pair of random proteins, BLOSUM62,
    gap open -11, extend -1, and beside it parasail's striped 16-bit Smith-Waterman (one
    thread; when `import parasail` works) with the same score asserted."""
    from sequences import DATA_DIR, load_substitution_matrix, pairwise_scores

    alphabet, blosum62 = load_substitution_matrix(DATA_DIR / "blosum62.txt")
    residues = "ARNDCQEGHILKMFPSTWYV"
    gen = torch.Generator().manual_seed(0)
    a, b = ("".join(residues[i] for i in torch.randint(20, (CPU_ONE_PAIR[1],), generator=gen))
            for _ in range(2))
    scores = pairwise_scores(a, b, alphabet, blosum62)[None]

    def hard(x):
        return softalign.smith_waterman(x, -11.0, gap_extend=-1.0, temperature=0.0)

    call = step(hard, [scores], False)
    first = cpu_median(call, reps=1, warmup=0)
    median = cpu_median(call, reps_for(first, budget_s, min_reps, 300), warmup=0)
    target = Target("GCUPS", CPU_HARD_TARGET) if threads == 1 else None
    row = Row(CPU_ONE_PAIR, "affine", "fwd", "softalign t=0, B62", median,
              CPU_CEILING_PER_THREAD["fwd"] * threads, threads=threads, target=target)
    rows = [row]
    try:
        import parasail
    except ImportError:
        return rows
    if threads == 1:
        ours = float(hard(scores))
        theirs = parasail.sw_striped_16(a, b, 11, 1, parasail.blosum62).score
        assert ours == theirs, f"softalign {ours} against parasail {theirs}"
        call = lambda i: parasail.sw_striped_16(a, b, 11, 1, parasail.blosum62)  # noqa: E731
        rows.append(Row(CPU_ONE_PAIR, "affine", "fwd", "parasail sw_striped_16",
                        cpu_median(call, reps=5), row.ceiling, threads=1))
    return rows


# ----------------------------------------------------------------------------------------------
# GPU
# ----------------------------------------------------------------------------------------------
def gpu_target(case, gaps: str, pass_: str) -> Target:
    unit, value = GPU_TARGETS[case][pass_]
    if gaps == "affine":
        value = value / AFFINE_FRACTION if unit == "ms" else value * AFFINE_FRACTION
    return Target(unit, value)


def check_against_cpu(fn, x: torch.Tensor) -> Optional[str]:
    """None if the CUDA op matches the CPU op (score and gradient) on a slice of x, else why not."""
    part = x[:4, :256, :256].detach()
    results = []
    for device in ("cpu", "cuda"):
        xs = part.to(device).requires_grad_()
        score = fn(xs)
        score.sum().backward()
        results.append((score.detach().cpu(), xs.grad.cpu()))
    (s_cpu, g_cpu), (s_gpu, g_gpu) = results
    if not torch.allclose(s_gpu, s_cpu, rtol=1e-4, atol=1e-3):
        return f"score differs from CPU by {(s_gpu - s_cpu).abs().max():.2e}"
    if not torch.allclose(g_gpu, g_cpu, rtol=1e-3, atol=1e-4):
        return f"gradient differs from CPU by {(g_gpu - g_cpu).abs().max():.2e}"
    full = fn(x.detach())
    if not torch.isfinite(full).all() or full.abs().sum() == 0:
        return "full-size score is zero or not finite: nothing worth timing"
    return None


def peak_memory(fn, x: torch.Tensor, backward: bool) -> tuple[int, int]:
    """(peak bytes allocated beyond what was live before, bytes kept after the forward)."""
    torch.cuda.synchronize()
    x = x.detach().requires_grad_(backward)
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    if backward:
        score = fn(x)
        kept = torch.cuda.memory_allocated() - before
        score.sum().backward()
    else:
        with torch.no_grad():
            score = fn(x)
        kept = torch.cuda.memory_allocated() - before
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before, kept


def input_sets(nbytes: int) -> int:
    """How many input sets to rotate: enough to span twice the L2 cache, at most MAX_INPUT_SETS."""
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or 50 << 20
    return max(1, min(MAX_INPUT_SETS, math.ceil(2 * l2 / nbytes)))


def gpu_rows(case, gaps: str, quick: bool) -> list[Row]:
    reps, min_reps, loop_reps, budget_s = (5, 1, 1, 2.0) if quick else (30, 3, 3, 10.0)
    fn, rows = op(gaps), []
    for pass_ in PASSES:
        backward = pass_ == "fwd+bwd"
        count = input_sets(math.prod(case) * 4)
        inputs = random_inputs(case, "cuda", count=count, requires_grad=backward)
        call = step(fn, inputs, backward)
        median = cuda_median(call, reps, budget_s=budget_s, min_reps=min_reps)
        row = Row(case, gaps, pass_, "softalign", median, GPU_CEILING[pass_],
                  target=gpu_target(case, gaps, pass_))
        small = max(case[1:]) <= LOOP_MAX_SIDE
        graphed = graphed_row(call, count, row, reps, min_reps, budget_s) if small else None
        del call, inputs
        if gaps == "linear" and small:
            inputs = random_inputs(case, "cuda", count=2, requires_grad=backward)
            loop = cuda_median(step(loop_baseline, inputs, backward), loop_reps, warmup=2)
            row.vs_loop = loop / median
            rows.append(Row(case, gaps, pass_, "seed loop", loop, GPU_CEILING[pass_]))
        rows.append(row)
        if graphed is not None:
            rows.append(graphed)
    return rows


def graphed_row(call, count: int, eager: Row, reps: int, min_reps: int,
                budget_s: float) -> Optional[Row]:
    """`eager`'s row again, its calls (`call` over `count` input sets) replayed from CUDA graphs,
    one per input set; None (and a line saying why) where capture fails."""
    try:
        graphed = cuda_graphed(call, count)
    except RuntimeError as err:
        print(f"  {eager.case} {eager.gaps} {eager.pass_}: no CUDA graph row, capture failed: "
              f"{err}")
        return None
    median = cuda_median(graphed, reps, budget_s=budget_s, min_reps=min_reps)
    return Row(eager.case, eager.gaps, eager.pass_, "graphed", median, eager.ceiling,
               target=eager.target)


def bench_gpu(quick: bool) -> int:
    name = torch.cuda.get_device_name()
    try:
        op("linear")(torch.randn(1, 2, 2, device="cuda"))
    except (NotImplementedError, RuntimeError) as err:
        print(f"GPU {name}: softalign has no usable CUDA kernel in this build: "
              f"{str(err).split('. ')[0]}")
        return 1
    print(f"GPU: {name}, torch {torch.__version__}, float32, CUDA events after warm-up, median "
          f"over groups of calls (each group >= 2 ms){', quick' if quick else ''}")
    print(f"ceiling = measured H200 cell-math peak: {GPU_CEILING['fwd']:g} GCUPS forward, "
          f"{GPU_CEILING['fwd+bwd']:g} GCUPS forward+backward; affine targets = "
          f"{AFFINE_FRACTION:.0%} of linear")
    rows, memory = [], []
    for case, gaps in itertools.product(GPU_CASES, GAPS):
        x = random_inputs(case, "cuda")[0]
        problem = check_against_cpu(op(gaps), x)
        if problem:
            print(f"  {case} {gaps}: NOT TIMED, {problem}")
            continue
        peak_fwd, _ = peak_memory(op(gaps), x, backward=False)
        peak_bwd, saved = peak_memory(op(gaps), x, backward=True)
        memory.append((case, gaps, x.nbytes, peak_fwd, saved, peak_bwd))
        del x
        rows += gpu_rows(case, gaps, quick)
        torch.cuda.empty_cache()
    print_table(HEADERS, [r.cells() for r in rows], text_columns=4)
    print_memory(memory)
    return 0


def print_memory(memory) -> None:
    """Peak extra memory: forward without grad (at most O(B (M + N))), and forward+backward."""
    mib = lambda n: f"{n / 2**20:.2f} MiB"  # noqa: E731
    print("\nPeak extra GPU memory (max_memory_allocated minus what was live, i.e. the input):")
    headers = ["case (B, M, N)", "gaps", "input", "fwd no grad", "B(M+N) floats",
               "saved for bwd", "floats/cell", "fwd+bwd peak", "floats/cell"]
    rows = []
    for case, gaps, nbytes, peak_fwd, saved, peak_bwd in memory:
        b, m, n = case
        rows.append(["({}, {}, {})".format(*case), gaps, mib(nbytes), mib(peak_fwd),
                     f"{peak_fwd / (4 * b * (m + n)):.1f}x", mib(saved),
                     f"{saved / nbytes:.2f}", mib(peak_bwd), f"{peak_bwd / nbytes:.2f}"])
    print_table(headers, rows, text_columns=2)
    print("(floats/cell = bytes / (4 B M N), the input holding 1; fwd+bwd counts the (B, M, N) "
          "gradient itself; at most one saved float per cell per state)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2],
                        help="CPU thread counts to run (torch.set_num_threads); default 1 2")
    parser.add_argument("--quick", action="store_true", help="few repetitions: a smoke run")
    args = parser.parse_args()
    if args.device == "cpu":
        bench_cpu(args.threads, args.quick)
        return 0
    if not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device is available")
    return bench_gpu(args.quick)


if __name__ == "__main__":
    raise SystemExit(main())
