"""softalign: differentiable (soft) Smith-Waterman alignment as PyTorch operators.

The operators live in one shared library, ``libsoftalign.so``; loading it registers
``torch.ops.softalign.*`` (usable from Python, TorchScript and C++). This module finds and
loads the library and offers the two entry points with any mix of number and tensor penalties:

    import softalign
    score = softalign.smith_waterman(scores, gap_open=-1.0, temperature=1.0)
    score, alignment = softalign.smith_waterman_alignment(scores, -11.0, -1.0, temperature=0.0)

What every argument means is the contract in SPEC.md.
"""
from __future__ import annotations

import numbers
import os
from pathlib import Path
from typing import Optional, Union

import torch

from . import _library
from ._library import cmake_prefix_path, library_path

__all__ = ["__version__", "cmake_prefix_path", "load_library", "library_path", "smith_waterman",
           "smith_waterman_alignment"]
__version__ = _library.package_version()

Penalty = Union[float, torch.Tensor]
_loaded: Optional[str] = None


def load_library(path: Optional[str] = None) -> str:
    """Loads the operator library once and returns its path."""
    global _loaded
    if _loaded is None:
        # Already registered (the caller's torch.ops.load_library, or a C++ host linking it):
        # a second copy's TORCH_LIBRARY would abort the process.
        if torch._C._jit_get_schemas_for_operator("softalign::smith_waterman"):
            _loaded = next((p for p in torch.ops.loaded_libraries
                            if Path(p).name.startswith("libsoftalign")), "<registered>")
        else:
            _loaded = path or library_path()
            _library.load(_loaded)
    elif path is not None and os.path.realpath(path) != os.path.realpath(_loaded):
        raise RuntimeError(f"softalign is already loaded from {_loaded}; one process can load "
                           f"only one libsoftalign, not also {path}")
    return _loaded


def _number(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number or a floating-point tensor, got "
                        f"{type(value).__name__}")
    return float(value)


def _as_tensor(penalty: Optional[Penalty], scores: torch.Tensor,
               name: str) -> Optional[torch.Tensor]:
    if (penalty is None and name == "gap_extend") or isinstance(penalty, torch.Tensor):
        return penalty
    dtype = torch.float64 if scores.dtype == torch.float64 else torch.float32
    # A 0-d CPU tensor, which the op puts on the scores' device without a copy from the host (a
    # tensor it keeps for the number, or a fill): no synchronisation, and allowed while a CUDA
    # graph is being captured.
    return torch.tensor(_number(penalty, name), dtype=dtype)


def _args(scores, gap_open, gap_extend):
    """The overload ("tensor" or "default") and its arguments. Naming the overload spares the
    op packet's resolution, which tries "tensor" first and fails on numbers (~80 us a call)."""
    if isinstance(gap_open, torch.Tensor) or isinstance(gap_extend, torch.Tensor):
        return "tensor", (scores, _as_tensor(gap_open, scores, "gap_open"),
                          _as_tensor(gap_extend, scores, "gap_extend"))
    return "default", (scores, _number(gap_open, "gap_open"),
                       None if gap_extend is None else _number(gap_extend, "gap_extend"))


def smith_waterman(scores: torch.Tensor, gap_open: Penalty = -1.0,
                   gap_extend: Optional[Penalty] = None, temperature: float = 1.0,
                   lengths_a: Optional[torch.Tensor] = None,
                   lengths_b: Optional[torch.Tensor] = None, mode: str = "local",
                   reduction: str = "max") -> torch.Tensor:
    """The (soft) alignment score of every item: shape (B,), or 0-d for (M, N) scores."""
    load_library()
    overload, args = _args(scores, gap_open, gap_extend)
    return getattr(torch.ops.softalign.smith_waterman, overload)(
        *args, temperature=temperature, lengths_a=lengths_a,
        lengths_b=lengths_b, mode=mode, reduction=reduction)


def smith_waterman_alignment(scores: torch.Tensor, gap_open: Penalty = -1.0,
                             gap_extend: Optional[Penalty] = None, temperature: float = 1.0,
                             lengths_a: Optional[torch.Tensor] = None,
                             lengths_b: Optional[torch.Tensor] = None, mode: str = "local",
                             reduction: str = "max") -> tuple[torch.Tensor, torch.Tensor]:
    """The score and d score / d scores (the soft alignment; 0/1 at temperature 0)."""
    load_library()
    overload, args = _args(scores, gap_open, gap_extend)
    return getattr(torch.ops.softalign.smith_waterman_alignment, overload)(
        *args, temperature=temperature, lengths_a=lengths_a,
        lengths_b=lengths_b, mode=mode, reduction=reduction)


# Registers torch.ops.softalign.* on import.
load_library()
