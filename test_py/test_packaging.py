"""The package around the library: loading on import, its version, where it finds the library,
and the error for a library built against another torch."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import softalign

ROOT = Path(__file__).resolve().parents[1]


def python_in(cwd, code, **env):
    """Runs `code` in a fresh interpreter from `cwd` that imports the package this run tests."""
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SOFTALIGN_LIBRARY")}
    environment.update(PYTHONPATH=str(Path(softalign.__file__).parents[1]), **env)
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=environment,
                          capture_output=True, text=True, timeout=120)


def test_version_is_the_cmake_project_version():
    cmake = (ROOT / "CMakeLists.txt").read_text()
    assert softalign.__version__ == re.search(r"project\(softalign VERSION ([0-9.]+)", cmake).group(1)


def test_import_registers_the_ops_from_any_directory():
    run = python_in("/", "import torch, softalign\n"
                         "print(torch.ops.softalign.smith_waterman.default._schema.name, "
                         "softalign.smith_waterman(torch.randn(2, 5, 6)).shape)")
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["softalign::smith_waterman", "torch.Size([2])"]


@pytest.mark.skipif(os.environ.get("SOFTALIGN_TEST_INSTALLED") != "1",
                    reason="the installed package only (make test)")
def test_installed_package_has_its_library_and_cmake_package():
    package = Path(softalign.__file__).parent
    if not os.environ.get("SOFTALIGN_LIBRARY"):
        assert softalign.library_path() == str(package / "lib" / "libsoftalign.so")
    prefix = Path(softalign.cmake_prefix_path)
    assert (prefix / "lib" / "cmake" / "softalign" / "softalignConfig.cmake").is_file()
    assert (prefix / "include" / "softalign" / "softalign.h").is_file()
    info = json.loads((package / "lib" / "softalign_build.json").read_text())
    assert info["torch"] == torch.__version__.split("+")[0]


def library_copy(tmp_path, torch_version):
    """The library copied beside a build record that names `torch_version`."""
    copy = tmp_path / "libsoftalign.so"
    shutil.copy(softalign.load_library(), copy)
    (tmp_path / "softalign_build.json").write_text(json.dumps(
        {"version": softalign.__version__, "torch": torch_version, "cuda": False}))
    return copy


def test_another_torch_is_an_import_error_naming_both_versions(tmp_path):
    copy = library_copy(tmp_path, "2.9.1")
    run = python_in("/", "import softalign", SOFTALIGN_LIBRARY=str(copy))
    assert "ImportError" in run.stderr and "built against torch 2.9.1" in run.stderr, run.stderr
    assert f"torch {torch.__version__}" in run.stderr, run.stderr


def test_the_same_torch_loads(tmp_path):
    copy = library_copy(tmp_path, torch.__version__.split("+")[0])
    run = python_in("/", "import softalign; print(softalign.load_library())",
                    SOFTALIGN_LIBRARY=str(copy))
    assert run.returncode == 0 and run.stdout.strip() == str(copy), run.stderr[-2000:]


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_an_undefined_symbol_is_an_import_error_naming_both_versions(tmp_path):
    # A library that needs a libtorch function this torch lacks, as one built against another
    # release would.
    source = tmp_path / "missing.cpp"
    source.write_text("namespace c10 { void function_of_another_release(); }\n"
                      "void call() { c10::function_of_another_release(); }\n")
    library = tmp_path / "libsoftalign.so"
    subprocess.run(["g++", "-shared", "-fPIC", str(source), "-o", str(library)], check=True)
    run = python_in("/", "import softalign", SOFTALIGN_LIBRARY=str(library))
    assert "ImportError" in run.stderr, run.stderr
    assert "undefined symbol _ZN3c1027function_of_another_releaseEv" in run.stderr, run.stderr
    assert f"torch {torch.__version__}" in run.stderr and "(unrecorded)" in run.stderr, run.stderr
