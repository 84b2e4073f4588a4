"""torch.export: a model that uses soft Smith-Waterman exports whole and gives eager's numbers.

    python3 examples/export_check.py                      # export checks only (seconds)
    python3 examples/export_check.py --aoti model.pt2     # and AOTInductor packaging (20-40 s on 2 cores)
    build-app/run_aoti model.pt2                          # examples/cpp_app: the package from C++

Exports examples/export_torchscript.py's SoftAlignScorer with torch.export.export (non-strict
and strict), asserts that the graph calls softalign::smith_waterman as one node (no graph
break, no fallback), that the exported program's scores and gradients equal eager's, and that
an export with dynamic batch and sequence sizes runs other shapes right. With --aoti it packages
the exported program with AOTInductor (torch._inductor.aoti_compile_and_package), runs the
package from Python and compares it too, then prints the package's scores as
"<name> <index> <value>" lines for run_aoti.cpp to be compared with. When packaging fails the
reason is printed and the exit status is 3 (not 1: the export itself was fine).
"""
import argparse
import sys
import time
from pathlib import Path

import torch
from torch.export import Dim

sys.path.insert(0, str(Path(__file__).resolve().parent))
from export_torchscript import SoftAlignScorer, example_inputs, numbers, softalign  # noqa: E402

def check_graph(ep: torch.export.ExportedProgram) -> None:
    targets = [node.target for node in ep.graph.nodes if node.op == "call_function"]
    calls = [t for t in targets if str(t).startswith("softalign.")]
    assert calls == [torch.ops.softalign.smith_waterman.tensor], f"expected one softalign.smith_waterman.tensor call, got {calls}"


def check_same(got, expected, what: str) -> None:
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12, msg=lambda m: f"{what}: {m}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aoti", metavar="PATH", help="also package with AOTInductor to PATH (.pt2)")
    args = parser.parse_args()
    softalign.load_library()
    model = SoftAlignScorer()
    inputs = example_inputs()
    eager = model(*inputs)

    for strict in (False, True):
        start = time.perf_counter()
        ep = torch.export.export(model, inputs, strict=strict)
        check_graph(ep)
        exported = ep.module()
        check_same(exported(*inputs), eager, f"exported (strict={strict}) scores")
        assert numbers(exported, inputs) == numbers(model, inputs), "exported gradients differ"
        print(f"# torch.export (strict={strict}): one softalign.smith_waterman.tensor node, "
              f"scores and gap gradients equal eager ({time.perf_counter() - start:.1f} s)")

    # Dynamic batch and lengths: one export runs other shapes.
    batch, m, n = Dim("batch"), Dim("m"), Dim("n")
    dynamic = torch.export.export(model, inputs, strict=False, dynamic_shapes=(
        {0: batch, 1: m}, {0: batch, 1: n}, {0: batch}, {0: batch}))
    check_graph(dynamic)
    generator = torch.Generator().manual_seed(1)
    other = (torch.randint(0, 20, (5, 11), generator=generator),
             torch.randint(0, 20, (5, 4), generator=generator),
             torch.tensor([11, 7, 1, 0, 4]), torch.tensor([4, 4, 2, 3, 0]))
    check_same(dynamic.module()(*other), model(*other), "dynamic-shape export on (5, 11) x (5, 4)")
    print("# torch.export with dynamic batch/lengths: runs a (5, 11) x (5, 4) batch as eager does")

    if not args.aoti:
        print("# AOTInductor: not attempted (pass --aoti PATH; 20-40 s on 2 CPU cores)")
        return
    start = time.perf_counter()
    try:
        path = torch._inductor.aoti_compile_and_package(ep, package_path=args.aoti)
        packaged = torch._inductor.aoti_load_package(path)(*inputs)
    except Exception as error:  # what stops it, in one line, for CI logs
        reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
        print(f"# AOTInductor: packaging failed after {time.perf_counter() - start:.0f} s: "
              f"{type(error).__name__}: {reason}")
        sys.exit(3)
    check_same(packaged, eager.detach(), "AOTInductor package scores")
    print(f"# AOTInductor: packaged {path} and ran it from Python, scores equal eager "
          f"({time.perf_counter() - start:.0f} s)")
    for k, value in enumerate(packaged.tolist()):
        print(f"score {k} {value!r}")


if __name__ == "__main__":
    main()
