"""The fine-tuning tasks by name: ``cls`` and ``ner`` here, ``seq2seq`` in `kerasbert.finetune.seq2seq` (a UniLM)
and `kerasbert.finetune.t5_seq2seq` (a T5 family), ``sim`` in `kerasbert.finetune.sim`, ``span`` in
`kerasbert.finetune.span`, ``mlm`` in `kerasbert.finetune.mlm`, ``lm`` in `kerasbert.finetune.lm`, ``qa`` in
`kerasbert.finetune.qa`, ``multilabel`` in `kerasbert.finetune.multilabel`, ``relation`` in
`kerasbert.finetune.relation`, ``rerank`` in `kerasbert.finetune.rerank`; each a
`kerasbert.finetune.task_base.Task`, what training, evaluation and prediction need of it. `get_task` makes one by
name (and family), `task_of` the one a run's arguments describe.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import keras
import numpy as np

from kerasbert import layer_names as names
from kerasbert.choices import TASK_NAMES
from kerasbert.errors import ConfigError, DataError, fail
from kerasbert.finetune import metrics, plots
from kerasbert.finetune.lm import LanguageModelTask
from kerasbert.finetune.mlm import MaskedLmTask
from kerasbert.finetune.multilabel import MultiLabelTask
from kerasbert.finetune.options import TaskOptions
from kerasbert.finetune.qa import QaTask
from kerasbert.finetune.relation import RelationTask
from kerasbert.finetune.rerank import RerankTask
from kerasbert.finetune.seq2seq import Seq2SeqTask
from kerasbert.finetune.sim import SimilarityTask
from kerasbert.finetune.span import SpanTask
from kerasbert.finetune.t5_seq2seq import T5Seq2SeqTask
from kerasbert.finetune.task_base import EntityTask, Task, predict_batches
from kerasbert.modeling import families, heads, losses
from kerasbert.text.ner_readers import NerExample, iter_conll, iter_span_jsonl
from kerasbert.text.pipeline import Features, encode_classification, encode_ner, ner_tag_set, text_example, to_dataset
from kerasbert.text.predictions import entities_row, label_row
from kerasbert.text.readers import ClassificationExample, LabelSet, iter_classification
from kerasbert.text.tokenizer import Tokenizer
from kerasbert.text.windows import encode_split, mean_by_document, merge_pieces

if TYPE_CHECKING:
    import argparse

    from kerasbert.finetune.args import TrainArgs

__all__ = ["TASKS", "ClassificationTask", "NerTask", "Task", "get_task", "predict_batches", "task_of"]


@dataclass
class ClassificationTask(Task):
    """Single texts or pairs with one label each; CLS-token -> Dense softmax."""

    name: str = field(default="cls", init=False)
    monitor: str = field(default="val_accuracy", init=False)
    dev_keys: tuple = field(default=("accuracy", "macro_f1"), init=False)

    def stream(self, path: str) -> Iterator[ClassificationExample]:
        return iter_classification(path, text=self.text, label=self.label, text_b=self.text_b)

    def check(self, examples: Sequence[ClassificationExample], labels: LabelSet, path: str) -> None:
        labels.check(examples, path)

    def label_set(self, examples: Sequence[ClassificationExample]) -> LabelSet:
        return LabelSet.from_examples(examples)

    def labelled(self, examples: Sequence[ClassificationExample]) -> Iterator[tuple[str, int]]:
        return ((example.label, example.line) for example in examples)

    def encode(self, tokenizer: Tokenizer, examples, labels: LabelSet | None, maxlen: int, what: str) -> Features:
        return encode_split(lambda cut: encode_classification(tokenizer, examples, labels, cut, what), maxlen,
                            self.stride, what, examples)

    def head(self, backbone, labels: LabelSet):
        return heads.cls(backbone, len(labels), dropout=self.dropout)

    def compile_arguments(self, model) -> dict:
        return heads.loss_and_metrics(model)

    def _probabilities(self, model, features: Features, batch_size: int, verbose: int = 0) -> np.ndarray:
        """Each example's probabilities: a long one's are the mean of its windows' (`mean_by_document`)."""
        batches = predict_batches(model, to_dataset(features, batch_size, labels=False), verbose)
        return mean_by_document(features.windows, np.concatenate(batches))

    def predicted_ids(self, model, features: Features, batch_size: int, verbose: int = 0) -> np.ndarray:
        """The argmax label id of every example."""
        return np.argmax(self._probabilities(model, features, batch_size, verbose), axis=-1)

    def predict(self, model, features: Features, examples, labels: LabelSet, batch_size: int,
                verbose: int = 0) -> list[dict]:
        return [label_row(row, labels.labels) for row in self._probabilities(model, features, batch_size, verbose)]

    def score(self, examples, predictions: list[dict], labels: LabelSet) -> dict:
        y_true = [labels.index(example.label) for example in examples]
        y_pred = [labels.index(prediction["label"]) for prediction in predictions]
        return metrics.classification_metrics(y_true, y_pred, labels.labels)

    def write_report(self, folder: str, scores: dict, labels: LabelSet) -> None:
        """The dev confusion matrix as ``confusion.png``."""
        plots.plot_confusion(scores["confusion"], labels.labels, os.path.join(folder, "confusion.png"))

    def label_columns(self) -> dict[str, str]:
        return {"label": "int"}

    def examples_of_texts(self, tokenizer: Tokenizer, rows: Sequence[dict]) -> list[ClassificationExample]:
        return [ClassificationExample(row["text"], "", row.get("text_b"), line=i + 1) for i, row in enumerate(rows)]


@dataclass
class NerTask(EntityTask):
    """Entities as character spans; word pieces tagged in BIO by softmax or a CRF."""

    name: str = field(default="ner", init=False)
    monitor: str = field(default="val_f1", init=False)
    dev_keys: tuple = field(default=("precision", "recall", "f1"), init=False)

    def stream(self, path: str) -> Iterator[NerExample]:
        if path.endswith((".jsonl", ".json")):
            return iter_span_jsonl(path)
        return iter_conll(path, scheme=self.scheme, strict=self.strict)

    def check(self, examples: Sequence[NerExample], labels: LabelSet, path: str) -> None:
        known = {label[2:] for label in labels.labels if label != "O"}
        for example in examples:
            for _, _, label in example.spans:
                if label not in known:
                    raise fail(DataError, f"{path}:{example.line}", f"entity types seen in training, {sorted(known)}",
                               f"{label!r}", "add it to the training data")

    def label_set(self, examples: Sequence[NerExample]) -> LabelSet:
        tags = ner_tag_set(examples)
        if len(tags) == 1:
            raise fail(DataError, "training data", "at least one entity", "none", "check the tag column")
        return tags

    def encode(self, tokenizer: Tokenizer, examples, labels: LabelSet | None, maxlen: int, what: str) -> Features:
        return encode_split(lambda cut: encode_ner(tokenizer, examples, labels, cut, crf=self.crf, what=what), maxlen,
                            self.stride, what)

    def head(self, backbone, labels: LabelSet):
        return heads.tagging(backbone, len(labels), crf=self.crf, bilstm_units=self.bilstm_units,
                             dropout=self.dropout, crf_lr_multiplier=self.crf_lr_multiplier)

    def compile_arguments(self, model) -> dict:
        if self.crf:
            return heads.loss_and_metrics(model)
        # weights: 1 on each word's first piece, 0 on other pieces, [CLS], [SEP] and padding; the loss is
        # Σ w·CE / Σ w, the mean over words, whatever the padding (Keras's default divides by B·S)
        loss = losses.SparseLabelLoss(int(model.output.shape[-1]), what=names.TAGGING_DENSE,
                                     reduction="mean_with_sample_weight")
        return {"loss": loss, "weighted_metrics": [losses.accuracy_metric(keras.metrics.sparse_categorical_accuracy)]}

    def predicted_ids(self, model, features: Features, batch_size: int, verbose: int = 0) -> list[np.ndarray]:
        """The tag id of every word piece of every example: the CRF's Viterbi path, or the argmax; a long example's
        from its windows, each piece's from the window where it is furthest from an edge (`merge_pieces`)."""
        decoder = heads.crf_decoder(model) if self.crf else model
        batches = predict_batches(decoder, to_dataset(features, batch_size, labels=False), verbose)
        return merge_pieces(features.windows, [row for batch in batches
                                               for row in (batch if self.crf else np.argmax(batch, axis=-1))])

    def predict(self, model, features: Features, examples, labels: LabelSet, batch_size: int,
                verbose: int = 0) -> list[dict]:
        rows = self.predicted_ids(model, features, batch_size, verbose)
        return [entities_row(example.text, row, firsts, example.offsets, labels)
                for example, row, firsts in zip(examples, rows, features.first_pieces, strict=True)]

    def label_columns(self) -> dict[str, str]:
        return {"labels": "ints"} if self.crf else {"labels": "ints", "weights": "floats"}  # weights: first pieces

    def examples_of_texts(self, tokenizer: Tokenizer, rows: Sequence[dict]) -> list[NerExample]:
        return [text_example(tokenizer, row["text"]) for row in rows]


# in the order of kerasbert.choices.TASK_NAMES
TASKS = dict(zip(TASK_NAMES, (ClassificationTask, NerTask, Seq2SeqTask, SpanTask, SimilarityTask, MaskedLmTask,
                              LanguageModelTask, QaTask, MultiLabelTask, RelationTask, RerankTask), strict=True))
ARCHITECTURE_TASKS = {("seq2seq", "t5"): T5Seq2SeqTask}  # a task of another class on an architecture's families


def get_task(name: str, family: str | None = None, **options) -> Task:
    """The task called ``name`` (``"cls"``, ``"ner"``, ``"seq2seq"``, ...) with its options
    (`kerasbert.finetune.options.TaskOptions`'s fields), for the family ``family`` (None: an encoder family):
    ``seq2seq`` on a T5 family is `T5Seq2SeqTask`.

    Example:
    >>> type(get_task("seq2seq", "mt5.1.1")).__name__, type(get_task("seq2seq")).__name__
    ('T5Seq2SeqTask', 'Seq2SeqTask')
    """
    if name not in TASKS:
        raise fail(ConfigError, "--task", f"one of {sorted(TASKS)}", repr(name))
    architecture = families.get(family).architecture if family is not None else "encoder"
    return ARCHITECTURE_TASKS.get((name, architecture), TASKS[name])(**options)


def task_of(args: TrainArgs | argparse.Namespace) -> Task:
    """The task ``args`` describe: its ``task`` name and the options it holds
    (`kerasbert.finetune.options.TaskOptions.of`), as `kerasbert.finetune.args.TrainArgs` or the CLI's namespace
    give them.

    Example:
    >>> import argparse
    >>> task_of(argparse.Namespace(task="ner", crf=True)).crf
    True
    """
    return get_task(args.task, getattr(args, "model", None), **TaskOptions.of(args).task_options())
