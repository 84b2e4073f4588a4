#!/usr/bin/env python3
"""A/B of forward + backward (score.sum().backward(), eager) between CUDA libraries built for
sm_90a (tools/build_variant.sh), interleaved round by round so that drift hits each alike. Each
library runs in a process of its own (one library a process); per case the median of REPS calls
after a warm-up, as GCUPS (B M N cells a call) and milliseconds.

    python3 tools/fwd_bwd_ab.py build-libs/main.so build-libs/new.so [--rounds 2]
        [--cases affine:local:max:65536:32:32,...]

A case is model:mode:reduction:B:M:N (t = 1, open -1, extend -0.5 for affine; gap -1 linear).
"""
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CASES = ",".join(
    f"affine:{end}:{shape}"
    for shape in ("65536:32:32", "4096:32:32", "1024:32:32", "16:32:32")
    for end in ("local:max", "local:soft", "global:max"))

CHILD = r"""
import json, sys, torch
sys.path.insert(0, {python!r})
import softalign
cases = {cases!r}
out = []
for case in cases.split(","):
    model, mode, reduction, B, M, N = case.split(":")
    B, M, N = int(B), int(M), int(N)
    g = torch.Generator(device="cuda").manual_seed(0)
    S = torch.randn(B, M, N, device="cuda", generator=g).requires_grad_()
    gaps = dict(gap_open=-1.0, gap_extend=-0.5) if model == "affine" else dict(gap_open=-1.0)
    def call():
        softalign.smith_waterman(S, mode=mode, reduction=reduction, temperature=1.0,
                                 **gaps).sum().backward()
    for _ in range(3):
        call()
    reps = max(5, min(200, int(2e9 // max(B * M * N, 1))))
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    ms = times[len(times) // 2]
    out.append(dict(case=case, ms=ms, gcups=B * M * N / (ms * 1e-3) / 1e9))
print("RESULT " + json.dumps(out))
"""


def run(lib, cases):
    env = dict(os.environ, SOFTALIGN_LIBRARY=str(Path(lib).resolve()))
    code = CHILD.format(python=str(ROOT / "python"), cases=cases)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=600)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise SystemExit(f"{lib}: no result\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("libs", nargs="+")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cases", default=DEFAULT_CASES)
    a = ap.parse_args()
    results = {lib: [] for lib in a.libs}
    for r in range(a.rounds):
        for lib in a.libs:
            results[lib].append(run(lib, a.cases))
    names = [Path(lib).stem for lib in a.libs]
    print(f"{'case':32s}" + "".join(f"{n:>22s}" for n in names) + "   (GCUPS, ms; best round)")
    for k, case in enumerate(a.cases.split(",")):
        row = f"{case:32s}"
        for lib in a.libs:
            best = max((rnd[k] for rnd in results[lib]), key=lambda x: x["gcups"])
            row += f"{best['gcups']:12.1f} {best['ms']:8.3f}ms"
        print(row)


if __name__ == "__main__":
    main()
