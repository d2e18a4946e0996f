"""Mixed precision checked against float32: do two runs answer the same?

`kerasbert train --mixed-precision` computes in float16 (GPU) or bfloat16 (CPU) and keeps float32 weights.
It should change the speed, not the answers. Train the same data with the same seed twice, once each way,
then `argmax_agreement` counts where the two models predict the same class (cls: one prediction per
example) or tag (ner: one per word, on its first word piece, where the entities are read), and `loss_gap`
measures how far apart the two loss curves run. `benchmarks/mixed_precision.py` reports both on the
demo.
"""

from __future__ import annotations

import numpy as np

from kerasbert.errors import ConfigError, fail
from kerasbert.finetune.runs import Run, open_run


def _predicted(run_dir: str, data: str, batch_size: int) -> np.ndarray:
    """The class of every example (cls) or the tag on every word's first piece (ner), in file order."""
    loaded = open_run(run_dir)
    task, labels = loaded.task, loaded.labels
    features = task.encode(loaded.tokenizer, task.read(data, labels), labels, loaded.args.maxlen, data)
    ids = task.predicted_ids(loaded.model, features, batch_size)
    if loaded.args.task != "ner":
        return ids
    # the pieces the spans are read from (`decode_ner`): not [CLS], [SEP], padding, or a word's later pieces
    return np.concatenate([row[[i for i in firsts if i >= 0]] for row, firsts in
                           zip(ids, features.first_pieces, strict=True)])


def argmax_agreement(run_a: str, run_b: str, data: str, batch_size: int = 32) -> dict:
    """How often two runs' models predict the same class or tag on a labelled file.

    Args:
        run_a: str. a run folder (e.g. trained in float32).
        run_b: str. another run folder of the same task and labels (e.g. with ``--mixed-precision``).
        data: str. a labelled file in the task's training format; its labels are not used.
        batch_size: int. rows per prediction batch.

    Returns:
        dict. ``agreement`` (share of equal predictions), ``compared`` (predictions: examples for cls,
        words for ner) and ``differ`` (how many differ).

    Example (two runs of ``kerasbert demo``, one of them with ``mixed_precision=True``):
        argmax_agreement("runs/fp32", "runs/mixed", "demo/data/cls/test.tsv")  # {"agreement": 1.0, ...}
    """
    labels = [Run(run).labels().labels for run in (run_a, run_b)]
    if labels[0] != labels[1]:
        raise fail(ConfigError, run_b, f"the labels of {run_a} ({len(labels[0])})", f"others ({len(labels[1])})",
                   "compare two runs of the same task and training data")
    ours, theirs = (_predicted(run, data, batch_size) for run in (run_a, run_b))
    differ = int((ours != theirs).sum())
    return {"agreement": 1.0 - differ / max(1, len(ours)), "compared": int(len(ours)), "differ": differ}


def loss_gap(run_a: str, run_b: str, reduce: str = "max") -> float:
    """The largest (``reduce="max"``) or mean (``"mean"``) gap between two runs' epoch losses, as a share
    of run_a's first-epoch loss.

    ``history.csv`` of each run gives the training loss per epoch; the runs must have the same number
    of epochs. 0.0 is the same curve; a largest gap of 0.05 means never further apart than 5 % of where
    training began. The largest gap falls on the epoch where the loss drops fastest, and there a run that
    drops a little later is far apart for that one epoch, so read it beside the mean gap.
    """
    if reduce not in ("max", "mean"):
        raise fail(ConfigError, "reduce", '"max" or "mean"', repr(reduce))
    curves = [np.array([float(row["loss"]) for row in Run(run).read_history()]) for run in (run_a, run_b)]
    if len(curves[1]) != len(curves[0]) or not len(curves[0]):
        raise fail(ConfigError, f"{run_b}/history.csv", f"{len(curves[0])} epochs, as {run_a}",
                   f"{len(curves[1])}", "compare two runs trained for the same number of epochs")
    gaps = np.abs(curves[0] - curves[1])
    return float((gaps.max() if reduce == "max" else gaps.mean()) / curves[0][0])
