"""The ``rerank`` task: a cross-encoder's score of each query-passage pair, the stage after sentence vectors.

A retriever finds candidate passages by their vectors (`kerasbert.embed`); a cross-encoder reads the query and one
passage together, ``[CLS] query [SEP] passage [SEP]``, and scores how well the passage answers the query, which
orders the candidates better than their cosines do. The head is sentence-transformers' ``CrossEncoder`` with
``num_labels=1``: one ``Dense(1)`` on ``[CLS]``, a logit (`kerasbert.modeling.heads.cls`, linear), trained with
binary cross-entropy on the labels divided by ``label_scale``, the largest training label (0/1 labels stay 0/1;
grades 0..G become 0, 1/G, ..., 1), recorded in ``args.json``. A pair's score is the sigmoid of its logit.

Data, encoding and scores: `kerasbert.text.rerank_data` (no TensorFlow). Dev and test files are scored per query:
MRR@10 and nDCG@10 (`kerasbert.text.rerank_data.ranking_metrics`); ``mrr_at_10`` picks the best epoch.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import keras
import numpy as np

from kerasbert.errors import ConfigError, DataError, fail
from kerasbert.finetune.task_base import Task, predict_batches
from kerasbert.modeling import heads
from kerasbert.text.pipeline import Features, to_dataset
from kerasbert.text.readers import LabelSet
from kerasbert.text.rerank_data import (
    RerankExample,
    encode_pairs,
    examples_of_rows,
    iter_pairs,
    ranking_metrics,
    score_rows,
    scores_of,
)
from kerasbert.text.tokenizer import Tokenizer

__all__ = ["RerankTask"]


@dataclass
class RerankTask(Task):
    """Query-passage pairs with a relevance label (0/1 or a grade >= 0); a pair -> one logit, its score the
    sigmoid.

    Files: JSONL of ``{"query", "passage", "label"}``, or TSV/CSV of ``query``, ``passage``, ``label`` (columns 0,
    1, 2; ``--text-field``, ``--text-b-field`` and ``--label-field`` name others). Predictions are ``{"score"}``.
    """

    name: str = field(default="rerank", init=False)
    monitor: str = field(default="val_mrr_at_10", init=False)
    dev_keys: tuple = field(default=("mrr_at_10", "ndcg_at_10"), init=False)
    streams: bool = field(default=False, init=False)  # float labels: prepared shards hold label ids

    def stream(self, path: str) -> Iterator[RerankExample]:
        return iter_pairs(path, self.text, self.text_b, self.label)

    def check(self, examples: Sequence[RerankExample], labels: LabelSet, path: str) -> None:
        """A file scored against the training data must have something to rank: a pair labelled > 0. A query all
        of whose passages are irrelevant is fine: it is left out of the scores (`ranking_metrics`)."""
        if not any(example.label > 0 for example in examples):
            raise fail(DataError, path, "at least one relevant pair (a label > 0) to rank", "every label 0",
                       "label the passages that answer their query with 1 (or a grade)")

    def label_set(self, examples: Sequence[RerankExample]) -> LabelSet:
        """No label ids (a label is a number); settles ``label_scale`` from the training labels when it is None:
        the largest, so the targets lie in [0, 1]."""
        largest = max(examples, key=lambda example: example.label)
        if largest.label <= 0:
            raise fail(DataError, "training data", "at least one relevant pair (a label > 0) to learn from",
                       "every label 0", "label the passages that answer their query with 1 (or a grade)")
        if self.label_scale is None:
            self.label_scale = largest.label
        elif not (isinstance(self.label_scale, (int, float)) and self.label_scale > 0):
            raise fail(ConfigError, "label_scale", "a number > 0", repr(self.label_scale))
        elif largest.label > self.label_scale:
            raise fail(DataError, f"line {largest.line}", f"labels of at most label_scale = {self.label_scale:g}",
                       f"{largest.label:g}", "leave label_scale out to take the largest training label")
        return LabelSet([])

    def encode(self, tokenizer: Tokenizer, examples, labels: LabelSet | None, maxlen: int, what: str) -> Features:
        """``[CLS] query [SEP] passage [SEP]``; with ``labels`` (training and scoring), each pair's target, its label
        over ``label_scale`` (at most 1: a dev label above the training data's largest is fully relevant)."""
        features = encode_pairs(tokenizer, examples, maxlen, what)
        if labels is not None:
            scale = float(self.label_scale or 1.0)
            features.labels = [min(float(example.label) / scale, 1.0) for example in examples]
        return features

    def head(self, backbone, labels: LabelSet):
        return heads.cls(backbone, 1, dropout=self.dropout, activation="linear")

    def compile_arguments(self, model) -> dict:
        return {"loss": keras.losses.BinaryCrossentropy(from_logits=True)}

    def predicted_ids(self, model, features: Features, batch_size: int, verbose: int = 0) -> np.ndarray:
        """The score of each pair, the sigmoid of its logit."""
        batches = predict_batches(model, to_dataset(features, batch_size, labels=False), verbose)
        return scores_of(np.concatenate(batches) if batches else np.zeros((0, 1)))

    def predict(self, model, features: Features, examples, labels: LabelSet, batch_size: int,
                verbose: int = 0) -> list[dict]:
        """``{"score"}`` of each pair."""
        return score_rows(None, None, self.predicted_ids(model, features, batch_size, verbose))

    def score(self, examples, predictions: list[dict], labels: LabelSet) -> dict:
        return ranking_metrics([example.query for example in examples], [example.label for example in examples],
                               [prediction["score"] for prediction in predictions])

    def write_report(self, folder: str, scores: dict, labels: LabelSet) -> None:
        """Nothing beside ``metrics.json``, which holds every score."""

    def examples_of_texts(self, tokenizer: Tokenizer, rows: Sequence[dict]) -> list[RerankExample]:
        """The pairs of ``{"query", "passage"}`` rows."""
        return examples_of_rows(tokenizer, rows)

    def label_columns(self) -> dict[str, str]:
        return {"label": "float"}  # one number a pair; never streamed
