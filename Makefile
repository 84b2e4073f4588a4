# The two commands of the README: `make demo` and `make test`. Each installs what it needs
# (Python packages, a Debian package or two) and builds first; both are safe to re-run.
PYTHON ?= python3
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
export PYTHONPATH := $(CURDIR)/python:$(PYTHONPATH)

.PHONY: setup build demo test test-py test-cpp bench clean

setup:
	@bash tools/setup.sh

build: setup
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) > $(BUILD).configure.log 2>&1 || (cat $(BUILD).configure.log; exit 1)
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	$(PYTHON) examples/demo.py

test: build
	cd $(BUILD) && ctest --output-on-failure
	$(PYTHON) -m pytest -q test_py

bench: build
	$(PYTHON) examples/benchmark.py

clean:
	rm -rf $(BUILD) $(BUILD).configure.log
