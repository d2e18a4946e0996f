"""Plots: PNG files written atomically for curves (with and without dev keys) and confusion matrices."""

from __future__ import annotations

import os

import pytest

from kerasbert.finetune.plots import plot_confusion, plot_curves

HISTORY = [
    {"epoch": e, "loss": 1.0 / e, "val_loss": 1.2 / e, "accuracy": 0.5 + e / 10, "val_accuracy": 0.45 + e / 10,
     "val_f1": 0.4 + e / 10, "learning_rate": 1e-5}
    for e in (1, 2, 3)
]


def assert_png(path) -> None:
    """``path`` is a PNG of real content, and nothing else (no temporary file) is in its folder."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:4] == b"\x89PNG"
    assert len(data) > 5000
    assert os.listdir(os.path.dirname(path)) == [os.path.basename(path)]


@pytest.mark.parametrize("history", [
    HISTORY,
    [{k: v for k, v in row.items() if not k.startswith("val_")} for row in HISTORY],  # no dev set
    HISTORY[:1],  # a single epoch
    [{"epoch": 1, "loss": 0.5}],  # nothing for the metrics panel
], ids=["full", "no-val", "one-epoch", "loss-only"])
def test_plot_curves_writes_png(tmp_path, history):
    path = tmp_path / "curves.png"
    plot_curves(history, str(path))
    assert_png(path)


def test_plot_curves_replaces_existing_file(tmp_path):
    path = tmp_path / "curves.png"
    path.write_bytes(b"old")
    plot_curves(HISTORY, str(path))
    assert_png(path)


def test_plot_confusion_writes_png(tmp_path):
    path = tmp_path / "confusion.png"
    plot_confusion([[5, 1, 0], [2, 7, 1], [0, 0, 9]], ["neg", "neu", "pos"], str(path))
    assert_png(path)


@pytest.mark.filterwarnings("ignore::UserWarning")  # the default font may lack CJK glyphs; boxes are fine
def test_plot_confusion_with_chinese_labels(tmp_path):
    path = tmp_path / "confusion.png"
    plot_confusion([[3, 1], [0, 4]], ["正面", "负面"], str(path))
    assert_png(path)
