#!/usr/bin/env bash
# Acceptance of the packaging, as a new user meets it: a fresh clone of the committed tree, a
# fresh virtual environment without the system's packages, a plain `pip install .` (build
# isolation: pip fetches scikit-build-core and torch 2.11.0 for the build, torch again for the
# environment, from its cache when it has them), then the import from /.
#   bash tools/check_install.sh          KEEP=1 keeps the work folder; PYTHON (python3)
# The CUDA build: SOFTALIGN_CUDA=1 (and TORCH_CUDA_ARCH_LIST) pass through to pip.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
WORK=$(mktemp -d /tmp/softalign-install.XXXXXX)
if [ "${KEEP:-0}" = 1 ]; then echo "work folder: $WORK"; else trap 'rm -rf "$WORK"' EXIT; fi
unset PYTHONPATH SOFTALIGN_LIBRARY
START=$SECONDS
git clone -q --depth 1 "file://$PWD" "$WORK/softalign"
"$PYTHON" -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install -q --root-user-action=ignore "$WORK/softalign"
echo "pip install . in $((SECONDS - START)) s"
cd / && "$WORK/venv/bin/python" -c "import softalign, torch
print(softalign.__version__, softalign.smith_waterman(torch.randn(2, 5, 6)))
print(softalign.library_path())"
