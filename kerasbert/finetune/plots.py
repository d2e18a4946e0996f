"""Training curves and confusion matrices as PNG files.

matplotlib is imported inside the functions, with the non-interactive ``Agg`` backend, so
importing this module is cheap and plotting works on a machine without a display. Every file
is written atomically: to a temporary ``.png`` in the same folder, then moved over ``path``.

Example:
>>> import os, tempfile
>>> folder = tempfile.mkdtemp()
>>> plot_curves([{"epoch": 1, "loss": 0.9, "val_f1": 0.5}, {"epoch": 2, "loss": 0.4, "val_f1": 0.7}],
...             os.path.join(folder, "curves.png"))
>>> os.listdir(folder)
['curves.png']
"""

from __future__ import annotations

from collections.abc import Sequence

from kerasbert.files import atomic_path

_NOT_METRICS = ("epoch", "loss", "val_loss", "learning_rate")


def _pyplot():
    """Return ``matplotlib.pyplot`` with the ``Agg`` backend selected."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: str) -> None:
    """Write ``fig`` to ``path`` as PNG through a temporary file in the same folder, then close it."""
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format="png", dpi=100, bbox_inches="tight")
    finally:
        fig.clear()
        _pyplot().close(fig)


def series(history: Sequence[dict], keys: Sequence[str]) -> list[tuple[str, list[tuple[float, float]]]]:
    """Each key's ``(epoch, value)`` points, once per distinct curve: of two keys of one metric whose points are
    equal (Keras's ``val_sparse_categorical_accuracy`` and kerasbert's ``val_accuracy`` on the same dev set) only the
    shorter name is kept, so no curve hides another and no metric shows twice in a legend. Epochs missing a key are
    skipped, and keys without points dropped.

    Example:
    >>> series([{"epoch": 1, "val_sparse_categorical_accuracy": 0.5, "val_accuracy": 0.5, "val_f1": 0.5}],
    ...        ["val_sparse_categorical_accuracy", "val_accuracy", "val_f1"])
    [('val_accuracy', [(1, 0.5)]), ('val_f1', [(1, 0.5)])]
    """
    kept: list[tuple[str, list[tuple[float, float]]]] = []
    for key in keys:
        points = [(row.get("epoch", i + 1), row[key]) for i, row in enumerate(history) if row.get(key) is not None]
        same = next((i for i, (name, seen) in enumerate(kept) if _metric(name) == _metric(key)
                     and _equal(seen, points)), None)
        if same is None and points:
            kept.append((key, points))
        elif same is not None and len(key) < len(kept[same][0]):
            kept[same] = (key, points)
    return kept


def _metric(key: str) -> tuple[bool, str]:
    """Which metric a history key measures, and whether on dev: every ``...accuracy`` is one metric."""
    name = key.removeprefix("val_")
    return key.startswith("val_"), "accuracy" if name.endswith("accuracy") else name


def _equal(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> bool:
    """Whether two curves have the same epochs and values (to the 6 decimals ``history.csv`` keeps)."""
    return len(a) == len(b) and all(x == u and abs(y - v) <= 5e-7 for (x, y), (u, v) in zip(a, b, strict=True))


def _plot_series(ax, history: Sequence[dict], keys: Sequence[str]) -> None:
    """Plot each distinct curve (`series`) against the epoch; ``val_`` keys dashed."""
    for key, points in series(history, keys):
        x, y = zip(*points, strict=True)
        ax.plot(x, y, "--" if key.startswith("val_") else "-", marker="o", label=key)


def plot_curves(history: list[dict], path: str) -> None:
    """Draw loss (left) and every other metric (right) per epoch, and save the figure as PNG.

    Train keys are solid lines, ``val_`` keys dashed. The right panel shows every key except
    ``epoch``, ``loss``, ``val_loss`` and ``learning_rate``, in order of first appearance, one
    curve for keys of one metric with equal values (`series`).

    Args:
        history: list of dict. one dict per epoch, e.g. ``{"epoch": 1, "loss": 0.7,
            "val_loss": 0.8, "accuracy": 0.6, "val_accuracy": 0.55, "val_f1": 0.5}``; an
            entry without ``epoch`` takes its 1-based position.
        path: str. the PNG file to write (replaced if it exists).

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "curves.png")
    >>> plot_curves([{"epoch": 1, "loss": 0.7, "val_loss": 0.8, "accuracy": 0.6, "val_accuracy": 0.5}], path)
    >>> open(path, "rb").read(4)
    b'\\x89PNG'
    """
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    metrics = list(dict.fromkeys(k for row in history for k in row if k not in _NOT_METRICS))
    fig, (ax_loss, ax_metric) = plt.subplots(1, 2, figsize=(11, 4))
    for ax, keys, title in ((ax_loss, ["loss", "val_loss"], "loss"), (ax_metric, metrics, "metrics")):
        _plot_series(ax, history, keys)
        ax.set_title(title)
        ax.set_xlabel("epoch")
        ax.set_ylabel(title)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        if ax.get_lines():
            ax.legend()
    fig.suptitle("training curves")
    _save(fig, path)


def plot_confusion(confusion: list[list[int]], labels: list[str], path: str) -> None:
    """Draw a confusion matrix as a heatmap with the count in each cell, and save it as PNG.

    Args:
        confusion: list of lists of int. counts, rows are gold labels, columns predicted ones
            (the ``confusion`` of :func:`kerasbert.finetune.metrics.classification_metrics`).
        labels: list of str. the label names, in row order. Glyphs missing from the font
            (Chinese, with the default font) are drawn as boxes.
        path: str. the PNG file to write (replaced if it exists).

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "confusion.png")
    >>> plot_confusion([[5, 1], [2, 7]], ["neg", "pos"], path)
    >>> os.path.getsize(path) > 1000
    True
    """
    import numpy as np

    plt = _pyplot()
    counts = np.asarray(confusion, dtype=np.int64)
    size = max(4.0, 0.6 * len(labels) + 2)
    fig, ax = plt.subplots(figsize=(size + 1, size))
    image = ax.imshow(counts, cmap="Blues")
    fig.colorbar(image, ax=ax)
    ticks = range(len(labels))
    ax.set_xticks(ticks, labels, rotation=45, ha="right")
    ax.set_yticks(ticks, labels)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_title("confusion matrix")
    threshold = counts.max() / 2 if counts.size else 0
    for (row, col), value in np.ndenumerate(counts):
        ax.text(col, row, str(value), ha="center", va="center", color="white" if value > threshold else "black")
    _save(fig, path)
