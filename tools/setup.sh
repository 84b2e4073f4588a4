#!/usr/bin/env bash
# Installs what building and testing need; quick when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
need_apt=()
command -v cmake >/dev/null || need_apt+=(cmake)
command -v ninja >/dev/null || need_apt+=(ninja-build)
command -v g++ >/dev/null || need_apt+=(g++)
[ -f /usr/include/gtest/gtest.h ] || need_apt+=(libgtest-dev)
# `make test` installs the package into a virtual environment of its own.
python3 -c 'import ensurepip, venv' 2>/dev/null || need_apt+=(python3-venv)
if [ ${#need_apt[@]} -gt 0 ]; then
  apt-get update -qq && apt-get install -y -qq "${need_apt[@]}"
fi
python3 -c 'import torch, numpy, pytest, hypothesis, scikit_build_core
assert torch.__version__.startswith("2.11.0")' 2>/dev/null ||
  python3 -m pip install -q -r requirements.txt
# Optional (examples/train.py --plot): never fails the setup.
python3 -c 'import matplotlib' 2>/dev/null || python3 -m pip install -q matplotlib ||
  echo "setup: matplotlib not installed; examples/train.py --plot needs it" >&2
