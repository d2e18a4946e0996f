"""The ``multilabel`` task: several labels a text, a sigmoid a label.

Files (`kerasbert.text.multilabel_data`): JSONL ``{"text", "labels": [...]}`` (a list, maybe empty) or TSV/CSV
whose label column joins its labels with ``--label-separator``. The head is the cls head with a sigmoid
(`kerasbert.modeling.heads.cls`, ``activation="sigmoid"``: the ``[CLS]`` output, dropout, one Dense output a label),
trained with binary cross-entropy, the mean over labels. With ``--stride`` a long text's windows are scored each and
their scores averaged (`kerasbert.text.windows.mean_by_document`), as the cls task averages probabilities.

A label is predicted where its score is over a threshold. While training, dev is scored at the threshold of
`THRESHOLDS` with the best micro-F1 (`best_threshold`; the monitor is ``val_micro_f1``); after training the best
model's dev threshold is written to the run folder's `THRESHOLD_FILE` (with the per-label table,
``per_label.txt``), and the run then predicts, evaluates and exports with it (`MultiLabelTask.read_run`; 0.5 for a
run trained without dev). Scores: ``micro_f1``, ``micro_precision``, ``micro_recall``, ``macro_f1`` (and macro
precision and recall), ``exact_match``, ``per_label`` and ``threshold``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from kerasbert.errors import ConfigError, DataError, fail
from kerasbert.files import write_text
from kerasbert.finetune.metrics import _prf, per_type_table
from kerasbert.finetune.task_base import Task, predict_batches
from kerasbert.modeling import heads
from kerasbert.text.lines import read_text
from kerasbert.text.multilabel_data import (
    THRESHOLD,
    MultiLabelExample,
    check_labels,
    encode_multilabel,
    examples_of_rows,
    iter_multilabel,
    label_set,
    multi_hot,
    score_row,
)
from kerasbert.text.pipeline import Features, to_dataset
from kerasbert.text.readers import LabelSet
from kerasbert.text.tokenizer import Tokenizer
from kerasbert.text.windows import mean_by_document

__all__ = ["THRESHOLDS", "THRESHOLD_FILE", "MultiLabelTask", "best_threshold", "multilabel_metrics", "per_label_table"]

THRESHOLD_FILE = "multilabel.json"  # the run folder's threshold chosen on dev: {"threshold": t}
THRESHOLDS = tuple(round(0.05 * k, 2) for k in range(1, 20))  # the thresholds tried on dev: 0.05, 0.10, ..., 0.95


@dataclass
class MultiLabelTask(Task):
    """Texts (or pairs) with any number of labels each; ``[CLS]`` -> Dense sigmoid, a score a label."""

    name: str = field(default="multilabel", init=False)
    monitor: str = field(default="val_micro_f1", init=False)
    dev_keys: tuple = field(default=("micro_f1", "macro_f1"), init=False)
    streams: bool = field(default=False, init=False)  # its label vectors are no field of the prepared shards
    # the threshold predictions and scores use: the run's (`read_run`); None while training, where dev scores choose it
    threshold: float | None = field(default=None, init=False)

    def stream(self, path: str) -> Iterator[MultiLabelExample]:
        return iter_multilabel(path, text=self.text, label=self.label, text_b=self.text_b,
                               separator=self.label_separator)

    def check(self, examples: Sequence[MultiLabelExample], labels: LabelSet, path: str) -> None:
        check_labels(examples, labels, path)

    def label_set(self, examples: Sequence[MultiLabelExample]) -> LabelSet:
        return label_set(examples)

    def labelled(self, examples: Sequence[MultiLabelExample]) -> Iterator[tuple[str, int]]:
        return ((name, example.line) for example in examples for name in example.labels)

    def encode(self, tokenizer: Tokenizer, examples, labels: LabelSet | None, maxlen: int, what: str) -> Features:
        return encode_multilabel(tokenizer, examples, labels, maxlen, what, self.stride)

    def head(self, backbone, labels: LabelSet):
        return heads.cls(backbone, len(labels), dropout=self.dropout, activation="sigmoid")

    def compile_arguments(self, model) -> dict:
        return heads.loss_and_metrics(model)  # a sigmoid CLS-Dense: binary cross-entropy, the mean over labels

    def predicted_ids(self, model, features: Features, batch_size: int, verbose: int = 0) -> np.ndarray:
        """Each example's scores ``[N, L]``: a long one's the mean of its windows' (`mean_by_document`)."""
        batches = predict_batches(model, to_dataset(features, batch_size, labels=False), verbose)
        return mean_by_document(features.windows, np.concatenate(batches))

    def predict(self, model, features: Features, examples, labels: LabelSet, batch_size: int,
                verbose: int = 0) -> list[dict]:
        threshold = THRESHOLD if self.threshold is None else self.threshold
        return [score_row(row, labels.labels, threshold)
                for row in self.predicted_ids(model, features, batch_size, verbose)]

    def score(self, examples, predictions: list[dict], labels: LabelSet) -> dict:
        """The scores at the run's threshold; while training (no threshold yet), at the best one on these
        predictions (`best_threshold`)."""
        gold = multi_hot([example.labels for example in examples], labels)
        if self.threshold is None:
            scores = np.array([[row["scores"][name] for name in labels.labels] for row in predictions], np.float64)
            threshold = best_threshold(gold, scores.reshape(len(predictions), len(labels)))
            predicted = scores > threshold
        else:
            threshold, predicted = self.threshold, multi_hot([row["labels"] for row in predictions], labels)
        return {**multilabel_metrics(gold, predicted, labels.labels), "threshold": threshold}

    def write_report(self, folder: str, scores: dict, labels: LabelSet) -> None:
        """The dev threshold as `THRESHOLD_FILE`, which the run predicts with, and the per-label table as
        ``per_label.txt``."""
        write_text(os.path.join(folder, "per_label.txt"), per_label_table(scores) + "\n")
        write_text(os.path.join(folder, THRESHOLD_FILE), json.dumps({"threshold": scores["threshold"]}) + "\n")

    def read_run(self, folder: str) -> None:
        """The threshold of the run ``folder``: its `THRESHOLD_FILE`'s, or `THRESHOLD` without one (no dev)."""
        path = os.path.join(folder, THRESHOLD_FILE)
        if not os.path.isfile(path):
            self.threshold = THRESHOLD
            return
        try:
            threshold = json.loads(read_text(path)).get("threshold")
        except (ValueError, AttributeError):
            threshold = None
        if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0 <= threshold < 1:
            raise fail(ConfigError, path, 'JSON {"threshold": t}, t in [0, 1)', repr(read_text(path).strip())[:80],
                       "train the run again, or write the threshold to predict with")
        self.threshold = float(threshold)

    def label_columns(self) -> dict[str, str]:
        return {"labels": "floats"}  # one per label

    def examples_of_texts(self, tokenizer: Tokenizer, rows: Sequence[dict]) -> list[MultiLabelExample]:
        return examples_of_rows(tokenizer, rows)


def multilabel_metrics(gold: np.ndarray, predicted: np.ndarray, labels: Sequence[str]) -> dict:
    """Micro and macro precision, recall and F1 of predicted label sets, the share of rows predicted exactly, and
    per label ``precision``, ``recall``, ``f1`` and ``support`` (its gold rows). Micro scores count every (row,
    label) decision together; macro ones are plain means over every label; a zero division gives 0.

    Args:
        gold: array ``[N, L]``. 1 (or True) where row ``i`` has label ``k``.
        predicted: array ``[N, L]``. the same for the predictions.
        labels: sequence of str. the label names, by column.

    Example:
    >>> gold = np.array([[1, 1, 0], [0, 1, 0], [0, 0, 1]])
    >>> m = multilabel_metrics(gold, np.array([[1, 0, 0], [0, 1, 1], [0, 0, 1]]), ["a", "b", "c"])
    >>> m["micro_precision"], m["micro_recall"], m["micro_f1"], m["exact_match"]
    (0.75, 0.75, 0.75, 0.3333333333333333)
    """
    gold, predicted = np.asarray(gold, bool), np.asarray(predicted, bool)
    if gold.shape != predicted.shape or gold.ndim != 2 or gold.shape[1] != len(labels):
        raise fail(DataError, "predicted", f"an array of shape {gold.shape}, one column per label ({len(labels)})",
                   f"shape {predicted.shape}")
    correct, n_pred, n_gold = ((gold & predicted).sum(0).tolist(), predicted.sum(0).tolist(), gold.sum(0).tolist())
    per_label = {name: _prf(correct[k], n_pred[k], n_gold[k]) for k, name in enumerate(labels)}
    micro = _prf(sum(correct), sum(n_pred), sum(n_gold))

    def mean(key: str) -> float:
        return float(np.mean([scores[key] for scores in per_label.values()])) if per_label else 0.0

    return {"micro_f1": micro["f1"], "micro_precision": micro["precision"], "micro_recall": micro["recall"],
            "macro_f1": mean("f1"), "macro_precision": mean("precision"), "macro_recall": mean("recall"),
            "exact_match": float((gold == predicted).all(1).mean()) if len(gold) else 0.0, "per_label": per_label}


def best_threshold(gold: np.ndarray, scores: np.ndarray) -> float:
    """The threshold of `THRESHOLDS` whose predictions (scores over it) have the best micro-F1 against ``gold``;
    among equally good ones, the middle one (the lower of two middles), which keeps the most room on both sides.

    Example:
    >>> best_threshold(np.array([[1, 0], [0, 1]]), np.array([[0.4, 0.1], [0.3, 0.8]]))
    0.3
    """
    gold, scores = np.asarray(gold, bool), np.asarray(scores, np.float64)
    f1 = []
    for threshold in THRESHOLDS:
        predicted = scores > threshold
        correct = int((gold & predicted).sum())
        f1.append(2 * correct / (gold.sum() + predicted.sum()) if correct else 0.0)
    best = [threshold for threshold, value in zip(THRESHOLDS, f1, strict=True) if value == max(f1)]
    return best[(len(best) - 1) // 2]


def per_label_table(scores: dict) -> str:
    """The per-label table of multilabel scores, then their micro and macro rows
    (`kerasbert.finetune.metrics.per_type_table`'s layout).

    Example:
    >>> print(per_label_table(multilabel_metrics(np.array([[1, 0], [1, 1]]), np.array([[1, 0], [1, 0]]), ["a", "b"])))
    type   precision  recall      f1  support
    a         1.0000  1.0000  1.0000        2
    b         0.0000  0.0000  0.0000        1
    micro     1.0000  0.6667  0.8000        3
    macro     0.5000  0.5000  0.5000        3
    """
    return per_type_table({"per_type": scores["per_label"], "precision": scores["micro_precision"],
                           "recall": scores["micro_recall"], "f1": scores["micro_f1"],
                           "macro_precision": scores["macro_precision"], "macro_recall": scores["macro_recall"],
                           "macro_f1": scores["macro_f1"]})
