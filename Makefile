# The two commands of the README: `make demo` and `make test`. Each installs what it needs
# (Python packages, a Debian package or two) and builds first; both are safe to re-run.
PYTHON ?= python3
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
export PYTHONPATH := $(CURDIR)/python:$(PYTHONPATH)

.PHONY: setup build build-cuda demo train test bench deploy-check clean

setup:
	@bash tools/setup.sh

build: setup
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) > $(BUILD).configure.log 2>&1 || (cat $(BUILD).configure.log; exit 1)
	cmake --build $(BUILD) -j $(JOBS)

# The CUDA backend for Hopper (sm_90a); compiles and links anywhere nvcc is, runs on a GPU.
build-cuda: setup
	TORCH_CUDA_ARCH_LIST=$${TORCH_CUDA_ARCH_LIST:-9.0a} cmake -S . -B $(BUILD)-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DSOFTALIGN_WITH_CUDA=ON $(CMAKE_FLAGS) > $(BUILD)-cuda.configure.log 2>&1 || (cat $(BUILD)-cuda.configure.log; exit 1)
	cmake --build $(BUILD)-cuda -j $(JOBS)

demo: build
	$(PYTHON) examples/demo.py

# Learn a substitution matrix + affine gaps on synthetic families (CPU, well under a minute);
# writes the soft alignment heatmap of a held-out pair to $(BUILD)/train_alignment.png.
train: build
	$(PYTHON) examples/train.py --plot $(BUILD)/train_alignment.png

test: build
	cd $(BUILD) && ctest --output-on-failure
	$(PYTHON) -m pytest -q test_py

bench: build
	$(PYTHON) examples/benchmark.py

# Install to a temporary prefix, build examples/cpp_app against it, run the C++ API, TorchScript
# and AOTInductor programs and the torch.export check, comparing numbers with Python's.
deploy-check: build
	BUILD=$(BUILD) PYTHON=$(PYTHON) bash tools/check_deployment.sh --no-build

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
	  test_py --ignore=test_py/test_integration.py --ignore=test_py/test_train_example.py

clean:
	rm -rf $(BUILD) $(BUILD)-cuda $(BUILD)-asan $(BUILD)*.configure.log
