"""The ``relation`` task: (subject, predicate, object) triples, found by GPLinker (Su 2022,
https://kexue.fm/archives/8888) as bert4keras's ``task_relation_extraction_gplinker.py`` finds them.

Files: DuIE-style JSONL, ``{"text", "spo_list": [{"subject", "predicate", "object"}]}`` a line, ``object`` a
string or ``{"@value": ...}``, each entity at its ``subject_start`` / ``object_start`` or else at its first
occurrence in the text (`kerasbert.text.relation_data`). The predicates seen in training are the labels.

The model: three ``EfficientGlobalPointer`` heads on the encoder's output, head size 64 as the example's: the
entity pointer (2 heads, subjects and objects, rotary positions), the head pointer (one head per predicate, subject
start to object start) and the tail pointer (subject end to object end), both without rotary positions or the
lower-triangle mask. The loss of each is the example's ``globalpointer_crossentropy``: per example, the sum over
its heads of bert4keras's ``sparse_multilabel_categorical_crossentropy`` with ``mask_zero``
(`kerasbert.modeling.global_pointer.PairCodeLoss`); the model's loss is the three's sum.

A triple is predicted as the example's ``extract_spoes`` predicts it (threshold 0): subject and object spans where
the entity pointer scores > 0, a pair kept for each predicate on which the head and the tail pointers both score
> 0. Predictions: ``{"spo_list": [{"subject", "subject_start", "subject_end", "predicate", "object",
"object_start", "object_end"}]}``, character offsets, ends exclusive. Scores: triple-level precision, recall and F1,
a triple being its (subject, predicate, object) strings compared per text as sets, as the example's ``evaluate``
counts them (it compares the strings' word pieces); per-predicate scores (``per_type``) in ``per_predicate.txt``.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import keras

from kerasbert import layer_names as names
from kerasbert.errors import DataError, fail
from kerasbert.finetune import metrics
from kerasbert.finetune.task_base import Task, predict_batches
from kerasbert.modeling import heads
from kerasbert.modeling.global_pointer import PairCodeLoss
from kerasbert.text.pipeline import to_dataset
from kerasbert.text.readers import LabelSet, write_text
from kerasbert.text.relation_data import (
    ENTITY_HEADS,
    RelationExample,
    RelationFeatures,
    encode_relations,
    examples_of_rows,
    found_triples,
    iter_relation_examples,
    string_triples,
    triple_row,
)
from kerasbert.text.tokenizer import Tokenizer

__all__ = ["HEAD_SIZE", "RelationTask", "stacked_logits"]

HEAD_SIZE = 64  # each pointer's query and key, as bert4keras's GPLinker example
_STACKED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> its stacked_logits model


def stacked_logits(model: keras.Model) -> keras.Model:
    """``model``'s three pointers as one output ``[B, 2 + 2P, S, S]`` (entity, head, tail), in float32: what
    prediction decodes (`kerasbert.text.relation_data.found_triples`) and a portable export holds (one output)."""
    stacked = _STACKED.get(model)
    if stacked is None:
        outputs = [keras.ops.cast(output, "float32") for output in model.outputs]
        joined = keras.layers.Concatenate(axis=1, name=names.RELATION_LOGITS)(outputs)
        stacked = _STACKED[model] = keras.Model(model.inputs, joined, name=f"{model.name}-stacked")
    return stacked


@dataclass
class RelationTask(Task):
    """(subject, predicate, object) triples, GPLinker."""

    name: str = field(default="relation", init=False)
    monitor: str = field(default="val_f1", init=False)
    dev_keys: tuple = field(default=("precision", "recall", "f1"), init=False)
    label_noun = "predicate"

    def stream(self, path: str) -> Iterator[RelationExample]:
        return iter_relation_examples(path)

    def check(self, examples: Sequence[RelationExample], labels: LabelSet, path: str) -> None:
        for example in examples:
            for triple in example.triples:
                if triple[2] not in labels:
                    raise fail(DataError, f"{path}:{example.line}", f"predicates seen in training, {labels.labels}",
                               repr(triple[2]), "add it to the training data")

    def labelled(self, examples: Sequence[RelationExample]) -> Iterator[tuple[str, int]]:
        return ((triple[2], example.line) for example in examples for triple in example.triples)

    def label_set(self, examples: Sequence[RelationExample]) -> LabelSet:
        """The predicates, sorted: predicate p is head p of the head and tail pointers."""
        predicates = LabelSet.from_labels(label for label, _ in self.labelled(examples))
        if not predicates.labels:
            raise fail(DataError, "training data", "at least one triple", "none", "check the spo_list of each line")
        return predicates

    def encode(self, tokenizer: Tokenizer, examples, labels: LabelSet | None, maxlen: int,
               what: str) -> RelationFeatures:
        return encode_relations(tokenizer, examples, labels, maxlen, what)

    def head(self, backbone, labels: LabelSet):
        return heads.relations(backbone, len(labels), head_size=HEAD_SIZE)

    def compile_arguments(self, model) -> dict:
        predicates = int(model.outputs[1].shape[1])
        kinds = ENTITY_HEADS + 2 * predicates
        return {"loss": [PairCodeLoss(0, ENTITY_HEADS, kinds, name="entity_loss"),
                         PairCodeLoss(ENTITY_HEADS, predicates, kinds, name="head_loss"),
                         PairCodeLoss(ENTITY_HEADS + predicates, predicates, kinds, name="tail_loss")]}

    def batches(self, dataset, tokenizer: Tokenizer, seed: int, epoch: int | None, skip: int = 0):
        """Each batch's pair codes given to each of the three outputs, whose loss reads its own."""
        return dataset.map(lambda x, codes: (x, (codes, codes, codes)))

    def predicted_ids(self, model, features: RelationFeatures, batch_size: int, verbose: int = 0) -> list:
        """The stacked pointer logits ``[2 + 2P, S, S]`` of every example, ``S`` its batch's length."""
        batches = predict_batches(stacked_logits(model), to_dataset(features, batch_size, labels=False), verbose)
        return [row for batch in batches for row in batch]

    def predict(self, model, features: RelationFeatures, examples, labels: LabelSet, batch_size: int,
                verbose: int = 0) -> list[dict]:
        logits = self.predicted_ids(model, features, batch_size, verbose)
        return [triple_row(example.text, found_triples(row, len(ids) - 2), offsets, labels.labels)
                for example, row, ids, offsets in zip(examples, logits, features.token_ids, features.offsets,
                                                      strict=True)]

    def score(self, examples, predictions: list[dict], labels: LabelSet) -> dict:
        """Triple-level precision, recall and F1 of (subject, predicate, object) strings; ``per_type``: per
        predicate (`kerasbert.finetune.metrics.entity_metrics`, the predicate as the type)."""
        predicted = [[(spo["subject"], spo["object"], spo["predicate"]) for spo in prediction["spo_list"]]
                     for prediction in predictions]
        return metrics.entity_metrics([string_triples(example) for example in examples], predicted)

    def write_report(self, folder: str, scores: dict, labels: LabelSet) -> None:
        """The dev per-predicate table as ``per_predicate.txt``."""
        write_text(os.path.join(folder, "per_predicate.txt"), metrics.per_type_table(scores) + "\n")

    def label_columns(self) -> dict[str, str]:
        return {"labels": "ints"}  # pair codes, one row at least as long as the tokens'

    def examples_of_texts(self, tokenizer: Tokenizer, rows: Sequence[dict]) -> list[RelationExample]:
        return examples_of_rows(tokenizer, rows)
