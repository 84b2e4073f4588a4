"""Finding libsoftalign.so and loading it after checking it against the running torch.

Where the library is, first found wins:
  $SOFTALIGN_LIBRARY                     a build of one's own (the sanitizer run, GPU scripts)
  softalign/lib/libsoftalign.so          the installed package (pip install .)
  <repository>/build/libsoftalign.so     a source checkout built with `make build`
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Optional

import torch

_PACKAGE = Path(__file__).resolve().parent
_PACKAGED = _PACKAGE / "lib" / "libsoftalign.so"
_REPO = _PACKAGE.parents[1]
BUILD_INFO = "softalign_build.json"

#: The prefix that `find_package(softalign)` searches in an installed package: give it in
#: CMAKE_PREFIX_PATH beside torch.utils.cmake_prefix_path.
cmake_prefix_path = str(_PACKAGE)


def library_path() -> str:
    """Where libsoftalign.so is: $SOFTALIGN_LIBRARY, the installed package's, or build/'s."""
    explicit = os.environ.get("SOFTALIGN_LIBRARY")
    if explicit:
        path = Path(explicit)
    elif _PACKAGED.is_file():
        path = _PACKAGED
    else:
        path = _REPO / "build" / "libsoftalign.so"
    if not path.is_file():
        raise FileNotFoundError(
            f"libsoftalign.so not found at {path}: install the package (pip install .), build "
            "it with `make build`, or point SOFTALIGN_LIBRARY at it")
    return str(path)


def build_info(library: str) -> dict:
    """What the build that made `library` recorded beside it ({} for a bare copy)."""
    try:
        return json.loads((Path(library).parent / BUILD_INFO).read_text())
    except (OSError, ValueError):
        return {}


def package_version() -> str:
    """The installed package's version, or a source checkout's CMake project version."""
    info = build_info(str(_PACKAGED))
    if info.get("version"):
        return info["version"]
    try:
        cmake = (_REPO / "CMakeLists.txt").read_text()
    except OSError:
        return "0+unknown"
    match = re.search(r"project\(softalign VERSION ([0-9.]+)", cmake)
    return match.group(1) if match else "0+unknown"


def _mismatch(library: str, built: Optional[str], why: str) -> ImportError:
    return ImportError(
        f"{library} was built against torch {built or '(unrecorded)'}, but this Python has "
        f"torch {torch.__version__} ({why}): rebuild softalign with this torch (from its "
        f"source: pip install --force-reinstall .), or install "
        + (f"torch=={built}" if built else "the torch it was built with"))


def _check_torch(library: str) -> None:
    """Compares the recorded build with the running torch, before a mismatch can crash a load."""
    info = build_info(library)
    built = info.get("torch")
    running = torch.__version__.split("+")[0]
    if built and built != running:
        raise _mismatch(library, built, "libtorch's C++ ABI changes between releases")
    if info.get("cuda") and torch.version.cuda is None:
        raise _mismatch(library, built, "the library has CUDA kernels; this torch is CPU-only")


def load(library: str) -> None:
    """torch.ops.load_library(library), after comparing its recorded torch with the running one."""
    _check_torch(library)
    try:
        torch.ops.load_library(library)
    except OSError as error:
        # torch wraps the dynamic loader's message: "Could not load this library: ...".
        reason = f"{error} {error.__cause__ or ''}"
        symbol = re.search(r"undefined symbol: (\S+)", reason)
        if symbol is None:
            raise
        raise _mismatch(library, build_info(library).get("torch"),
                        f"undefined symbol {symbol.group(1)}") from error
