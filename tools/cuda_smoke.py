#!/usr/bin/env python3
"""CUDA vs CPU (the CPU backend is the reference): values and gradients of every gap model,
mode, reduction, temperature (0 and 1) and dtype, on random sizes with lengths, empty sizes and
sizes with several stripes. Prints PASS/FAIL per case; exits non-zero on any failure.

    SOFTALIGN_LIBRARY=build-cuda/libsoftalign.so PYTHONPATH=python python3 tools/cuda_smoke.py
    ... --tiny      a few small cases (for compute-sanitizer)
    SOFTALIGN_CUDA_GENERAL=1 ...   forces the CUDA backend's general (thread per item) forward
"""
import argparse
import itertools
import math
import os
import sys
from pathlib import Path

import torch

sys.path.append(str(Path(__file__).resolve().parents[1] / "python"))  # an installed softalign first
import softalign  # noqa: E402


def make_penalty(kind, value, B, M, N, dtype, gen):
    """A penalty of the given broadcast kind, on the CPU (moved to the device by the caller)."""
    if kind == "number":
        return float(value)
    if kind == "scalar":
        return torch.tensor(value, dtype=dtype)
    if kind == "item":
        return value + 0.25 * torch.rand(B, generator=gen, dtype=torch.float64).to(dtype)
    if kind == "position":
        return value + 0.25 * torch.rand(M, N, generator=gen, dtype=torch.float64).to(dtype)
    if kind == "item_position":
        return value + 0.25 * torch.rand(B, M, N, generator=gen, dtype=torch.float64).to(dtype)
    raise ValueError(kind)


def run(device, S, open_, extend, t, la, lb, mode, reduction, grad):
    """Score and, with grad, d sum(score) / d (scores, gap_open, gap_extend) on one device."""
    def prep(x):
        if not isinstance(x, torch.Tensor):
            return x
        return x.detach().to(device).requires_grad_(grad and x.is_floating_point())

    s, o, e = prep(S), prep(open_), prep(extend)
    lengths = [None if x is None else x.to(device) for x in (la, lb)]
    tensor_penalties = isinstance(o, torch.Tensor) or isinstance(e, torch.Tensor)
    if tensor_penalties:  # the .tensor overload takes tensors only
        dt = S.dtype
        o = o if isinstance(o, torch.Tensor) else torch.tensor(o, dtype=dt, device=device)
        if e is not None and not isinstance(e, torch.Tensor):
            e = torch.tensor(e, dtype=dt, device=device)
    score = torch.ops.softalign.smith_waterman(s, o, gap_extend=e, temperature=t, lengths_a=lengths[0],
                                               lengths_b=lengths[1], mode=mode,
                                               reduction=reduction)
    out = {"score": score.detach().cpu()}
    if grad and S.numel() > 0:
        score.sum().backward()
        out["d_scores"] = s.grad.cpu()
        for name, x in (("d_open", o), ("d_extend", e)):
            if isinstance(x, torch.Tensor) and x.grad is not None:
                out[name] = x.grad.cpu()
    return out


def close(a, b, dtype):
    if a.shape != b.shape:
        return False, f"shape {tuple(a.shape)} vs {tuple(b.shape)}"
    if a.numel() == 0:
        return True, ""
    tol = 2e-4 if dtype == torch.float32 else 1e-9
    a64, b64 = a.double(), b.double()
    same_nan = torch.equal(a64.isnan(), b64.isnan())
    finite = ~(a64.isnan() | b64.isnan())
    inf_ok = torch.equal(a64[finite].isinf(), b64[finite].isinf()) and torch.equal(
        a64[finite][a64[finite].isinf()], b64[finite][b64[finite].isinf()])
    fa, fb = a64[finite], b64[finite]
    both = fa.isfinite() & fb.isfinite()
    err = (fa[both] - fb[both]).abs()
    bound = tol * (1 + fb[both].abs())
    ok = same_nan and inf_ok and bool((err <= bound).all())
    worst = float((err / bound).max()) if err.numel() else 0.0
    return ok, f"max err/tol {worst:.3g}" + ("" if same_nan else " NaN mismatch") + (
        "" if inf_ok else " inf mismatch")


def sizes(tiny, gen):
    """(B, M, N, lengths?, specials?) cases."""
    if tiny:
        # (2, 70, 9): three stripes of 32 rows over a narrow ring, the last item's last stripe
        # reading the ring's second slot, whose stream reads run furthest past the workspace
        # (34000, 5, 16): the streamed affine forward (log_space/streamed.cuh), several items per group
        # (2, 70, 100): chunks inside the items (the kernels' unchecked tile moves)
        return [(3, 7, 9, True, False), (2, 40, 21, True, False), (2, 70, 9, False, False),
                (0, 4, 4, False, False), (34000, 5, 16, True, False), (2, 70, 100, True, False)]
    rnd = lambda lo, hi: int(torch.randint(lo, hi + 1, (1,), generator=gen))  # noqa: E731
    out = [(rnd(1, 6), rnd(1, 32), rnd(1, 40), True, False) for _ in range(2)]
    out += [(rnd(1, 5), rnd(33, 90), rnd(1, 80), True, False)]
    out += [(37, 17, 45, True, False),   # several warps of the short-pair kernel
            (5, 129, 70, False, False),  # a stripe boundary (128 rows) plus one row
            (2, 300, 257, False, False),  # several stripes
            (6, 700, 150, True, False),   # stripes pipelined, items of different heights
            (0, 5, 7, False, False), (3, 0, 6, False, False), (3, 5, 0, False, False),
            (4, 12, 10, False, True),    # NaN, -inf and +inf scores
            (34000, 9, 16, True, False)]  # the streamed affine forward (no grad)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiny", action="store_true", help="a few small cases (for sanitizers)")
    args = ap.parse_args()
    softalign.load_library()
    if not torch.cuda.is_available():
        print("no CUDA device")
        return 1
    gen = torch.Generator().manual_seed(0)
    failures = total = 0
    kinds = ["number", "scalar", "item", "position", "item_position"]
    size_list = sizes(args.tiny, gen)
    combos = itertools.product([torch.float32, torch.float64], [False, True], ["local", "global"],
                               ["max", "soft"], [0.0, 1.0])
    for n_combo, (dtype, affine, mode, reduction, t) in enumerate(combos):
        if mode == "global" and reduction == "soft":
            continue  # refused: a global alignment has one end cell
        if args.tiny and (dtype == torch.float64 or reduction == "soft" and t == 0.0):
            continue
        for n_size, (B, M, N, with_lengths, specials) in enumerate(size_list):
            kind = kinds[(n_combo + n_size) % len(kinds)]
            if (M == 0 or N == 0) and kind in ("position", "item_position"):
                kind = "item"  # global mode cannot charge a penalty varying along an empty side
            S = torch.randn(B, M, N, generator=gen, dtype=torch.float64).to(dtype)
            if specials and S.numel():
                flat = S.view(-1)
                flat[3] = math.nan                  # item 0
                flat[M * N + 5] = -math.inf         # item 1
                flat[2 * M * N + 7] = math.inf      # item 2
            open_ = make_penalty(kind, -1.0, B, M, N, dtype, gen)
            extend = make_penalty(kind, -0.3, B, M, N, dtype, gen) if affine else None
            la = lb = None
            if with_lengths and B > 0:
                la = torch.randint(0, M + 1, (B,), generator=gen)
                lb = torch.randint(0, N + 1, (B,), generator=gen)
                la[0], lb[0] = M, N
            name = (f"{str(dtype)[6:]} {'affine' if affine else 'linear'} {mode} {reduction} "
                    f"t={t:g} B,M,N=({B},{M},{N}) penalty={kind}"
                    f"{' lengths' if la is not None else ''}{' specials' if specials else ''}")
            total += 1
            try:
                want = run("cpu", S, open_, extend, t, la, lb, mode, reduction, grad=True)
                got = run("cuda", S, open_, extend, t, la, lb, mode, reduction, grad=True)
                nograd = run("cuda", S, open_, extend, t, la, lb, mode, reduction, grad=False)
                msgs, ok = [], True
                for key in want:
                    good, msg = close(got.get(key, torch.empty(0)), want[key], dtype)
                    ok &= good
                    msgs.append(f"{key}: {msg}")
                good, msg = close(nograd["score"], want["score"], dtype)
                ok &= good
                msgs.append(f"score (no grad): {msg}")
                if set(got) != set(want):
                    ok = False
                    msgs.append(f"keys {sorted(got)} vs {sorted(want)}")
            except Exception as exc:  # noqa: BLE001  (a crash is a failure of that case)
                ok, msgs = False, [f"{type(exc).__name__}: {exc}"]
            if not ok:
                failures += 1
            print(f"{'PASS' if ok else 'FAIL'} {name}" + ("" if ok else "  " + "; ".join(msgs)),
                  flush=True)
    torch.cuda.synchronize()
    print(f"{total - failures}/{total} passed"
          f"{' (SOFTALIGN_CUDA_GENERAL set)' if os.environ.get('SOFTALIGN_CUDA_GENERAL') else ''}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
