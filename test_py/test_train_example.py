"""examples/train.py: a reduced training run learns (the loss falls, the planted alignment is
recovered on held-out families), the data is reproducible, and the script runs end to end."""
import dataclasses
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import train  # noqa: E402

SMALL = dataclasses.replace(train.Config(), train_families=10, test_families=5, steps=25, lr=0.15)


def test_planted_path_score_is_one_term_of_the_partition():
    """The NLL is log Z - score(planted path) >= 0 (the planted path is one of Z's alignments),
    and at t = 0 (log Z -> the best score) it is >= 0 too."""
    data, _ = train.make_data(dataclasses.replace(SMALL, train_families=2))
    model = train.SubstitutionModel()
    assert (train.nll(model, data, 1.0) > 0).all()
    assert (train.nll(model, data, 0.0) >= -1e-4).all()


def test_data_is_deterministic():
    a, _ = train.make_data(SMALL)
    b, _ = train.make_data(SMALL)
    assert a.seqs == b.seqs and torch.equal(a.planted, b.planted)
    c, _ = train.make_data(dataclasses.replace(SMALL, seed=1))
    assert c.seqs != a.seqs


def test_training_learns_the_planted_alignment():
    torch.manual_seed(0)
    data, held_out = train.make_data(SMALL)
    model = train.SubstitutionModel()
    before, _ = train.recovery(model, held_out)
    losses = train.train(model, data, SMALL.steps, SMALL.lr)
    after, precision = train.recovery(model, held_out)
    assert losses[-1] < 0.35 * losses[0]
    assert all(later < earlier for earlier, later in zip(losses[::5], losses[5::5]))
    assert before < 0.2 and after > 0.75 and precision > 0.75
    # The learned matrix has the planted groups: same group scores above different groups.
    identity, group, other = train.group_contrast(model.matrix())
    assert identity > other + 1 and group > other + 1
    assert model.gap_open.item() < model.gap_extend.item() < 0


def test_script_end_to_end(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    png = tmp_path / "alignment.png"
    train.main(["--steps", "3", "--train-families", "3", "--test-families", "2",
                "--plot", str(png)])
    out = capsys.readouterr().out
    assert "Held-out alignment recovery" in out and "after training" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
