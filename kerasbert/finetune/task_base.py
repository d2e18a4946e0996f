"""What every fine-tuning task implements (`Task`), and the batched inference its predictions share.

A task reads its files (`kerasbert.text.readers`), builds its label set, encodes examples
(`kerasbert.text.pipeline`), attaches its head (`kerasbert.modeling.heads`), turns model outputs into prediction
rows (`kerasbert.text.predictions`) and scores them (`kerasbert.finetune.metrics`). `kerasbert.finetune.training`
and `kerasbert.finetune.runs` only talk to this interface, so every task shares one training loop and one
run-folder format. The tasks are `kerasbert.finetune.tasks` (``cls``, ``ner``), `kerasbert.finetune.seq2seq` (and
`kerasbert.finetune.t5_seq2seq` on T5), `kerasbert.finetune.sim`, `kerasbert.finetune.span`, `kerasbert.finetune.mlm`
and `kerasbert.finetune.lm`.
"""

from __future__ import annotations

import abc
import os
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import keras
import numpy as np

from kerasbert.finetune import metrics
from kerasbert.finetune.options import TaskOptions
from kerasbert.text.pipeline import Features
from kerasbert.text.pre_tokenize import pre_tokenizer
from kerasbert.text.readers import LabelSet, write_text
from kerasbert.text.tokenizer import Tokenizer
from kerasbert.text.tokenizer_base import pad_id_of
from kerasbert.text.tokenizer_files import load_tokenizer

__all__ = ["EntityTask", "Task", "predict_batches"]


_INFERENCE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> (input spec, its graph function)


def _inference(model, spec):
    """``model``'s inference call; on TensorFlow one graph function for every batch size and length, since
    TensorFlow fuses the matmuls with their bias and activation only in a graph, and a function traced per
    batch shape would retrace for each batch. It is kept per model, so repeated calls trace once; the function reaches
    the model through a weak reference, so that the kept function does not keep the model (and every model a
    long-lived process predicted with) alive."""
    if keras.backend.backend() != "tensorflow":
        return lambda inputs: model(inputs, training=False)
    import tensorflow as tf

    kept = _INFERENCE.get(model)
    if kept is None or kept[0] != spec:
        weak = weakref.ref(model)
        kept = spec, tf.function(lambda inputs: weak()(inputs, training=False), input_signature=[spec])
        _INFERENCE[model] = kept
    return kept[1]


def predict_batches(model, dataset, verbose: int = 0) -> list[np.ndarray]:
    """Model outputs of each batch of ``dataset`` (batches differ in length, so no concatenation)."""
    count = int(dataset.cardinality())
    bar = keras.utils.Progbar(count if count >= 0 else None, verbose=verbose, unit_name="batch") if verbose else None
    spec = dataset.element_spec
    call = _inference(model, spec[0] if isinstance(spec, tuple) else spec)
    outputs = []
    for i, batch in enumerate(dataset):
        outputs.append(keras.ops.convert_to_numpy(call(batch[0] if isinstance(batch, tuple) else batch)))
        if bar is not None:
            bar.update(i + 1)
    return outputs


@dataclass
class Task(TaskOptions, abc.ABC):
    """A task made of its options (`kerasbert.finetune.options.TaskOptions`), and the interface each task
    implements (its abstract methods)."""

    name: str = field(default="", init=False)
    monitor: str = field(default="", init=False)
    dev_keys: tuple = field(default=(), init=False)  # the scores logged as val_<key> after each epoch
    application: str = field(default="encoder", init=False)  # the backbone's attention (kerasbert.modeling.masks)
    group: int = field(default=1, init=False)  # rows an example encodes to, batched together (`Features.group`)
    streams: bool = field(default=True, init=False)  # whether its rows stream from `kerasbert prepare`'s shards

    def make_tokenizer(self, vocab: str, lowercase: bool | None) -> Tokenizer:
        """The tokenizer of the run's vocabulary (``--vocab``, or the run folder's copy;
        `kerasbert.text.tokenizer_files.load_tokenizer`): BERT's word pieces between ``[CLS]`` and ``[SEP]``,
        lower-cased with ``lowercase``, each text first cut into words where the task's ``pre_tokenize`` says, or a
        Hugging Face ``tokenizer.json``'s pieces and rows; a task of another family's tokenizer overrides it."""
        return load_tokenizer(vocab, lowercase=lowercase, pre_tokenize=pre_tokenizer(self.pre_tokenize))

    def encoded(self, tokenizer: Tokenizer, examples, labels: LabelSet | None, maxlen: int, what: str) -> Features:
        """`encode`'s features, their rows to be padded with the tokenizer's padding id (`Features.pad_id`)."""
        features = self.encode(tokenizer, examples, labels, maxlen, what)
        features.pad_id = pad_id_of(tokenizer)
        return features

    def batches(self, dataset, tokenizer: Tokenizer, seed: int, epoch: int | None, skip: int = 0):
        """The batches the model sees, from `kerasbert.text.pipeline.to_dataset`'s: as they are, unless the task
        draws something per epoch (``epoch`` None: the fixed draw of dev data; ``skip``: batches already skipped)."""
        return dataset

    def backbone_heads(self) -> dict:
        """The pre-training heads the backbone is built with (`kerasbert.build_transformer_model`'s ``with_*``)."""
        return {}

    def callbacks(self) -> list:
        """Keras callbacks of the task's own, run before kerasbert's (their logs reach the history)."""
        return []

    def read(self, path: str, labels: LabelSet | None = None) -> list:
        """Every example of ``path``; with ``labels`` (the training set's), a label outside it is a DataError."""
        examples = list(self.stream(path))
        if labels is not None:
            self.check(examples, labels, path)
        return examples

    @abc.abstractmethod
    def stream(self, path: str) -> Iterator:
        """The examples of a file, one at a time."""

    @abc.abstractmethod
    def check(self, examples: Sequence, labels: LabelSet, path: str) -> None:
        """A DataError for the first example whose label is not in ``labels``."""

    @abc.abstractmethod
    def label_set(self, examples: Sequence) -> LabelSet:
        """The label set of the training examples."""

    label_noun = "label"  # what the training log calls one of `labelled`'s labels

    def labelled(self, examples: Sequence) -> Iterator[tuple[str, int]]:
        """Each label of the examples with the line it is on, which training counts and checks for typos
        (`kerasbert.text.label_counts`); none for a task without a label set."""
        return iter(())

    @abc.abstractmethod
    def encode(self, tokenizer: Tokenizer, examples, labels: LabelSet | None, maxlen: int, what: str) -> Features:
        """Token ids (and label ids, with ``labels``) of the examples."""

    @abc.abstractmethod
    def head(self, backbone, labels: LabelSet):
        """The task's head on ``backbone`` (a `kerasbert.modeling.heads` model)."""

    @abc.abstractmethod
    def compile_arguments(self, model) -> dict:
        """``model.compile``'s loss and metrics."""

    @abc.abstractmethod
    def predicted_ids(self, model, features: Features, batch_size: int, verbose: int = 0):
        """The predicted label id of every example (cls) or word piece (ner)."""

    @abc.abstractmethod
    def predict(self, model, features: Features, examples, labels: LabelSet, batch_size: int,
                verbose: int = 0) -> list[dict]:
        """One prediction dict per example (``label``, or ``entities``)."""

    @abc.abstractmethod
    def score(self, examples, predictions: list[dict], labels: LabelSet) -> dict:
        """The metrics of ``predictions`` against the examples' gold labels."""

    @abc.abstractmethod
    def write_report(self, folder: str, scores: dict, labels: LabelSet) -> None:
        """The task's report of dev scores in the run folder."""

    def read_run(self, folder: str) -> None:
        """Take up what the task chose on dev after training and wrote in its run folder ``folder`` (in
        `write_report`; multilabel: its threshold), as `kerasbert.finetune.runs.open_run` opens the run; nothing by
        default."""

    @abc.abstractmethod
    def examples_of_texts(self, tokenizer: Tokenizer, rows: Sequence[dict]) -> list:
        """Unlabelled examples of raw texts (``{"text", "text_b"}`` rows), for prediction."""

    @abc.abstractmethod
    def label_columns(self) -> dict[str, str]:
        """The label columns of `encode`'s `Features` as ``to_dataset`` yields them, in order: ``"label"`` or
        ``"labels"``, then ``"weights"`` if any, each ``"int"`` (one per example), ``"ints"`` or ``"floats"``
        (one per word piece)."""


class EntityTask(Task, abc.ABC):
    """A task whose predictions are entities as character spans (``ner``, ``span``): scored at the entity level,
    an entity counted where its start, end and type all match, with a per-type table as its report."""

    label_noun = "entity type"

    def labelled(self, examples: Sequence) -> Iterator[tuple[str, int]]:
        return ((label, example.line) for example in examples for _, _, label in example.spans)

    def score(self, examples, predictions: list[dict], labels: LabelSet) -> dict:
        gold = [example.spans for example in examples]
        pred = [[(e["start"], e["end"], e["label"]) for e in prediction["entities"]] for prediction in predictions]
        return metrics.entity_metrics(gold, pred)

    def write_report(self, folder: str, scores: dict, labels: LabelSet) -> None:
        """The dev per-type table as ``per_type.txt``."""
        write_text(os.path.join(folder, "per_type.txt"), metrics.per_type_table(scores) + "\n")
