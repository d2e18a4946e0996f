"""`loss_gap` by hand; `argmax_agreement` runs on the demo's runs in test_training.py (its demo fixture)."""

from __future__ import annotations

import os

import pytest

from benchmarks.precision import loss_gap
from kerasbert.errors import ConfigError


def _history(folder, losses) -> str:
    os.makedirs(folder)
    rows = "".join(f"{epoch},{loss},0.5\n" for epoch, loss in enumerate(losses, 1))
    with open(os.path.join(folder, "history.csv"), "w") as f:
        f.write("epoch,loss,sparse_categorical_accuracy\n" + rows)
    return str(folder)


def test_loss_gap_is_the_largest_epoch_gap_over_the_first_loss(tmp_path):
    a = _history(tmp_path / "a", [2.0, 1.0, 0.5])
    b = _history(tmp_path / "b", [1.9, 1.1, 0.45])  # gaps 0.1, 0.1, 0.05
    assert loss_gap(a, b) == pytest.approx(0.1 / 2.0)
    assert loss_gap(a, b, reduce="mean") == pytest.approx((0.1 + 0.1 + 0.05) / 3 / 2.0)
    assert loss_gap(a, a) == 0.0
    with pytest.raises(ConfigError, match="reduce: expected \"max\" or \"mean\", found 'median'"):
        loss_gap(a, b, reduce="median")
    short = _history(tmp_path / "short", [2.0, 1.0])
    with pytest.raises(ConfigError, match="short/history.csv: expected 3 epochs, as .*a, found 2"):
        loss_gap(a, short)
    with pytest.raises(ConfigError, match="a kerasbert run folder with history.csv"):
        loss_gap(a, str(tmp_path))

