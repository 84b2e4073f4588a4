# The two commands of the README: `make demo` and `make test`. Each installs what it needs
# (Python packages, a Debian package or two) and builds first; both are safe to re-run.
PYTHON ?= python3
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
VENV ?= $(BUILD)/venv
# The source tree's package, for the demo and the tools; `venv` and what runs in it unset it.
export PYTHONPATH := $(CURDIR)/python:$(PYTHONPATH)

.PHONY: setup build build-cuda venv demo train test bench deploy-check clean

setup:
	@bash tools/setup.sh

build: setup
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) > $(BUILD).configure.log 2>&1 || (cat $(BUILD).configure.log; exit 1)
	cmake --build $(BUILD) -j $(JOBS)

# The CUDA backend; compiles and links anywhere nvcc is, runs on a GPU. TORCH_CUDA_ARCH_LIST
# picks the architectures (unset: CMakeLists.txt's list, 8.0 to 12.0+PTX; 9.0a alone is quickest).
build-cuda: setup
	cmake -S . -B $(BUILD)-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DSOFTALIGN_WITH_CUDA=ON $(CMAKE_FLAGS) > $(BUILD)-cuda.configure.log 2>&1 || (cat $(BUILD)-cuda.configure.log; exit 1)
	cmake --build $(BUILD)-cuda -j $(JOBS)

demo: build
	$(PYTHON) examples/demo.py

# Learn a substitution matrix + affine gaps on synthetic families (CPU, well under a minute);
# writes the soft alignment heatmap of a held-out pair to $(BUILD)/train_alignment.png.
train: build
	$(PYTHON) examples/train.py --plot $(BUILD)/train_alignment.png

# `pip install .` into a fresh virtual environment, $(VENV) (recreated each time), that shares
# the system's torch and pip: the wheel is built against that torch (no build isolation, which
# would download a second one) in $(BUILD)/wheel, incrementally.
venv: setup
	rm -rf $(VENV)
	$(PYTHON) -m venv --system-site-packages --without-pip $(VENV)
	env -u PYTHONPATH $(VENV)/bin/python -m pip install -q --no-index --no-build-isolation \
	  --root-user-action=ignore -C build-dir=$(BUILD)/wheel .

# The C++ tests against $(BUILD); the Python tests against the package installed in $(VENV).
test: build venv
	cd $(BUILD) && ctest --output-on-failure
	env -u PYTHONPATH SOFTALIGN_TEST_INSTALLED=1 $(VENV)/bin/python -m pytest -q test_py

bench: build
	$(PYTHON) examples/benchmark.py

# Build examples/cpp_app against the package installed in $(VENV) (softalign.cmake_prefix_path),
# run the C++ API, TorchScript and AOTInductor programs and the torch.export check, comparing
# numbers with Python's; and check `cmake --install` of $(BUILD) into a prefix.
deploy-check: build venv
	env -u PYTHONPATH BUILD=$(BUILD) PYTHON=$(VENV)/bin/python bash tools/check_deployment.sh --no-build

# AddressSanitizer + UndefinedBehaviorSanitizer: the library and the C++ tests instrumented, in
# $(BUILD)-asan (-O1 -g1: quicker to build, as good at finding bugs); libtorch is not. The C++
# tests run with LeakSanitizer on. Then the kernel-facing pytest files (fuzz, properties,
# numerics, edges, errors, reference) against that library, the runtimes preloaded into the
# Python interpreter (not its shim), with detect_leaks=0: CPython, pybind11 and libtorch_python
# never free their module-level objects at exit, which LeakSanitizer reports by the thousand.
sanitize: setup
	cmake -S . -B $(BUILD)-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DSOFTALIGN_SANITIZE=ON $(CMAKE_FLAGS) > $(BUILD)-asan.configure.log 2>&1 || (cat $(BUILD)-asan.configure.log; exit 1)
	cmake --build $(BUILD)-asan -j $(JOBS)
	cd $(BUILD)-asan && UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure
	LD_PRELOAD="$$(g++ -print-file-name=libasan.so) $$(g++ -print-file-name=libubsan.so)" \
	  ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 SOFTALIGN_HYPOTHESIS_SCALE=0.5 \
	  SOFTALIGN_LIBRARY=$(CURDIR)/$(BUILD)-asan/libsoftalign.so \
	  $$($(PYTHON) -c 'import sys; print(sys.executable)') -m pytest -q -p no:cacheprovider \
	  test_py --ignore=test_py/test_integration.py --ignore=test_py/test_train_example.py \
	  --ignore=test_py/test_packaging.py

clean:
	rm -rf $(BUILD) $(BUILD)-cuda $(BUILD)-asan $(BUILD)*.configure.log
