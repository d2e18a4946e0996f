"""The ``qa`` task: extractive question answering (SQuAD v1.1 and v2.0, CMRC 2018): a start and an end pointer over
the word pieces of a context, as BERT's SQuAD fine-tuning and Hugging Face's ``run_qa.py`` train them.

Files and encoding: `kerasbert.text.qa_data` (SQuAD JSON or JSONL; ``[CLS] question [SEP] context window [SEP]``
rows, a long context split into windows sharing ``--stride`` pieces, ``maxlen // 4`` by default; the question cut
to ``--max-query-length`` pieces). The head (`kerasbert.modeling.heads.qa`) is one ``QA-Dense`` of two units over
the sequence output: each position's start and end logits. The loss (`PointerLoss`) is the mean of the start's and
the end's softmax cross-entropy over a row's real positions (not its padding). A window that does not hold the
answer whole, and a question without one, point at ``[CLS]``.

An answer is the span of the highest start plus end logit over the windows of its context, at most
``--max-answer-length`` pieces; with ``--null-answers`` (on by default where a training question has no answer,
SQuAD 2.0) the answer is none (``""``) where the null score, ``[CLS]``'s start plus end logit, beats it (Hugging
Face's ``null_score_diff_threshold`` 0). Predictions are ``{"answer", "start", "end", "score"}`` (character offsets
into the context, ``end`` exclusive; -1 for no answer). Scores: EM and F1 by SQuAD's or CMRC 2018's official rules,
chosen by the data (`kerasbert.finetune.qa_metrics`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from kerasbert.finetune.qa_metrics import choose_metric, qa_scores
from kerasbert.finetune.task_base import Task, predict_batches
from kerasbert.modeling import heads
from kerasbert.modeling.losses import PointerLoss
from kerasbert.text.pipeline import to_dataset
from kerasbert.text.qa_data import (
    QaExample,
    QaFeatures,
    encode_qa,
    examples_of_rows,
    iter_qa_examples,
    qa_predictions,
)
from kerasbert.text.readers import LabelSet, write_text
from kerasbert.text.tokenizer import Tokenizer

__all__ = ["PointerLoss", "QaTask"]


@dataclass
class QaTask(Task):
    """Extractive question answering: a start and an end pointer over a context's word pieces."""

    name: str = field(default="qa", init=False)
    monitor: str = field(default="val_f1", init=False)
    dev_keys: tuple = field(default=("exact", "f1"), init=False)
    streams: bool = field(default=False, init=False)  # a context's windows are made from the whole question

    def stream(self, path: str) -> Iterator[QaExample]:
        return iter_qa_examples(path, strict=self.strict)

    def check(self, examples: Sequence[QaExample], labels: LabelSet, path: str) -> None:
        """Nothing to check: no label set."""

    def label_set(self, examples: Sequence[QaExample]) -> LabelSet:
        """No labels; settles ``null_answers`` from the training data when it is None: on where a question has no
        answer."""
        if self.null_answers is None:
            self.null_answers = any(not example.answers for example in examples)
        return LabelSet([])

    def encode(self, tokenizer: Tokenizer, examples, labels: LabelSet | None, maxlen: int, what: str) -> QaFeatures:
        return encode_qa(tokenizer, examples, maxlen, self.stride, self.max_query_length, labels is not None, what)

    def head(self, backbone, labels: LabelSet):
        return heads.qa(backbone)

    def compile_arguments(self, model) -> dict:
        return {"loss": PointerLoss()}

    def predicted_ids(self, model, features: QaFeatures, batch_size: int, verbose: int = 0) -> list:
        """The start and end logits ``[length, 2]`` of every row (a window of a context)."""
        batches = predict_batches(model, to_dataset(features, batch_size, labels=False), verbose)
        return [row[:len(ids)] for row, ids in zip((row for batch in batches for row in batch), features.token_ids,
                                                   strict=True)]

    def predict(self, model, features: QaFeatures, examples, labels: LabelSet, batch_size: int,
                verbose: int = 0) -> list[dict]:
        logits = self.predicted_ids(model, features, batch_size, verbose)
        return qa_predictions(examples, features, logits, self.max_answer_length, bool(self.null_answers))

    def score(self, examples, predictions: list[dict], labels: LabelSet) -> dict:
        metric = choose_metric([example.context for example in examples])
        return qa_scores([example.texts for example in examples], [row["answer"] for row in predictions], metric)

    def write_report(self, folder: str, scores: dict, labels: LabelSet) -> None:
        """The dev scores as ``scores.txt``, one a line."""
        lines = [f"{key:13s} {scores[key]:.4f}" if isinstance(scores[key], float) else f"{key:13s} {scores[key]}"
                 for key in sorted(scores)]
        write_text(os.path.join(folder, "scores.txt"), "\n".join(lines) + "\n")

    def examples_of_texts(self, tokenizer: Tokenizer, rows: Sequence[dict]) -> list[QaExample]:
        return examples_of_rows(tokenizer, rows)

    def label_columns(self) -> dict[str, str]:
        return {"labels": "ints"}  # `pointer_labels`, one row as long as the tokens'
