"""SPEC "Bad input": a clear error naming the argument, never a crash or a silent answer."""
import math

import pytest
import torch

import softalign

S = torch.randn(2, 3, 4)
op = torch.ops.softalign.smith_waterman

CASES = {
    "rank": (lambda: softalign.smith_waterman(torch.randn(2, 3, 4, 5)), "scores must be"),
    "rank1": (lambda: softalign.smith_waterman(torch.randn(4)), "scores must be"),
    "integer scores": (lambda: softalign.smith_waterman(torch.ones(2, 3, 4, dtype=torch.int64)),
                       "scores must be float"),
    "complex scores": (lambda: softalign.smith_waterman(torch.randn(2, 3, 4, dtype=torch.cfloat)),
                       "scores must be float"),
    "penalty shape": (lambda: softalign.smith_waterman(S, torch.zeros(3, 4, 5)),
                      "gap_open of shape .* does not broadcast"),
    "penalty per item": (lambda: softalign.smith_waterman(S, torch.zeros(3)),
                         "gap_open of 1 dimension must hold one value per item"),
    "extend shape": (lambda: softalign.smith_waterman(S, -1.0, torch.zeros(5, 1)),
                     "gap_extend of shape .* does not broadcast"),
    "integer penalty": (lambda: softalign.smith_waterman(S, torch.tensor([1, 2])),
                        "gap_open must be a float"),
    "lengths dtype": (lambda: softalign.smith_waterman(S, lengths_a=torch.tensor([1.0, 2.0])),
                      "lengths_a must be an integer tensor"),
    "lengths shape": (lambda: softalign.smith_waterman(S, lengths_b=torch.tensor([1, 2, 3])),
                      r"lengths_b must have shape \(B,\)"),
    "lengths range": (lambda: softalign.smith_waterman(S, lengths_a=torch.tensor([1, 4])),
                      r"lengths_a must lie in \[0, M = 3\]"),
    "negative lengths": (lambda: softalign.smith_waterman(S, lengths_b=torch.tensor([-1, 2])),
                         r"lengths_b must lie in \[0, N = 4\]"),
    "mode": (lambda: softalign.smith_waterman(S, mode="semiglobal"), "mode must be"),
    "reduction": (lambda: softalign.smith_waterman(S, reduction="mean"), "reduction must be"),
    "negative temperature": (lambda: softalign.smith_waterman(S, temperature=-1.0),
                             "temperature must be finite and >= 0"),
    "nan temperature": (lambda: softalign.smith_waterman(S, temperature=math.nan),
                        "temperature must be finite and >= 0"),
    "global empty": (lambda: softalign.smith_waterman(torch.zeros(2, 0, 4), torch.zeros(2, 0, 4),
                                                      mode="global"),
                     "gap_open of shape .* varies along an empty dimension"),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_bad_input_names_the_argument(case):
    call, message = case
    with pytest.raises(RuntimeError, match=message):
        call()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_mixed_devices():
    with pytest.raises(RuntimeError, match="gap_open must be on the scores' device"):
        softalign.smith_waterman(S.cuda(), torch.zeros(2, device="cpu"))


def test_cpu_scalar_penalty_is_accepted():
    torch.testing.assert_close(softalign.smith_waterman(S, torch.tensor(-1.0)),
                               softalign.smith_waterman(S, -1.0))
