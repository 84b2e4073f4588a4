"""softalign: differentiable (soft) Smith-Waterman alignment as PyTorch operators.

The operators live in one shared library, ``libsoftalign.so``; loading it registers
``torch.ops.softalign.*`` (usable from Python, TorchScript and C++). This module finds and
loads the library and offers the two entry points with any mix of number and tensor penalties:

    import softalign
    score = softalign.smith_waterman(scores, gap_open=-1.0, temperature=1.0)
    score, alignment = softalign.smith_waterman_alignment(scores, -11.0, gap_extend=-1.0,
                                                          temperature=0.0)

Every argument after ``gap_open`` is keyword-only; ``help(softalign.smith_waterman)`` documents
them all. What they mean is the contract in docs/spec.md.
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
    """Loads the operator library once and returns its path.

    One process holds one copy of the library. Asking for a second file (another path, not a
    link to the first) raises RuntimeError naming both. A second copy loaded behind this
    function's back, by ``torch.ops.load_library(other_path)`` or a C++ host, cannot raise
    (it is loaded by the dynamic linker): it registers nothing, every call keeps using the
    first copy, and it warns on stderr naming both files.
    """
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
        _set_op_docs()
    if path is not None and os.path.realpath(path) != os.path.realpath(_loaded):
        first = _first_copy_path() or _loaded
        raise RuntimeError(f"softalign is already loaded from {first}; one process can load "
                           f"only one libsoftalign, not also {path}")
    return _loaded


def _first_copy_path() -> Optional[str]:
    """The file of the copy that registered the ops (None for a library without the op)."""
    try:
        return torch.ops.softalign._library_path()
    except (AttributeError, RuntimeError):
        return None


_NUMERIC_HINT = "convert a list or NumPy array with torch.as_tensor"


def _check_scores(scores) -> None:
    if not isinstance(scores, torch.Tensor):
        raise TypeError(f"scores must be a floating-point torch.Tensor of shape (B, M, N) or "
                        f"(M, N), got {type(scores).__name__} ({_NUMERIC_HINT})")


def _number(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number or a floating-point torch.Tensor, got "
                        f"{type(value).__name__}"
                        + ("" if isinstance(value, bool) else f" ({_NUMERIC_HINT})"))
    return float(value)


def _penalty_number(value, name: str) -> float:
    number = _number(value, name)
    if number > 0:
        raise ValueError(f"{name} must be <= 0: penalties are added to the score (the seed's "
                         f"gap_open = -1.0), so a gap cost of {number:g} (BLAST's and EMBOSS's "
                         f"convention) is {name}={-number:g}, got {name}={number:g}")
    return number


def _as_tensor(penalty: Optional[Penalty], scores: torch.Tensor,
               name: str) -> Optional[torch.Tensor]:
    if (penalty is None and name == "gap_extend") or isinstance(penalty, torch.Tensor):
        return penalty
    dtype = torch.float64 if scores.dtype == torch.float64 else torch.float32
    # A 0-d CPU tensor, which the op puts on the scores' device without a copy from the host (a
    # tensor it keeps for the number, or a fill): no synchronisation, and allowed while a CUDA
    # graph is being captured.
    return torch.tensor(_penalty_number(penalty, name), dtype=dtype)


def _check_rest(temperature, lengths_a, lengths_b, mode, reduction):
    if not isinstance(temperature, torch.Tensor):
        _number(temperature, "temperature")
    for name, lengths in (("lengths_a", lengths_a), ("lengths_b", lengths_b)):
        if lengths is not None and not isinstance(lengths, torch.Tensor):
            raise TypeError(f"{name} must be None or an integer torch.Tensor of shape (B,), got "
                            f"{type(lengths).__name__} ({_NUMERIC_HINT})")
    for name, value, allowed in (("mode", mode, '"local" or "global"'),
                                 ("reduction", reduction, '"max" or "soft"')):
        if not isinstance(value, str):
            raise TypeError(f"{name} must be {allowed}, got {type(value).__name__}")


def _args(scores, gap_open, gap_extend, temperature, lengths_a, lengths_b, mode, reduction):
    """The overload and its arguments. Naming the overload spares the op packet's resolution,
    which tries the tensor overloads first and fails on numbers (~80 us a call)."""
    _check_scores(scores)
    _check_rest(temperature, lengths_a, lengths_b, mode, reduction)
    if isinstance(temperature, torch.Tensor):
        return "temperature_tensor", (scores, _as_tensor(gap_open, scores, "gap_open"),
                                      _as_tensor(gap_extend, scores, "gap_extend"))
    if isinstance(gap_open, torch.Tensor) or isinstance(gap_extend, torch.Tensor):
        return "tensor", (scores, _as_tensor(gap_open, scores, "gap_open"),
                          _as_tensor(gap_extend, scores, "gap_extend"))
    return "default", (scores, _penalty_number(gap_open, "gap_open"),
                       None if gap_extend is None else _penalty_number(gap_extend, "gap_extend"))


_ARGUMENTS = """
    Args:
        scores: ``(B, M, N)`` or unbatched ``(M, N)`` floating-point tensor (float16,
            bfloat16, float32 or float64; half types compute in float32). ``scores[b, i, j]``
            scores aligning residue ``i`` of sequence a with residue ``j`` of sequence b.
            ``-inf`` forbids a pair; NaN makes that item's score NaN (and every gradient of
            that item NaN), other items are untouched.
        gap_open: the gap penalty, default ``-1.0`` (the seed's). Penalties are ADDED to the
            score, so they are <= 0: BLAST's and EMBOSS's "gap open 11" is ``gap_open=-11``.
            A number > 0 is an error; 0 and ``-inf`` (gaps forbidden) are allowed. A number,
            or a floating-point tensor (learnable): ``()`` for all; ``(B,)`` or ``(B, 1, 1)``
            one per item; ``(M, N)`` per position, shared; ``(B, M, N)`` per item and
            position; any shape that broadcasts to ``(B, M, N)``. A tensor penalty is not
            sign-checked (a learned one may drift positive). Lists and NumPy arrays: convert
            with ``torch.as_tensor``.
        gap_extend: keyword-only. ``None`` (default): linear gaps, every gap step costs
            ``gap_open``. Set: affine gaps, a gap's first step costs ``gap_open`` and each
            further step ``gap_extend``; same types, shapes and sign as ``gap_open``.
        temperature: keyword-only, default ``1.0``. ``t > 0``: the soft maximum
            ``t * log(sum(exp(x / t)))`` at every cell (differentiable, the soft alignment).
            ``t = 0``: the hard recurrence (classic Smith-Waterman / Gotoh /
            Needleman-Wunsch); gradients are then the 0/1 optimal path. Negative or NaN is an
            error. A number, or a floating-point tensor, 0-d or ``(B,)`` (one per item), whose
            gradient is computed (``d score / d t``; 0 at ``t = 0``); its value is read on the
            host (a synchronisation for a CUDA tensor), and a ``(B,)`` tensor runs one call per
            distinct value.
        lengths_a, lengths_b: keyword-only, ``None`` or integer tensors ``(B,)`` (on the CPU or
            the scores' device), ``0 <= lengths_a[b] <= M``, ``0 <= lengths_b[b] <= N``: item
            ``b`` aligns the top-left block ``scores[b, :lengths_a[b], :lengths_b[b]]``.
        mode: keyword-only, ``"local"`` (default, Smith-Waterman) or ``"global"``
            (Needleman-Wunsch: end to end, the score of the final cell).
        reduction: keyword-only, how local mode reduces the end cells: ``"max"`` (default, the
            seed's) or ``"soft"`` (the soft maximum at ``temperature``). Global mode has one
            end cell: ``reduction="soft"`` with ``mode="global"`` is an error.
"""


def smith_waterman(scores: torch.Tensor, gap_open: Penalty = -1.0, *,
                   gap_extend: Optional[Penalty] = None,
                   temperature: Union[float, torch.Tensor] = 1.0,
                   lengths_a: Optional[torch.Tensor] = None,
                   lengths_b: Optional[torch.Tensor] = None, mode: str = "local",
                   reduction: str = "max") -> torch.Tensor:
    load_library()
    overload, args = _args(scores, gap_open, gap_extend, temperature, lengths_a, lengths_b,
                           mode, reduction)
    return getattr(torch.ops.softalign.smith_waterman, overload)(
        *args[:2], gap_extend=args[2], temperature=temperature, lengths_a=lengths_a,
        lengths_b=lengths_b, mode=mode, reduction=reduction)


smith_waterman.__doc__ = """The (soft) Smith-Waterman alignment score of every item.
""" + _ARGUMENTS + """
    Returns:
        ``(B,)`` scores (``()`` for unbatched scores) in the scores' dtype, differentiable with
        respect to ``scores``, tensor penalties and a tensor temperature.

    Example::

        >>> import torch, softalign
        >>> S = torch.tensor([[[2.0, -1.0], [-1.0, 2.0]]], requires_grad=True)
        >>> score = softalign.smith_waterman(S, -11.0, gap_extend=-1.0, temperature=0.0)
        >>> score.sum().backward()
        >>> score.detach(), S.grad  # at t = 0, d score / d S is the optimal path's pairs
        (tensor([4.]), tensor([[[1., 0.],
                 [0., 1.]]]))
        >>> softalign.smith_waterman(S.detach(), -11.0, gap_extend=-1.0)  # t = 1: soft, >= hard
        tensor([4.1269])
"""


def smith_waterman_alignment(scores: torch.Tensor, gap_open: Penalty = -1.0, *,
                             gap_extend: Optional[Penalty] = None,
                             temperature: Union[float, torch.Tensor] = 1.0,
                             lengths_a: Optional[torch.Tensor] = None,
                             lengths_b: Optional[torch.Tensor] = None, mode: str = "local",
                             reduction: str = "max") -> tuple[torch.Tensor, torch.Tensor]:
    load_library()
    overload, args = _args(scores, gap_open, gap_extend, temperature, lengths_a, lengths_b,
                           mode, reduction)
    return getattr(torch.ops.softalign.smith_waterman_alignment, overload)(
        *args[:2], gap_extend=args[2], temperature=temperature, lengths_a=lengths_a,
        lengths_b=lengths_b, mode=mode, reduction=reduction)


smith_waterman_alignment.__doc__ = """The score and the alignment, d score / d scores, in one fused
    call without autograd (for inference and plotting).
""" + _ARGUMENTS + """
    Returns:
        ``(score, alignment)``: the scores as ``smith_waterman`` returns them, and
        ``d score / d scores`` in the shape and dtype of ``scores``: entries in ``[0, 1]``, the
        expected alignment at ``temperature`` (0/1, the optimal path, at ``t = 0``); NaN
        throughout for an item whose score is NaN.

    Example::

        >>> import torch, softalign
        >>> S = torch.tensor([[2.0, -1.0], [-1.0, 2.0]])
        >>> score, alignment = softalign.smith_waterman_alignment(S, -1.0, temperature=0.0)
        >>> alignment
        tensor([[1., 0.],
                [0., 1.]])
"""

_OP_DOC = """softalign::{name}: {what}

Every argument after gap_open is keyword-only. Penalties are ADDED (<= 0: BLAST's "gap open 11"
is gap_open=-11; a number > 0 is an error); gap_extend set selects affine gaps; temperature 0 is
the hard recurrence, a tensor temperature (0-d or (B,)) gets a gradient; reduction="soft" is
for mode="local" only. Through torch.ops, bad argument types get PyTorch's parse errors; the
Python function softalign.{name} checks them and names the argument: see
help(softalign.{name}) for every argument.

Overloads (tried in this order):
{schemas}
"""


def _set_op_docs() -> None:
    """Docstrings for torch.ops.softalign.smith_waterman{,_alignment} and their overloads."""
    for name, what in (("smith_waterman", "the (soft) alignment score of every item."),
                       ("smith_waterman_alignment",
                        "the score and d score / d scores, fused, without autograd.")):
        try:
            packet = getattr(torch.ops.softalign, name)
            schemas = [str(s) for s in torch._C._jit_get_schemas_for_operator(f"softalign::{name}")]
            doc = _OP_DOC.format(name=name, what=what,
                                 schemas="\n".join(f"  {s}" for s in schemas))
            packet.__doc__ = doc
            for overload in packet.overloads():
                getattr(packet, overload).__doc__ = doc
        except (AttributeError, RuntimeError):
            pass  # a library without these ops: nothing to document


# Registers torch.ops.softalign.* on import.
load_library()
