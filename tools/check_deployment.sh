#!/usr/bin/env bash
# Deployment check: what a C++ user and a Python-to-C++ user do, each asserting numbers against
# Python's torch.ops.softalign results, with the package pip installed in a virtual environment.
#   1. cmake --install the library into a fresh prefix; check the files of the CMake package;
#   2. the installed Python package: its library, build record, CMake package and RPATH;
#   3. configure and build examples/cpp_app against the installed package (find_package(softalign)
#      through softalign.cmake_prefix_path), align_cli (the C++ API) vs
#      examples/cpp_app/align_reference.py;
#   4. a TorchScript model saved by examples/export_torchscript.py, run by run_torchscript;
#   5. examples/export_check.py: torch.export (strict, non-strict, dynamic shapes) equals eager,
#      AOTInductor packaging, and the package run from C++ by run_aoti.
#
#   bash tools/check_deployment.sh              builds and installs first (make build venv)
#   bash tools/check_deployment.sh --no-build   uses $BUILD and $VENV as they are (make deploy-check)
# BUILD (default build) is the library's build folder, VENV (default $BUILD/venv) the virtual
# environment with the package installed (PYTHON: its python); KEEP=1 keeps the work folder;
# SOFTALIGN_ALLOW_NO_AOTI=1 lets a torch without AOTInductor support pass (printing why).
# Exits non-zero on any failure or mismatch.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${BUILD:-build}
VENV=${VENV:-$BUILD/venv}
PYTHON=${PYTHON:-$VENV/bin/python}
# Absolute (steps run from /), the venv's link itself: resolved, it would be the system's python.
case $PYTHON in */*) PYTHON=$(cd "$(dirname "$PYTHON")" && pwd)/$(basename "$PYTHON") ;; esac
TOL=1e-6
[ "${1:-}" = "--no-build" ] || make -s build venv BUILD="$BUILD" VENV="$VENV"
[ -f "$BUILD/libsoftalign.so" ] || { echo "no $BUILD/libsoftalign.so: run make build" >&2; exit 1; }
# The installed package, not the source tree's python/.
unset PYTHONPATH SOFTALIGN_LIBRARY

WORK=$(mktemp -d /tmp/softalign-deploy.XXXXXX)
if [ "${KEEP:-0}" = 1 ]; then echo "work folder: $WORK"; else trap 'rm -rf "$WORK"' EXIT; fi
PREFIX=$WORK/prefix
# A cold AOTInductor cache of our own: the package is compiled in this run, not reused.
export TORCHINDUCTOR_CACHE_DIR=$WORK/inductor-cache
START=$SECONDS
step_start=$SECONDS
step() {  # step NAME: prints the time the previous step took and this step's name
  [ -z "${STEP:-}" ] || echo "    ($STEP: $((SECONDS - step_start)) s)"
  STEP=$1
  step_start=$SECONDS
  echo "== $1"
}
compare() { "$PYTHON" tools/compare_numbers.py --tol "$TOL" "$@"; }
# The C++ programs run from / without LD_LIBRARY_PATH: RPATHs alone must find every library.
run_cpp() { (cd / && env -u LD_LIBRARY_PATH "$@"); }

step "install $BUILD into $PREFIX"
cmake --install "$BUILD" --prefix "$PREFIX" > "$WORK/install.log"
for f in lib/libsoftalign.so include/softalign/softalign.h lib/cmake/softalign/softalignConfig.cmake \
         lib/cmake/softalign/softalignConfigVersion.cmake lib/cmake/softalign/softalignTargets.cmake; do
  [ -f "$PREFIX/$f" ] || { echo "missing from the install: $f" >&2; exit 1; }
done
built_cuda=$(sed -n 's/^SOFTALIGN_WITH_CUDA:BOOL=//p' "$BUILD/CMakeCache.txt")
grep -q "^set(SOFTALIGN_WITH_CUDA ${built_cuda:-OFF})" "$PREFIX/lib/cmake/softalign/softalignConfig.cmake" ||
  { echo "softalignConfig.cmake does not record SOFTALIGN_WITH_CUDA=${built_cuda:-OFF}" >&2; exit 1; }
echo "package files present; SOFTALIGN_WITH_CUDA=${built_cuda:-OFF}"
readelf -d "$PREFIX/lib/libsoftalign.so" | grep -E 'R(UN)?PATH'

step "the Python package installed in $VENV"
(cd / && "$PYTHON" - "$ROOT") <<'EOF'
import json, sys
from pathlib import Path
import torch
import softalign
root, package = Path(sys.argv[1]), Path(softalign.__file__).parent
assert "site-packages" in package.parts and not package.is_relative_to(root / "python"), package
library = Path(softalign.library_path())
assert library == package / "lib" / "libsoftalign.so", library
assert str(library) in torch.ops.loaded_libraries, "import softalign loads the library"
info = json.loads((library.parent / "softalign_build.json").read_text())
assert info["torch"] == torch.__version__.split("+")[0], (info, torch.__version__)
assert info["version"] == softalign.__version__, (info, softalign.__version__)
config = Path(softalign.cmake_prefix_path) / "lib" / "cmake" / "softalign" / "softalignConfig.cmake"
assert config.is_file() and (package / "include" / "softalign" / "softalign.h").is_file(), config
print(f"softalign {softalign.__version__} in {package} (torch {torch.__version__})")
EOF
PACKAGED=$("$PYTHON" -c 'import softalign; print(softalign.library_path())')
# In site-packages the library finds the torch wheel's libraries beside it, not this machine's.
readelf -d "$PACKAGED" | grep -E 'R(UN)?PATH' | tee "$WORK/rpath.txt"
grep -qF '$ORIGIN/../../torch/lib' "$WORK/rpath.txt" || { echo "no \$ORIGIN RPATH" >&2; exit 1; }
# The examples' Python puts the source tree's python/ first: the installed library all the same.
export SOFTALIGN_LIBRARY=$PACKAGED

step "configure and build examples/cpp_app against the installed package"
APP_PREFIX=$("$PYTHON" -c 'import softalign, torch
print(softalign.cmake_prefix_path + ";" + torch.utils.cmake_prefix_path)')
cmake -S examples/cpp_app -B "$WORK/app" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  "-DCMAKE_PREFIX_PATH=$APP_PREFIX" > "$WORK/app-configure.log" 2>&1 ||
  { cat "$WORK/app-configure.log"; exit 1; }
grep "softalign .* from" "$WORK/app-configure.log"
grep -q "softalign .* from .*site-packages/softalign/" "$WORK/app-configure.log" ||
  { echo "find_package(softalign) did not find the installed package" >&2; exit 1; }
cmake --build "$WORK/app" -j "$(nproc)" > "$WORK/app-build.log" 2>&1 || { cat "$WORK/app-build.log"; exit 1; }

step "align_cli (C++ API) vs torch.ops from Python"
run_cpp "$WORK/app/align_cli" > "$WORK/align_cpp.txt"
"$PYTHON" examples/cpp_app/align_reference.py > "$WORK/align_py.txt"
compare "$WORK/align_py.txt" "$WORK/align_cpp.txt"

step "TorchScript: scripted in Python, run from C++ by run_torchscript"
"$PYTHON" examples/export_torchscript.py "$WORK/model.pt" > "$WORK/torchscript_py.txt"
run_cpp "$WORK/app/run_torchscript" "$WORK/model.pt" > "$WORK/torchscript_cpp.txt"
compare "$WORK/torchscript_py.txt" "$WORK/torchscript_cpp.txt"

step "torch.export and AOTInductor (examples/export_check.py), the package run from C++ by run_aoti"
aoti_status=0
"$PYTHON" examples/export_check.py --aoti "$WORK/model.pt2" > "$WORK/export_py.txt" 2> "$WORK/export.log" ||
  aoti_status=$?
grep '^#' "$WORK/export_py.txt" || true
if [ "$aoti_status" = 3 ] && [ "${SOFTALIGN_ALLOW_NO_AOTI:-0}" = 1 ]; then
  echo "AOTInductor skipped (SOFTALIGN_ALLOW_NO_AOTI=1)"
elif [ "$aoti_status" != 0 ]; then
  cat "$WORK/export.log" >&2
  echo "examples/export_check.py failed (exit $aoti_status)" >&2
  exit 1
else
  run_cpp "$WORK/app/run_aoti" "$WORK/model.pt2" > "$WORK/aoti_cpp.txt"
  compare "$WORK/export_py.txt" "$WORK/aoti_cpp.txt"
fi
echo "    ($STEP: $((SECONDS - step_start)) s)"
echo "deployment check passed in $((SECONDS - START)) s"
