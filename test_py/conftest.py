"""Shared fixtures: the loaded library, the devices to run on, and random problems."""
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import softalign  # noqa: E402

softalign.load_library()

# CUDA cases carry "cuda" in their id, so `pytest -k cuda` runs just them on a GPU machine.
DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(),
                                                  reason="no CUDA device")),
]
