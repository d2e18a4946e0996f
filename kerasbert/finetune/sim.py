"""The ``sim`` task: sentence-pair similarity with sentence vectors (a bi-encoder), trained with CoSENT.

The model maps one text to one unit vector (`kerasbert.modeling.heads.embedding`, ``--pooling``); two texts are as
similar as the cosine of their vectors, so the model that trains on pairs also embeds single texts. A pair is two
rows, its first text then its second, each with the pair's label: `Features.group` is 2, so
`kerasbert.text.pipeline.to_dataset` keeps them together, in order, when it shuffles, batches and skips
(``--resume``), and ``--batch-size`` counts pairs (a batch holds twice as many rows), as bert4keras's CoSENT
script and sentence-transformers count them. Streamed data (``kerasbert prepare``, a glob or a prepared folder)
shuffles rows one by one and is refused.

The loss (``--sim-loss``) is CoSENT (`kerasbert.modeling.losses.CoSENTLoss`: every pair ranked above another
should have the higher cosine) unless every training label is the same (only positives, nothing to rank): then
in-batch negatives (`kerasbert.modeling.losses.InBatchNegativesLoss`), the other pairs' second texts as negatives.
The choice is made from the training data and saved in ``args.json``.

Scores: the Spearman correlation of the cosines with the labels, and for 0/1 labels the accuracy at the best
threshold with that threshold (`kerasbert.finetune.metrics.similarity_metrics`).

``--pooling`` defaults to ``first_last_avg``, CoSENT's pooling: on the generated paraphrase corpus
(`kerasbert.finetune.paraphrase_data`), the tiny config trained from scratch reached the highest Spearman with it,
level with ``mean`` and far above ``cls``, ``pooler`` and ``linear`` (``docs/fine-tuning.md``, Sentence similarity).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from kerasbert.choices import SIM_POOLINGS
from kerasbert.errors import ConfigError, DataError, ModelError, fail
from kerasbert.finetune import metrics
from kerasbert.finetune.task_base import Task, predict_batches
from kerasbert.modeling import heads, losses
from kerasbert.text.pipeline import Features, encode_classification, to_dataset
from kerasbert.text.readers import ClassificationExample, LabelSet, iter_classification, write_text
from kerasbert.text.tokenizer import Tokenizer

__all__ = ["SimilarityTask", "pair_label"]

LOSSES = {"cosent": losses.CoSENTLoss, "in_batch": losses.InBatchNegativesLoss}  # --sim-loss


def pair_label(value: str, where: str) -> float:
    """A pair's label as written in its file, read as a finite number (0/1, or a score such as STS-B's 0-5).

    Example:
    >>> pair_label("3.8", "train.tsv:2"), pair_label("1", "train.tsv:3")
    (3.8, 1.0)
    >>> pair_label("same", "train.tsv:4")
    Traceback (most recent call last):
    ...
    kerasbert.errors.DataError: train.tsv:4: expected a label that is a number (0/1, or a similarity score), \
found 'same'. write 1 for a similar pair and 0 for another, or a score
    """
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not math.isfinite(number):
        raise fail(DataError, where, "a label that is a number (0/1, or a similarity score)", repr(value),
                   "write 1 for a similar pair and 0 for another, or a score")
    return number


@dataclass
class SimilarityTask(Task):
    """Text pairs with a similarity label; one text -> one unit vector, a pair's similarity their cosine.

    Files: TSV/CSV of ``text_a``, ``text_b``, ``label`` (columns 0, 1, 2), or JSONL with ``"text"``, ``"text_b"``,
    ``"label"`` (``--text-field``, ``--text-b-field``, ``--label-field`` name others). Predictions are
    ``{"similarity": cosine}`` for a pair, ``{"vector": [...]}`` for a text alone.
    """

    name: str = field(default="sim", init=False)
    monitor: str = field(default="val_spearman", init=False)
    dev_keys: tuple = field(default=("spearman", "accuracy"), init=False)  # accuracy: 0/1 labels only
    group: int = field(default=2, init=False)

    def __post_init__(self) -> None:
        if self.pooling is None:
            self.pooling = SIM_POOLINGS[0]

    def stream(self, path: str) -> Iterator[ClassificationExample]:
        jsonl = path.endswith((".jsonl", ".json"))
        second = self.text_b if self.text_b is not None else "text_b" if jsonl else 1
        for example in iter_classification(path, text=self.text, label=self.label, text_b=second):
            where = f"{path}:{example.line}"
            if not example.text_b.strip():
                raise fail(DataError, where, "a pair: a second text", "an empty one", "drop the row or fill it in")
            pair_label(example.label, where)
            yield example

    def check(self, examples: Sequence[ClassificationExample], labels: LabelSet, path: str) -> None:
        """Nothing to check: a label is any number (`stream` refuses others)."""

    def label_set(self, examples: Sequence[ClassificationExample]) -> LabelSet:
        """No label ids (a label is a number); settles ``sim_loss`` from the training labels when it is None:
        ``in_batch`` when every label is the same, else ``cosent`` (which learns nothing from equal labels)."""
        distinct = {float(example.label) for example in examples}
        if self.sim_loss is None:
            self.sim_loss = "in_batch" if len(distinct) == 1 else "cosent"
        elif self.sim_loss == "cosent" and len(distinct) == 1:
            raise fail(ConfigError, "--sim-loss cosent", "training pairs of at least two labels to rank",
                       f"every label {distinct.pop():g}", "--sim-loss in_batch, or leave --sim-loss out")
        return LabelSet([])

    def encode(self, tokenizer: Tokenizer, examples, labels: LabelSet | None, maxlen: int, what: str) -> Features:
        """Each text alone, ``[CLS] text [SEP]``, a pair's two texts one after the other. With ``labels``
        (training and scoring, every example a pair): each row carries its pair's label, in groups of 2."""
        texts = [ClassificationExample(text, "") for example in examples
                 for text in (example.text, example.text_b) if text is not None]
        features = encode_classification(tokenizer, texts, None, maxlen, what)
        if labels is not None:
            features.labels = [pair_label(example.label, what) for example in examples for _ in range(2)]
            features.group = 2
        return features

    def head(self, backbone, labels: LabelSet):
        return heads.embedding(backbone, self.pooling)

    def compile_arguments(self, model) -> dict:
        if self.sim_loss not in LOSSES:
            raise fail(ModelError, "sim compile", f"sim_loss, one of {sorted(LOSSES)} (settled by label_set)",
                       repr(self.sim_loss))
        return {"loss": LOSSES[self.sim_loss]()}

    def _vectors(self, model, features: Features, batch_size: int, verbose: int = 0) -> np.ndarray:
        """One vector per row of ``features``, ``[rows, H]``."""
        batches = predict_batches(model, to_dataset(features, batch_size, labels=False), verbose)
        return np.concatenate(batches).astype(np.float32)

    def predicted_ids(self, model, features: Features, batch_size: int, verbose: int = 0) -> np.ndarray:
        """The cosine similarity of each pair (``features`` of pairs only)."""
        vectors = self._vectors(model, features, batch_size, verbose)
        return _cosines(vectors[0::2], vectors[1::2])

    def predict(self, model, features: Features, examples, labels: LabelSet, batch_size: int,
                verbose: int = 0) -> list[dict]:
        """``{"similarity": cosine}`` for a pair, ``{"vector": [...]}`` (unit length) for a text alone."""
        vectors, rows, i = self._vectors(model, features, batch_size, verbose), [], 0
        for example in examples:
            if example.text_b is None:
                rows.append({"vector": vectors[i].tolist()})
                i += 1
            else:
                rows.append({"similarity": float(_cosines(vectors[i:i + 1], vectors[i + 1:i + 2])[0])})
                i += 2
        return rows

    def score(self, examples, predictions: list[dict], labels: LabelSet) -> dict:
        return metrics.similarity_metrics([float(example.label) for example in examples],
                                          [prediction["similarity"] for prediction in predictions])

    def write_report(self, folder: str, scores: dict, labels: LabelSet) -> None:
        """The dev scores as ``scores.txt``, one a line."""
        keys = [key for key in ("spearman", "accuracy", "threshold") if key in scores]
        lines = [f"{key:9s} {scores[key]:.4f}" for key in keys] + [f"{'pairs':9s} {scores['count']}"]
        write_text(f"{folder}/scores.txt", "\n".join(lines) + "\n")

    def examples_of_texts(self, tokenizer: Tokenizer, rows: Sequence[dict]) -> list[ClassificationExample]:
        """A pair for a row with ``"text_b"``, a text alone for a row without."""
        return [ClassificationExample(row["text"], "", row.get("text_b"), line=i + 1) for i, row in enumerate(rows)]

    def label_columns(self) -> dict[str, str]:
        return {"label": "float"}  # one number a row; never streamed (`group` 2)


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosines of ``a`` and ``b`` ``[N, H]``, in float64."""
    a, b = a.astype(np.float64), b.astype(np.float64)
    norms = np.maximum(np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1), 1e-12)
    return (a * b).sum(-1) / norms
