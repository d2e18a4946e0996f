"""The ``lm`` task: a GPT family's language model trained on more of the user's text, as bert4keras's GPT examples
train one (``task_language_model.py``'s loss).

Texts are one a line (blank lines skipped) or JSONL of ``{"text": ...}``, tokenized without start or end tokens as
bert4keras's GPT examples tokenize them (``Tokenizer(vocab, token_start=None, token_end=None)``, or ``SpTokenizer``
for a SentencePiece ``.model``), each cut to ``maxlen`` pieces. The loss is the cross-entropy of each next token:
the output at position i predicts token i + 1, padding not counted, the mean over the batch's predicted tokens
(bert4keras's ``y_true[:, 1:]`` against ``y_pred[:, :-1]``, masked where the token is padding). Dev scores are that
loss, its perplexity ``exp(loss)`` and the share of next tokens predicted right. ``predict`` continues each text
with `kerasbert.generation.generate` (greedy, or beam search with ``beams``), at most ``target_maxlen`` tokens.

Example:
>>> next_token_labels([5, 6, 7])
[6, 7, 0]
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from kerasbert.choices import GENERATE_LIMITS
from kerasbert.errors import DataError, ModelError, fail
from kerasbert.finetune.mlm import row_sums
from kerasbert.finetune.task_base import Task
from kerasbert.generation.generate import generate
from kerasbert.modeling import heads
from kerasbert.modeling.masks import application_of
from kerasbert.text.pipeline import Features, report_truncation, to_dataset
from kerasbert.text.readers import LabelSet, read_texts, write_text
from kerasbert.text.sentencepiece import SpTokenizer
from kerasbert.text.tokenizer import Tokenizer

__all__ = ["LanguageModelTask", "cut_ids", "generated_ids", "language_model", "next_token_labels",
           "sentencepiece_vocab"]


def next_token_labels(token_ids: Sequence[int]) -> list[int]:
    """The label of each position: the token after it, 0 (not counted) at the last.

    Example:
    >>> next_token_labels([0, 8, 9, 1])
    [8, 9, 1, 0]
    """
    return [*token_ids[1:], 0]


def sentencepiece_vocab(path: str) -> bool:
    """Whether a ``--vocab`` is a SentencePiece model (``.model``) rather than a WordPiece ``vocab.txt``.

    Example:
    >>> sentencepiece_vocab("spiece.model"), sentencepiece_vocab("vocab.txt")
    (True, False)
    """
    return str(path).endswith(".model")


def cut_ids(encode: Callable[..., tuple[list[int], list[int]]], texts: Sequence[str], maxlen: int,
            what: str) -> list[list[int]]:
    """Each text's ids by ``encode(text, maxlen=...)``, at most ``maxlen``; how many were cut is logged."""
    rows, cut = [], 0
    for text in texts:
        ids = encode(text, maxlen=maxlen + 1)[0]  # one more than kept: a longer text is one that was cut
        if len(ids) > maxlen:
            ids, cut = encode(text, maxlen=maxlen)[0], cut + 1
        rows.append(ids)
    report_truncation(cut, len(rows), maxlen, what)
    return rows


def generated_ids(model, prompts: Sequence[Sequence[int]], beams: int, end_id: int | None, max_length: int,
                  batch_size: int, start_id: int | None = None) -> list[list[int]]:
    """Each prompt's generated ids by `generate` (beam search with ``beams`` > 1, else greedy; an encoder-decoder's
    decoder from ``start_id``), without the ``end_id`` that ends them; ``batch_size`` prompts a search, fewer when
    their beams would pass the bound of rows decoded at once."""
    found = generate(model, prompts, "beam" if beams > 1 else "greedy", beams=beams if beams > 1 else None,
                     end_ids=end_id, max_length=max_length, start_id=start_id,
                     batch_size=max(1, min(batch_size, GENERATE_LIMITS["rows"] // beams)))
    return [ids[:-1] if ids and end_id is not None and ids[-1] == end_id else ids for ids in (g.ids[0] for g in found)]


def language_model(backbone, application: str, what: str):
    """``backbone`` itself, whose output is the next-token softmax; a ModelError naming ``what`` unless it was built
    with ``application`` (``"lm"``: a GPT family; ``"unilm"``: a UniLM).

    Example:
    >>> from kerasbert import build_transformer_model
    >>> language_model(build_transformer_model("tiny", verbose=False), "lm", "lm backbone")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kerasbert.errors.ModelError: lm backbone: expected a model built with application="lm", found 'encoder'...
    """
    if application_of(backbone) != application:
        raise fail(ModelError, what, f'a model built with application="{application}"', repr(application_of(backbone)))
    return backbone


@dataclass
class LanguageModelTask(Task):
    """Texts -> a GPT family's next-token loss; predictions continue a text (``{"continuation": text}``)."""

    name: str = field(default="lm", init=False)
    monitor: str = field(default="val_loss", init=False)
    dev_keys: tuple = field(default=("loss", "perplexity", "accuracy"), init=False)
    application: str = field(default="lm", init=False)
    streams: bool = field(default=False, init=False)  # its rows are read from one file, in memory

    def __post_init__(self) -> None:
        self._tokenizer = None

    def make_tokenizer(self, vocab: str, lowercase: bool | None):
        """bert4keras's GPT tokenizers: no start or end token; a ``.model`` vocabulary is SentencePiece's."""
        if sentencepiece_vocab(vocab):
            return SpTokenizer(vocab, token_start=None, token_end=None)
        return Tokenizer(vocab, do_lower_case=bool(lowercase), token_start=None, token_end=None)

    def stream(self, path: str) -> Iterator[str]:
        for number, row in enumerate(read_texts(path), 1):
            text = row["text"]
            if not isinstance(text, str) or not text.strip():
                raise fail(DataError, f"{path}: text {number}", "a non-empty text", repr(text)[:80],
                           "drop the row or fill it in")
            yield text

    def check(self, examples: Sequence[str], labels: LabelSet, path: str) -> None:
        """Nothing to check: a text has no label (`stream` refuses empty ones)."""

    def label_set(self, examples: Sequence[str]) -> LabelSet:
        return LabelSet([])  # the labels are the vocabulary's tokens

    def encode(self, tokenizer, examples, labels: LabelSet | None, maxlen: int, what: str) -> Features:
        """Each text's ids cut to ``maxlen``, with next-token labels (with ``labels``: training and scoring), or
        as the prompt generation continues (without)."""
        self._tokenizer = tokenizer
        rows = cut_ids(tokenizer.encode, examples, maxlen, what)
        segments = [[0] * len(row) for row in rows]
        if labels is None:
            return Features(rows, segments, prompts=rows)
        return Features(rows, segments, labels=[next_token_labels(row) for row in rows])

    def head(self, backbone, labels: LabelSet):
        """The backbone itself: a GPT family's output is the next-token softmax."""
        return language_model(backbone, "lm", "lm backbone")

    def compile_arguments(self, model) -> dict:
        return heads.loss_and_metrics(model)  # cross-entropy over the labels that are not 0: the next tokens

    def predicted_ids(self, model, features: Features, batch_size: int, verbose: int = 0):
        """With labels, each row's summed next-token loss, right predictions and count (`row_sums`); without, each
        prompt's generated ids."""
        if features.labels is None:
            return generated_ids(model, features.prompts, self.beams, None, self.target_maxlen, batch_size)
        rows, keys = [], ("loss", "right", "count")
        dataset = to_dataset(features, batch_size)
        sums = row_sums(model, dataset.element_spec)
        for inputs, targets in dataset:
            columns = [column.numpy().tolist() for column in sums(inputs, targets)]
            rows += [dict(zip(keys, values, strict=True)) for values in zip(*columns, strict=True)]
        return rows

    def predict(self, model, features: Features, examples, labels: LabelSet, batch_size: int,
                verbose: int = 0) -> list[dict]:
        rows = self.predicted_ids(model, features, batch_size, verbose)
        if features.labels is not None:
            return rows
        return [{"continuation": self._decoder().decode(ids)} for ids in rows]

    def score(self, examples, predictions: list[dict], labels: LabelSet) -> dict:
        """The mean next-token loss over the predicted tokens, its perplexity and the share predicted right."""
        count = int(sum(row["count"] for row in predictions))
        loss = sum(row["loss"] for row in predictions) / max(count, 1)
        return {"loss": loss, "perplexity": math.exp(min(loss, 700.0)),
                "accuracy": sum(row["right"] for row in predictions) / max(count, 1), "count": count}

    def write_report(self, folder: str, scores: dict, labels: LabelSet) -> None:
        """The dev scores as ``scores.txt``."""
        lines = [f"{key:<11}{scores[key]:.4f}" for key in self.dev_keys]
        write_text(os.path.join(folder, "scores.txt"), "\n".join([*lines, f"{'tokens':<11}{scores['count']}", ""]))

    def examples_of_texts(self, tokenizer, rows: Sequence[dict]) -> list[str]:
        for number, row in enumerate(rows, 1):
            if not str(row["text"]).strip():
                raise fail(DataError, f"text {number}", "a non-empty prompt to continue", repr(row["text"]))
        return [str(row["text"]) for row in rows]

    def label_columns(self) -> dict[str, str]:
        return {"labels": "ints"}

    def _decoder(self):
        if self._tokenizer is None:
            raise fail(ModelError, "lm predict", "texts encoded by this task first (its tokenizer)", "none")
        return self._tokenizer
