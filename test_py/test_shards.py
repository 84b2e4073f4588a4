"""SOFTALIGN_TEST_SHARD (conftest.py): the shards tools/pytest_shards.sh runs at once on the GPU
machine select disjoint sets of tests whose union is the whole selection, and a bad value is a
usage error, not a silently empty or partial run."""
from types import SimpleNamespace

import pytest

import conftest


def shard(items, value, monkeypatch):
    """The items conftest's hook keeps for SOFTALIGN_TEST_SHARD=value, and those it deselects."""
    monkeypatch.setenv("SOFTALIGN_TEST_SHARD", value)
    deselected = []
    config = SimpleNamespace(hook=SimpleNamespace(
        pytest_deselected=lambda items: deselected.extend(items)))
    kept = list(items)
    conftest.pytest_collection_modifyitems(config, kept)
    return kept, deselected


def fake_items():
    # ids with the short periods of real parametrizations (cpu / cuda, the ends)
    return [SimpleNamespace(nodeid=f"test_py/test_x.py::test_{t}[{end}-{device}]")
            for t in range(40) for end in ("local-max", "local-soft", "global")
            for device in ("cpu", "cuda")]


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_shards_split_the_selection(n, monkeypatch):
    items = fake_items()
    shards = []
    for k in range(n):
        kept, deselected = shard(items, f"{k}/{n}", monkeypatch)
        assert len(kept) + len(deselected) == len(items)
        shards.append({item.nodeid for item in kept})
    assert set().union(*shards) == {item.nodeid for item in items}
    assert sum(len(s) for s in shards) == len(items)  # disjoint
    for s in shards:  # even enough, and not all of one device
        assert len(s) > len(items) / n / 2
        assert any(i.endswith("-cpu]") for i in s) and any(i.endswith("-cuda]") for i in s)


def test_no_shard_keeps_everything(monkeypatch):
    monkeypatch.delenv("SOFTALIGN_TEST_SHARD", raising=False)
    items = fake_items()
    kept = list(items)
    conftest.pytest_collection_modifyitems(SimpleNamespace(), kept)
    assert kept == items


@pytest.mark.parametrize("value", ["3/3", "-1/3", "x", "1/2/3", "1/0"])
def test_a_bad_shard_is_a_usage_error(value, monkeypatch):
    with pytest.raises(pytest.UsageError, match="SOFTALIGN_TEST_SHARD"):
        shard(fake_items(), value, monkeypatch)
