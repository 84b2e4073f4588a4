"""Python code run by an interpreter of its own, with the library on its path: for what only a
process's first use of something shows (a first fill, a first launch)."""
import os
import subprocess
import sys
from pathlib import Path

import softalign

ROOT = Path(__file__).resolve().parents[1]  # the repository


def run_in_fresh_process(code: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Runs `code` with the softalign this process imported (the installed package, or the
    checkout's python/) first on its path; fails the calling test with its output when it exits
    non-zero, else returns the finished process (its stdout and stderr)."""
    package_root = Path(softalign.__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(package_root), os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=timeout)
    assert run.returncode == 0, run.stdout + run.stderr
    return run
