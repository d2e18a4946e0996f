"""The rerank task's data without TensorFlow: query-passage pairs with a relevance label, their encoding, the
scores of a model's logits, the ranking scores of a labelled file grouped by query, and what an OpenVINO or ONNX
export of a rerank run answers.

Files: JSONL of ``{"query", "passage", "label"}``, or TSV/CSV of ``query<TAB>passage<TAB>label`` (a header optional,
read as a classification file's, `kerasbert.text.readers.iter_classification`). A label is a number >= 0: 0/1, or a
grade (0, 1, 2, ...; a float such as 0.5 too). A pair is encoded ``[CLS] query [SEP] passage [SEP]`` (segments 0 and
1), cut at ``maxlen`` as bert4keras and a cross-encoder's tokenizer cut a pair (longest first): the longer text
loses pieces first, the passage unless the query is longer.

A pair's score is the sigmoid of the model's one logit (`scores_of`). A labelled file's pairs are grouped by their
query text, ranked by score, and scored with `ranking_metrics` (MRR@10, nDCG@10).

Example:
>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "dev.jsonl")
>>> _ = open(path, "w", encoding="utf-8").write('{"query": "谁", "passage": "张伟", "label": 1}\\n')
>>> list(iter_pairs(path))
[RerankExample(query='谁', passage='张伟', label=1.0)]
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from kerasbert.errors import DataError, fail
from kerasbert.text.pipeline import Features, encode_classification
from kerasbert.text.readers import ClassificationExample, Field, file_rows, get_field, iter_classification
from kerasbert.text.tokenizer import Tokenizer

__all__ = ["AT", "RerankExample", "encode_pairs", "examples_of_rows", "iter_pairs", "portable_predict",
           "ranking_metrics", "relevance", "score_rows", "scores_of"]

AT = 10  # the ranks MRR and nDCG read: MRR@10 and nDCG@10, MS MARCO's and sentence-transformers' cut


@dataclass(frozen=True)
class RerankExample:
    """One query-passage pair.

    Args:
        query: str. the query (segment 0).
        passage: str. the passage (segment 1).
        label: float or None. its relevance, a number >= 0 (None: unlabelled, for prediction).
        line: int. the line of the file it came from (1-based), for messages.
    """

    query: str
    passage: str
    label: float | None = None
    line: int = field(default=0, compare=False, repr=False)


def relevance(value: str, where: str) -> float:
    """A pair's label as written in its file, read as a finite number >= 0 (0/1, or a grade).

    Example:
    >>> relevance("2", "train.tsv:3"), relevance("0.5", "train.tsv:4")
    (2.0, 0.5)
    >>> relevance("-1", "train.tsv:5")
    Traceback (most recent call last):
    ...
    kerasbert.errors.DataError: train.tsv:5: expected a label that is a number >= 0 (0/1, or a relevance grade \
0, 1, 2, ...), found '-1'. write 0 for an irrelevant passage and a larger number for a more relevant one
    """
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not (math.isfinite(number) and number >= 0):
        raise fail(DataError, where, "a label that is a number >= 0 (0/1, or a relevance grade 0, 1, 2, ...)",
                   repr(value), "write 0 for an irrelevant passage and a larger number for a more relevant one")
    return number


def _texts(path: str, query: Field | None, passage: Field | None,
           label: Field | None) -> Iterator[tuple[int, str, str, str]]:
    """``(line, query, passage, label)`` of each row of a JSONL, TSV or CSV file, as written."""
    if not path.endswith((".jsonl", ".json")):  # positions 0, 1, 2 unless named; a header read as cls reads it
        for example in iter_classification(path, text=query, label=label, text_b=1 if passage is None else passage):
            yield example.line, example.text, example.text_b, example.label
        return
    keys = {"text": "query" if query is None else query, "text_b": "passage" if passage is None else passage,
            "label": "label" if label is None else label}
    for line, row in file_rows(path, "jsonl"):
        where = f"{path}:{line}"
        yield line, *(get_field(row, key, where, role) for role, key in keys.items())


def iter_pairs(path: str, query: Field | None = None, passage: Field | None = None,
               label: Field | None = None) -> Iterator[RerankExample]:
    """The labelled pairs of a file, one at a time; one DataError naming ``file:line`` for a bad row.

    Args:
        path: str. a ``.jsonl`` file of ``{"query", "passage", "label"}``, or a ``.tsv``/``.csv`` file of
            ``query``, ``passage``, ``label`` columns.
        query: int or str or None. the query's column or key (``--text-field``).
        passage: int or str or None. the passage's column or key (``--text-b-field``).
        label: int or str or None. the label's column or key (``--label-field``).

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "train.tsv")
    >>> _ = open(path, "w", encoding="utf-8").write("query\\tpassage\\tlabel\\n谁\\t张伟\\t2\\n谁\\t\\t0\\n")
    >>> next(iter_pairs(path))
    RerankExample(query='谁', passage='张伟', label=2.0)
    >>> list(iter_pairs(path))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kerasbert.errors.DataError: ...train.tsv:3: expected a passage, found an empty one. drop the row or fill it in
    """
    for line, first, second, value in _texts(path, query, passage, label):
        where = f"{path}:{line}"
        for name, text in (("query", first), ("passage", second)):
            if not text.strip():
                raise fail(DataError, where, f"a {name}", "an empty one", "drop the row or fill it in")
        yield RerankExample(first, second, relevance(value, where), line)


def examples_of_rows(tokenizer: Tokenizer | None, rows: Sequence[dict]) -> list[RerankExample]:
    """Unlabelled pairs of ``{"query", "passage"}`` rows, for prediction.

    Example:
    >>> examples_of_rows(None, [{"query": "谁", "passage": "张伟", "id": 3}])
    [RerankExample(query='谁', passage='张伟', label=None)]
    """
    return [RerankExample(row["query"], row["passage"], line=i + 1) for i, row in enumerate(rows)]


def encode_pairs(tokenizer: Tokenizer, examples: Sequence[RerankExample], maxlen: int | None,
                 what: str = "data") -> Features:
    """``[CLS] query [SEP] passage [SEP]`` of each pair (segments 0 and 1), cut at ``maxlen`` as a pair is cut
    (`kerasbert.text.pipeline.encode_classification`); no labels.

    Example:
    >>> tokenizer = Tokenizer({t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "谁", "张", "伟"])})
    >>> features = encode_pairs(tokenizer, [RerankExample("谁", "张伟张伟")], maxlen=6)
    >>> features.token_ids, features.segment_ids
    ([[2, 4, 3, 5, 6, 3]], [[0, 0, 0, 1, 1, 1]])
    """
    pairs = [ClassificationExample(example.query, "", example.passage, example.line) for example in examples]
    return encode_classification(tokenizer, pairs, None, maxlen, what)


def scores_of(logits: np.ndarray) -> np.ndarray:
    """The score of each pair from the model's logits ``[N]`` or ``[N, 1]``: their sigmoid, in float64.

    Example:
    >>> scores_of(np.array([[0.0], [2.0]])).round(4).tolist()
    [0.5, 0.8808]
    """
    x = np.asarray(logits, np.float64).reshape(-1)
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # the sigmoid, without exp's overflow for large |x|


def score_rows(info: dict | None, rows: Sequence[dict] | None, outputs: dict | np.ndarray) -> list[dict]:
    """``{"score"}`` of each pair from the scores of a SavedModel's ``serving_default`` (``outputs["score"]``) or an
    array of scores; unrounded, so that passages keep their order however close their scores.

    Example:
    >>> score_rows(None, None, {"score": np.array([0.25, 0.5], np.float32)})
    [{'score': 0.25}, {'score': 0.5}]
    """
    scores = outputs["score"] if isinstance(outputs, dict) else outputs
    return [{"score": float(score)} for score in np.asarray(scores).reshape(-1)]


def portable_predict(export, examples: Sequence[RerankExample], batch_size: int) -> list[dict]:
    """An OpenVINO or ONNX export's ``{"score"}`` of each pair (`kerasbert.serving.runtime.PortableExport`: its
    tokenizer, ``maxlen`` and model, run in batches of similar length by ``run_features``), as the run's predictions
    are."""
    features = encode_pairs(export.tokenizer, examples, export.info["maxlen"], "input")
    logits = np.array([float(np.reshape(row, -1)[0]) for row in export.run_features(features, batch_size)],
                      np.float64)
    return score_rows(None, None, scores_of(logits))


def _gain(label: float) -> float:
    return 2.0 ** label - 1.0


def _discounted(labels: Sequence[float]) -> float:
    """DCG of labels in rank order, the first `AT`: gains 2^rel - 1 over log2(rank + 1)."""
    return sum(_gain(label) / math.log2(rank + 2) for rank, label in enumerate(labels[:AT]))


def ranking_metrics(queries: Sequence[str], labels: Sequence[float], scores: Sequence[float]) -> dict:
    """MRR@10 and nDCG@10 of scored pairs, grouped by their query text, means over the queries.

    Each query's passages are ranked by score, best first (a tie keeps the file's order). The reciprocal rank is
    1 / the rank of the first relevant passage (a label > 0) within the first 10, else 0. nDCG@10 is the DCG of the
    first 10 (gains ``2^label - 1``, discounts ``log2(rank + 1)``) over the DCG of the passages in their best order.
    A query without a relevant passage is left out of both means, as sentence-transformers' reranking evaluator
    leaves it out (it would score 0 whatever the model did), and counted in ``no_relevant``.

    Args:
        queries: sequence of str. each pair's query.
        labels: sequence of float. each pair's label, >= 0.
        scores: sequence of float. each pair's score.

    Returns:
        dict. ``mrr_at_10``, ``ndcg_at_10``, ``count`` (the queries scored), ``no_relevant``.

    Example:
    >>> scores = ranking_metrics(["q"] * 3 + ["r"] * 2, [0, 0, 1, 1, 0], [0.9, 0.8, 0.7, 0.1, 0.6])
    >>> {key: round(value, 4) for key, value in scores.items()}  # q: relevant 3rd, r: 2nd
    {'mrr_at_10': 0.4167, 'ndcg_at_10': 0.5655, 'count': 2, 'no_relevant': 0}
    """
    groups: dict[str, list[int]] = {}
    for i, query in enumerate(queries):
        groups.setdefault(query, []).append(i)
    reciprocal, ndcg, no_relevant = [], [], 0
    for members in groups.values():
        gold = [float(labels[i]) for i in members]
        if max(gold) <= 0:
            no_relevant += 1
            continue
        ranked = [gold[k] for k in sorted(range(len(members)), key=lambda k: -float(scores[members[k]]))]
        first = next(rank for rank, label in enumerate(ranked, 1) if label > 0)
        reciprocal.append(1.0 / first if first <= AT else 0.0)
        ndcg.append(_discounted(ranked) / _discounted(sorted(gold, reverse=True)))
    means = [float(np.mean(values)) if values else 0.0 for values in (reciprocal, ndcg)]
    return {"mrr_at_10": means[0], "ndcg_at_10": means[1], "count": len(reciprocal), "no_relevant": no_relevant}
