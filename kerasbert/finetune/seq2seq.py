"""The ``seq2seq`` task: a UniLM (Dong et al. 2019) that learns to write a target text after a source text.

As in bert4keras's seq2seq examples: source and target are one pair, ``[CLS] source [SEP] target [SEP]``, the
target in segment 1; the backbone is built with ``application="unilm"``, so the source attends both ways and the
target causally; the loss is the cross-entropy of each target token given those before it, averaged over the
target tokens (the MLM output at position i predicts token i + 1). Generation starts from ``[CLS] source [SEP]``
cut to ``maxlen - target_maxlen`` pieces and writes at most ``target_maxlen`` pieces, until ``[SEP]``, with
`kerasbert.generation.generate` (beam search, greedy with one beam). Scores: ROUGE-1/2/L and BLEU on
characters (`kerasbert.finetune.metrics.generation_metrics`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from kerasbert.errors import DataError, ModelError, fail
from kerasbert.finetune import metrics
from kerasbert.finetune.lm import generated_ids, language_model
from kerasbert.finetune.task_base import Task
from kerasbert.modeling import heads
from kerasbert.text.pipeline import Features, encode_classification
from kerasbert.text.readers import ClassificationExample, LabelSet, iter_classification, write_text
from kerasbert.text.tokenizer import Tokenizer

__all__ = ["Seq2SeqTask", "next_token_labels"]


def next_token_labels(token_ids: Sequence[int], segment_ids: Sequence[int]) -> list[int]:
    """The label of each position: the next token where it is a target token (segment 1), else 0 (not counted).

    Example:
    >>> next_token_labels([2, 7, 3, 8, 9, 3], [0, 0, 0, 1, 1, 1])
    [0, 0, 8, 9, 3, 0]
    """
    following = list(zip(token_ids[1:], segment_ids[1:], strict=True))
    return [token if segment == 1 else 0 for token, segment in following] + [0]


@dataclass
class Seq2SeqTask(Task):
    """Source -> target text pairs; a UniLM backbone whose MLM output predicts the next target token.

    Files: JSONL with ``"source"`` and ``"target"`` (``--text-field`` / ``--label-field`` name others), or TSV/CSV
    of two columns, source first. Predictions are ``{"target": generated text}``.
    """

    name: str = field(default="seq2seq", init=False)
    monitor: str = field(default="val_rouge_l", init=False)
    dev_keys: tuple = field(default=("rouge_1", "rouge_2", "rouge_l", "bleu"), init=False)
    application: str = field(default="unilm", init=False)

    def __post_init__(self) -> None:
        metrics.seq2seq_libraries()  # fail before training when the scoring libraries are missing
        self._tokenizer: Tokenizer | None = None

    def stream(self, path: str) -> Iterator[ClassificationExample]:
        jsonl = path.endswith((".jsonl", ".json"))
        source = self.text if self.text is not None else "source" if jsonl else 0
        target = self.label if self.label is not None else "target" if jsonl else 1
        for example in iter_classification(path, text=source, label=target):
            for what, value in (("source", example.text), ("target", example.label)):
                if not str(value).strip():
                    raise fail(DataError, f"{path}:{example.line}", f"a non-empty {what}", repr(value),
                               "drop the row or fill it in")
            yield ClassificationExample(str(example.text), str(example.label), None, example.line)

    def check(self, examples: Sequence[ClassificationExample], labels: LabelSet, path: str) -> None:
        """Nothing to check: a target is any text (`stream` refuses empty ones)."""

    def label_set(self, examples: Sequence[ClassificationExample]) -> LabelSet:
        return LabelSet([])  # the labels are the vocabulary's tokens

    def encode(self, tokenizer: Tokenizer, examples, labels: LabelSet | None, maxlen: int, what: str) -> Features:
        """Pairs ``[CLS] source [SEP] target [SEP]`` with next-token labels (with ``labels``, training and scoring),
        and each source alone as the prompt generation starts from."""
        self._tokenizer = tokenizer
        if labels is None:
            sources = [ClassificationExample(example.text, "") for example in examples]
            prompts = encode_classification(tokenizer, sources, None, self.source_maxlen(maxlen), what)
            return Features(prompts.token_ids, prompts.segment_ids, truncated=prompts.truncated,
                            prompts=prompts.token_ids)
        pairs = encode_classification(tokenizer, [ClassificationExample(e.text, "", e.label) for e in examples],
                                      None, maxlen, what)
        pairs.labels = [next_token_labels(ids, segments)
                        for ids, segments in zip(pairs.token_ids, pairs.segment_ids, strict=True)]
        limit = maxlen - self.target_maxlen  # cut as a prediction's source is cut; the pairs' report covers it
        ids, segments = tokenizer.encode_batch([example.text for example in examples])
        pairs.prompts = [tokenizer.truncate(row, segment, limit)[0] if len(row) > limit else row
                         for row, segment in zip(ids, segments, strict=True)]
        return pairs

    def head(self, backbone, labels: LabelSet):
        """The backbone itself: built with ``application="unilm"``, its output is the next-token softmax."""
        return language_model(backbone, "unilm", "seq2seq backbone")

    def compile_arguments(self, model) -> dict:
        return heads.loss_and_metrics(model)  # cross-entropy over the labels that are not 0: the target tokens

    def source_maxlen(self, maxlen: int) -> int:
        """The most ids of a source generation starts from: a UniLM's target shares its ``maxlen`` positions."""
        return maxlen - self.target_maxlen

    def predicted_ids(self, model, features: Features, batch_size: int, verbose: int = 0) -> list[list[int]]:
        """The generated word-piece ids of each source, without the ``[SEP]`` that ends them; ``batch_size``
        sources a search, fewer when their beams would pass the bound of rows decoded at once."""
        end = self._decoder().token_to_id("[SEP]")
        return generated_ids(model, features.prompts, self.beams, end, self.target_maxlen, batch_size)

    def predict(self, model, features: Features, examples, labels: LabelSet, batch_size: int,
                verbose: int = 0) -> list[dict]:
        decode = self._decoder().decode
        return [{"target": decode(ids)} for ids in self.predicted_ids(model, features, batch_size, verbose)]

    def score(self, examples, predictions: list[dict], labels: LabelSet) -> dict:
        return metrics.generation_metrics([example.label for example in examples],
                                          [prediction["target"] for prediction in predictions])

    def write_report(self, folder: str, scores: dict, labels: LabelSet) -> None:
        """The dev scores as ``scores.txt``, one a line."""
        lines = [f"{key:8s} {scores[key]:.4f}" for key in self.dev_keys] + [f"{'examples':8s} {scores['count']}"]
        write_text(f"{folder}/scores.txt", "\n".join(lines) + "\n")

    def examples_of_texts(self, tokenizer: Tokenizer, rows: Sequence[dict]) -> list[ClassificationExample]:
        return [ClassificationExample(row["text"], "", None, line=i + 1) for i, row in enumerate(rows)]

    def label_columns(self) -> dict[str, str]:
        return {"labels": "ints"}

    def _decoder(self) -> Tokenizer:
        if self._tokenizer is None:
            raise fail(ModelError, "seq2seq predict", "examples encoded by this task first (its tokenizer)", "none")
        return self._tokenizer
