"""The ``span`` task: entities as spans of word pieces, nested and overlapping ones included, found by a
GlobalPointer (Su 2021, https://kexue.fm/archives/8373), as bert4keras's GlobalPointer NER example finds them.

Files: span JSONL (``{"text", "entities": [{"start", "end", "label"}]}`` a line, character offsets, ``end``
exclusive; entities may nest and overlap) or CoNLL (flat entities). Each entity type is one head of the pointer
(`kerasbert.modeling.heads.spans`, head size 64, rotary positions); the loss is bert4keras's multilabel categorical
cross-entropy over every span of every type (`kerasbert.modeling.global_pointer.SpanCodeLoss`, the gold spans
coming as span codes, `kerasbert.text.span_data`). A span is predicted where its logit is > 0, and read back to
character offsets; predictions are ``{"entities": [{"start", "end", "label", "text"}]}`` as the ``ner`` task's,
sorted by start, end and label. Scores: entity-level exact-match precision, recall and F1.

With ``--stride`` a text longer than ``maxlen`` is split into windows (`kerasbert.text.windows`): in training each
window keeps the gold spans wholly inside it; in prediction a span is kept from the window where its pieces are
furthest from an edge (`kerasbert.text.windows.merge_spans`), and scored per text.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from kerasbert.errors import DataError, fail
from kerasbert.finetune.task_base import EntityTask, predict_batches
from kerasbert.modeling import heads
from kerasbert.modeling.global_pointer import SpanCodeLoss, span_f1
from kerasbert.modeling.losses import accuracy_metric
from kerasbert.text.pipeline import to_dataset
from kerasbert.text.readers import LabelSet
from kerasbert.text.span_data import SpanExample, SpanFeatures, encode_spans, found_spans, iter_span_examples, span_rows
from kerasbert.text.tokenizer import Tokenizer

__all__ = ["HEAD_SIZE", "SpanTask"]

HEAD_SIZE = 64  # each type's span query and key, as bert4keras's GlobalPointer example


@dataclass
class SpanTask(EntityTask):
    """Entities as character spans that may nest, one GlobalPointer head per entity type."""

    name: str = field(default="span", init=False)
    monitor: str = field(default="val_f1", init=False)
    dev_keys: tuple = field(default=("precision", "recall", "f1"), init=False)

    def stream(self, path: str) -> Iterator[SpanExample]:
        return iter_span_examples(path, scheme=self.scheme, strict=self.strict)

    def check(self, examples: Sequence[SpanExample], labels: LabelSet, path: str) -> None:
        for example in examples:
            for _, _, label in example.spans:
                if label not in labels:
                    raise fail(DataError, f"{path}:{example.line}", f"entity types seen in training, {labels.labels}",
                               repr(label), "add it to the training data")

    def label_set(self, examples: Sequence[SpanExample]) -> LabelSet:
        """The entity types, sorted: type k is the pointer's head k."""
        types = LabelSet.from_labels(label for example in examples for _, _, label in example.spans)
        if not types.labels:
            raise fail(DataError, "training data", "at least one entity", "none", "check the entities of each line")
        return types

    def encode(self, tokenizer: Tokenizer, examples, labels: LabelSet | None, maxlen: int,
               what: str) -> SpanFeatures:
        return encode_spans(tokenizer, examples, labels, maxlen, what, self.stride)

    def head(self, backbone, labels: LabelSet):
        return heads.spans(backbone, len(labels), head_size=HEAD_SIZE)

    def compile_arguments(self, model) -> dict:
        return {"loss": SpanCodeLoss(), "metrics": [accuracy_metric(span_f1)]}

    def predicted_ids(self, model, features: SpanFeatures, batch_size: int, verbose: int = 0) -> list:
        """The span logits ``[K, S, S]`` of every row (an example, or a window of one), ``S`` its batch's length."""
        batches = predict_batches(model, to_dataset(features, batch_size, labels=False), verbose)
        return [row for batch in batches for row in batch]

    def predict(self, model, features: SpanFeatures, examples, labels: LabelSet, batch_size: int,
                verbose: int = 0) -> list[dict]:
        logits = self.predicted_ids(model, features, batch_size, verbose)
        found = [found_spans(row, len(ids) - 2) for row, ids in zip(logits, features.token_ids, strict=True)]
        return span_rows([example.text for example in examples], found, features, labels.labels)

    def label_columns(self) -> dict[str, str]:
        return {"labels": "ints"}  # span codes, one row as long as the tokens'

    def examples_of_texts(self, tokenizer: Tokenizer, rows: Sequence[dict]) -> list[SpanExample]:
        return [SpanExample(row["text"], [], i + 1) for i, row in enumerate(rows)]
