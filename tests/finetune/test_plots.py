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


# a cls run's history: Keras's metric and kerasbert's own accuracy of the same dev set, equal
CLS_HISTORY = [{"epoch": e, "loss": 0.7 / e, "sparse_categorical_accuracy": 0.4 * e, "val_loss": 0.69 / e,
                "val_sparse_categorical_accuracy": 0.25 * e, "val_accuracy": 0.25 * e + 1e-7,
                "val_macro_f1": 0.3 * e} for e in (1, 2)]


def test_equal_curves_of_one_metric_are_drawn_once_under_the_shorter_name(tmp_path, monkeypatch):
    from kerasbert.finetune import plots

    keys = ["sparse_categorical_accuracy", "val_sparse_categorical_accuracy", "val_accuracy", "val_macro_f1"]
    assert [key for key, _ in plots.series(CLS_HISTORY, keys)] == [
        "sparse_categorical_accuracy", "val_accuracy", "val_macro_f1"]
    assert plots.series(CLS_HISTORY, keys)[1][1] == [(1, 0.25 + 1e-7), (2, 0.5 + 1e-7)]
    drawn = {}
    monkeypatch.setattr(plots, "_save", lambda fig, path: drawn.update(
        {ax.get_title(): [text.get_text() for text in ax.get_legend().get_texts()] for ax in fig.axes}))
    plots.plot_curves(CLS_HISTORY, str(tmp_path / "curves.png"))
    assert drawn == {"loss": ["loss", "val_loss"],
                     "metrics": ["sparse_categorical_accuracy", "val_accuracy", "val_macro_f1"]}


def test_different_metrics_with_equal_values_both_stay():
    from kerasbert.finetune.plots import series

    history = [{"epoch": 1, "val_precision": 0.0, "val_recall": 0.0}]  # one short epoch: nothing found yet
    assert series(history, ["val_precision", "val_recall"]) == [("val_precision", [(1, 0.0)]),
                                                                ("val_recall", [(1, 0.0)])]
    windows = [{"epoch": 1, "val_masked_accuracy": 0.8, "val_accuracy": 0.75}]  # per window, per text: not equal
    assert [key for key, _ in series(windows, ["val_masked_accuracy", "val_accuracy"])] == [
        "val_masked_accuracy", "val_accuracy"]
