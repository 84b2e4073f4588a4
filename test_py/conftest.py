"""Shared fixtures: the loaded library, the devices to run on, and random problems."""
import os
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
# SOFTALIGN_TEST_INSTALLED=1 (make test): the installed package, never the source tree's python/.
INSTALLED = os.environ.get("SOFTALIGN_TEST_INSTALLED") == "1"
if not INSTALLED:
    sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import softalign  # noqa: E402

if INSTALLED:
    assert not Path(softalign.__file__).is_relative_to(ROOT / "python"), (
        f"SOFTALIGN_TEST_INSTALLED=1 but softalign came from the source tree: {softalign.__file__}")
    assert "site-packages" in Path(softalign.__file__).parts, softalign.__file__


def pytest_report_header():
    return (f"softalign {softalign.__version__} from {Path(softalign.__file__).parent}, "
            f"library {softalign.load_library()}")

# CUDA cases carry "cuda" in their id, so `pytest -k cuda` runs just them on a GPU machine.
DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(),
                                                  reason="no CUDA device")),
]

# Hypothesis (test_properties.py, test_fuzz.py): bounded, reproducible runs for CI, and a count
# of the examples each test tried, printed at the end of the run.
# SOFTALIGN_HYPOTHESIS_SCALE=k multiplies every test's max_examples by k;
# SOFTALIGN_HYPOTHESIS_RANDOM=1 draws fresh examples instead of the fixed CI sequence.
EXAMPLE_COUNTS = {}


def hypothesis_settings(max_examples):
    import os

    from hypothesis import HealthCheck, settings
    scale = float(os.environ.get("SOFTALIGN_HYPOTHESIS_SCALE", "1"))
    return settings(max_examples=max(1, int(max_examples * scale)), deadline=None,
                    database=None, print_blob=True,
                    derandomize=not os.environ.get("SOFTALIGN_HYPOTHESIS_RANDOM"),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


def count_example(name):
    EXAMPLE_COUNTS[name] = EXAMPLE_COUNTS.get(name, 0) + 1


def pytest_terminal_summary(terminalreporter):
    if EXAMPLE_COUNTS:
        terminalreporter.write_sep("-", "hypothesis examples tried")
        for name, count in sorted(EXAMPLE_COUNTS.items()):
            terminalreporter.write_line(f"{name}: {count}")


# SOFTALIGN_TEST_SHARD=k/n keeps the selected tests whose id's CRC-32 is k modulo n (k = 0 .. n -
# 1), so that n pytest processes at once run the suite between them (tools/pytest_shards.sh, for
# the GPU machine's 16 cores). By a hash, not every n-th test: parametrized ids repeat with short
# periods (cpu / cuda, the ends), which would give a shard all of one kind. After -k and -m have
# selected (trylast).
@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    import os
    import zlib

    shard = os.environ.get("SOFTALIGN_TEST_SHARD")
    if not shard:
        return
    try:
        k, n = (int(x) for x in shard.split("/"))
    except ValueError:
        raise pytest.UsageError(f"SOFTALIGN_TEST_SHARD must be k/n, got {shard!r}")
    if not 0 <= k < n:
        raise pytest.UsageError(f"SOFTALIGN_TEST_SHARD {shard!r}: k must be in 0 .. n - 1")

    kept, dropped = [], []
    for item in items:
        (kept if zlib.crc32(item.nodeid.encode()) % n == k else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = kept
