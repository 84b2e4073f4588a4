#!/usr/bin/env bash
# cuobjdump on a machine whose CUDA toolkit lacks it (the CI machine: nvcc and ptxas only), from
# PyPI's nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm wheels (-sass needs nvdisasm), unpacked
# once into .tools/ (ignored by git). Arguments go to cuobjdump, e.g.
#   bash tools/cuobjdump.sh -sass build-libs/main.so | python3 tools/sass_histogram.py --loops backward_kernelILb0ELi32ELi1E
set -euo pipefail
if command -v cuobjdump > /dev/null && command -v nvdisasm > /dev/null; then
  exec cuobjdump "$@"
fi
dir=$(cd "$(dirname "$0")/.." && pwd)/.tools/cuobjdump
bin=$dir/unpacked/nvidia/cu13/bin
if [ ! -x "$bin/cuobjdump" ] || [ ! -x "$bin/nvdisasm" ]; then
  mkdir -p "$dir"
  python3 -m pip download -q --no-deps nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm -d "$dir" >&2
  for wheel in "$dir"/*.whl; do python3 -m zipfile -e "$wheel" "$dir/unpacked"; done
  chmod +x "$bin"/*
fi
PATH=$bin:$PATH exec cuobjdump "$@"
