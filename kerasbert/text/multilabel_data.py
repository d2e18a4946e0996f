"""The ``multilabel`` task's data without TensorFlow: its files, label vectors, scores, threshold and prediction rows,
and the parts of its exports that run without TensorFlow (`kerasbert.serving.task_exports`).

Files: JSONL ``{"text", "labels": ["a", "b"]}`` a line (the labels a JSON list, maybe empty: no label), or TSV/CSV
with a label column whose labels are joined by ``separator`` (``--label-separator``, ``","``; an empty cell: no
label). Fields are named as the cls task's (``--text-field``, ``--text-b-field``, ``--label-field``), read with
`kerasbert.text.readers.get_field`; the label field defaults to ``labels`` in JSONL and to column 1 (2 with a
second text) in TSV/CSV. A label repeated in one row counts once, as a set has it. A label is predicted where its
sigmoid score is over the run's threshold (`THRESHOLD`, or the one chosen on dev,
`kerasbert.finetune.multilabel.best_threshold`); a prediction row
is ``{"labels": [over the threshold, highest score first], "scores": {label: score}}`` (`score_row`).

Example:
>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "train.tsv")
>>> _ = open(path, "w", encoding="utf-8").write("服务很好，价格不贵\\t服务,价格\\n环境一般\\t\\n")
>>> [(example.text, example.labels) for example in iter_multilabel(path)]
[('服务很好，价格不贵', ('服务', '价格')), ('环境一般', ())]
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from kerasbert.errors import DataError, fail
from kerasbert.text.pipeline import Features, encode_classification
from kerasbert.text.predictions import DECIMALS
from kerasbert.text.readers import (
    Field,
    LabelSet,
    _after_header,
    _column,
    _format_of,
    _warn_once,
    file_rows,
    get_field,
)
from kerasbert.text.tokenizer import Tokenizer
from kerasbert.text.windows import encode_split, mean_by_document

__all__ = ["THRESHOLD", "MultiLabelExample", "check_labels", "encode_multilabel", "examples_of_rows", "export_info",
           "iter_multilabel", "label_set", "multi_hot", "portable_predict", "row_labels", "score_row", "score_rows",
           "width"]

THRESHOLD = 0.5  # a run without dev predicts a label where its score is over this


@dataclass(frozen=True)
class MultiLabelExample:
    """One text (or text pair) with its labels.

    Args:
        text: str. the first text.
        labels: tuple of str. its labels, each once, in the order of the file (empty: none).
        text_b: str or None. the second text of a pair.
        line: int. the line of the file it came from (1-based), for messages.
    """

    text: str
    labels: tuple[str, ...] = ()
    text_b: str | None = None
    line: int = field(default=0, compare=False)


# ---------------------------------------------------------------------------- reading
def iter_multilabel(path: str, text: Field | None = None, label: Field | None = None, text_b: Field | None = None,
                    separator: str = ",", fmt: str | None = None,
                    header: bool | None = None) -> Iterator[MultiLabelExample]:
    """The examples of a multilabel file, one at a time, read as it goes.

    Args:
        path: str. the file; ``.jsonl``/``.json``, ``.tsv``/``.txt`` or ``.csv`` (or ``fmt``).
        text: int or str. the text's column or JSON key (default 0, or ``"text"``).
        label: int or str. the labels' column or key (default 1, 2 with ``text_b``, or ``"labels"``).
        text_b: int, str or None. the second text's column, for pairs.
        separator: str. what joins the labels of a TSV/CSV cell.
        fmt: str or None. ``"tsv"``, ``"csv"`` or ``"jsonl"``, overriding the extension.
        header: bool or None. whether the first row of a TSV/CSV names the columns (None: as
            `kerasbert.text.readers.read_classification` decides).

    Yields:
        MultiLabelExample.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "train.jsonl")
    >>> _ = open(path, "w").write('{"text": "a", "labels": ["x", "y", "x"]}\\n{"text": "b", "labels": []}\\n')
    >>> [example.labels for example in iter_multilabel(path)]
    [('x', 'y'), ()]
    """
    fmt = fmt or _format_of(path)
    jsonl = fmt == "jsonl"
    text = ("text" if jsonl else 0) if text is None else text
    label = ("labels" if jsonl else (1 if text_b is None else 2)) if label is None else label
    keys = {"text": text, "text_b": text_b, "label": label}
    rows, skipped = file_rows(path, fmt), None
    named = bool(header) or (header is None and not jsonl and any(isinstance(key, str) for key in keys.values()))
    if named:
        first = next(rows, None)
        if first is None:
            raise fail(DataError, path, "at least one example", "an empty file")
        text, label, text_b = (_column(key, first[1], path) for key in (text, label, text_b))
    elif header is None and not jsonl:
        rows, skipped = _after_header(rows, path, fmt, keys)
    count = 0
    for line, row in rows:
        if skipped and not count:
            _warn_once(path, skipped)
        count += 1
        where = f"{path}:{line}"
        first_text = get_field(row, text, where)
        second = None if text_b is None else get_field(row, text_b, where, "text_b")
        yield MultiLabelExample(first_text, row_labels(row, label, separator, where), second, line)
    if not count:
        raise fail(DataError, path, "at least one example", "only a header" if skipped or named else "an empty file")


def row_labels(row: list | dict, key: Field, separator: str, where: str) -> tuple[str, ...]:
    """The labels of one row, each once, in order: a JSON list's items, or a cell's labels split at ``separator``
    (spaces around each stripped, empty ones dropped).

    Example:
    >>> row_labels(["好", "服务, 价格,服务"], 1, ",", "train.tsv:1")
    ('服务', '价格')
    >>> row_labels({"text": "好", "labels": "服务,价格"}, "labels", ",", "train.jsonl:1")
    Traceback (most recent call last):
    ...
    kerasbert.errors.DataError: train.jsonl:1: expected field 'labels' to be a JSON list of labels, found a string \
'服务,价格'. write the labels as a list: ["服务", "价格"]
    """
    if isinstance(row, dict) and key in row:
        value = row[key]
        if isinstance(value, str):
            listed = json.dumps([part.strip() for part in value.split(separator) if part.strip()], ensure_ascii=False)
            raise fail(DataError, where, f"field {key!r} to be a JSON list of labels", f"a string {value!r}",
                       f"write the labels as a list: {listed}")
        if not isinstance(value, list):
            raise fail(DataError, where, f"field {key!r} to be a JSON list of labels", _json_kind(value),
                       'write the labels as a list, e.g. ["a", "b"], or [] for none')
        names = [_one_label(item, key, where) for item in value]
    elif isinstance(row, list) and isinstance(key, int) and -len(row) <= key < len(row):
        names = [part.strip() for part in row[key].split(separator) if part.strip()]
    else:
        get_field(row, key, where, "label")  # the error of a row without that field
        names = []
    return tuple(dict.fromkeys(names))


def _json_kind(value: object) -> str:
    kinds = {list: "a list", dict: "an object", bool: "a bool", int: "a number", float: "a number"}
    return "null" if value is None else f"{kinds.get(type(value), type(value).__name__)} {value!r}"


def _one_label(item: object, key: Field, where: str) -> str:
    """One item of a JSON label list as a string: a non-blank string, or a number as written."""
    if isinstance(item, str) and item.strip():
        return item
    if isinstance(item, int | float) and not isinstance(item, bool):
        return str(item)
    found = "an empty label" if isinstance(item, str) else _json_kind(item)
    raise fail(DataError, where, f"each label of field {key!r} a string or a number", found,
               "write each label as a JSON string")


def label_set(examples: Iterable[MultiLabelExample]) -> LabelSet:
    """The labels of the training examples, sorted (label ``k`` is the head's output ``k``); a DataError when no
    example has one.

    Example:
    >>> label_set([MultiLabelExample("a", ("y", "x")), MultiLabelExample("b")]).labels
    ['x', 'y']
    """
    labels = LabelSet.from_labels(name for example in examples for name in example.labels)
    if not labels.labels:
        raise fail(DataError, "training data", "at least one example with a label", "no labels at all",
                   "check the label field (--label-field) and --label-separator")
    return labels


def check_labels(examples: Sequence[MultiLabelExample], labels: LabelSet, path: str) -> None:
    """A DataError naming every label of ``examples`` that ``labels`` (the training set's) lacks, and the line each
    is first on.

    Example:
    >>> check_labels([MultiLabelExample("a", ("x", "z"), line=3)], LabelSet(["x", "y"]), "dev.jsonl")
    Traceback (most recent call last):
    ...
    kerasbert.errors.DataError: dev.jsonl:3: expected labels seen in training, ['x', 'y'], found unseen labels 'z' \
(line 3). add them to the training data
    """
    unseen: dict[str, int] = {}
    for example in examples:
        for name in example.labels:
            if name not in labels:
                unseen.setdefault(name, example.line)
    if unseen:
        where = ", ".join(f"{name!r} (line {line})" for name, line in unseen.items())
        raise fail(DataError, f"{path}:{min(unseen.values())}", f"labels seen in training, {labels.labels}",
                   f"unseen labels {where}", "add them to the training data")


# ---------------------------------------------------------------------------- encoding
def multi_hot(label_lists: Sequence[Sequence[str]], labels: LabelSet) -> np.ndarray:
    """float32 ``[N, L]``: 1 where row ``i`` has label ``k``.

    Example:
    >>> multi_hot([("y",), (), ("x", "y")], LabelSet(["x", "y"])).tolist()
    [[0.0, 1.0], [0.0, 0.0], [1.0, 1.0]]
    """
    out = np.zeros((len(label_lists), len(labels)), np.float32)
    index = {name: k for k, name in enumerate(labels.labels)}
    for i, names in enumerate(label_lists):
        out[i, [index[name] for name in names]] = 1.0
    return out


def encode_multilabel(tokenizer: Tokenizer, examples: Sequence[MultiLabelExample], labels: LabelSet | None,
                      maxlen: int | None, what: str = "data", stride: int | None = None) -> Features:
    """Texts (or pairs) as `kerasbert.text.pipeline.encode_classification` encodes them, each with its label vector
    (`multi_hot`, one float32 array a row) when ``labels`` is given; with ``stride``, a text longer than ``maxlen``
    is split into windows (`kerasbert.text.windows.encode_split`), each with its text's labels.

    Example:
    >>> tokenizer = Tokenizer({t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "b"])})
    >>> features = encode_multilabel(tokenizer, [MultiLabelExample("a b", ("y",))], LabelSet(["x", "y"]), 8)
    >>> features.token_ids, [row.tolist() for row in features.labels]
    ([[2, 4, 5, 3]], [[0.0, 1.0]])
    """

    def encode(cut: int | None) -> Features:
        features = encode_classification(tokenizer, examples, None, cut, what)
        if labels is not None:
            features.labels = list(multi_hot([example.labels for example in examples], labels))
        return features

    return encode_split(encode, maxlen, stride, what, examples)


# ---------------------------------------------------------------------------- predictions and scores
def score_row(scores: Sequence[float], labels: Sequence[str], threshold: float) -> dict:
    """A prediction row: the labels scored over ``threshold``, highest first, and every label's score (rounded to
    `kerasbert.text.predictions.DECIMALS` places).

    Example:
    >>> score_row([0.9, 0.2, 0.6], ["价格", "环境", "服务"], 0.5)
    {'labels': ['价格', '服务'], 'scores': {'价格': 0.9, '环境': 0.2, '服务': 0.6}}
    """
    scores = np.asarray(scores, np.float64)
    order = np.argsort(-scores, kind="stable")
    return {"labels": [labels[k] for k in order if scores[k] > threshold],
            "scores": {name: round(float(score), DECIMALS) for name, score in zip(labels, scores, strict=True)}}


# ------------------------------------------------------------------------ exports (`kerasbert.serving.task_exports`)
def examples_of_rows(tokenizer: Tokenizer, rows: Sequence[dict]) -> list[MultiLabelExample]:
    """Unlabelled examples of ``{"text"[, "text_b"]}`` rows.

    Example:
    >>> examples_of_rows(None, [{"text": "好"}])
    [MultiLabelExample(text='好', labels=(), text_b=None, line=1)]
    """
    return [MultiLabelExample(row["text"], (), row.get("text_b"), i + 1) for i, row in enumerate(rows)]


def export_info(loaded) -> dict:
    """What a multilabel export records beside its labels: the run's ``threshold`` (`kerasbert.finetune.runs.LoadedRun`
    of a multilabel run)."""
    return {"threshold": float(loaded.task.threshold)}


def width(shape: Sequence[int]) -> int:
    """The labels a portable model's output row of ``shape`` (``[L]``: one score a label) answers.

    Example:
    >>> width((4,))
    4
    """
    return int(shape[-1])


def score_rows(info: dict, rows: Sequence[dict], outputs: dict) -> list[dict]:
    """The prediction of each input row from the SavedModel's outputs on them (`kerasbert.serving.multilabel_export`):
    its ``labels`` (padded with ``""``) and every label's score.

    Example:
    >>> outputs = {"scores": np.array([[0.75, 0.25]]), "labels": np.array([[b"x", b""]])}
    >>> score_rows({"labels": ["x", "y"]}, [{"text": "a"}], outputs)
    [{'labels': ['x'], 'scores': {'x': 0.75, 'y': 0.25}}]
    """
    return [{"labels": [name.decode() for name in names if name],
             "scores": score_row(scores, info["labels"], 1.0)["scores"]}
            for names, scores in zip(outputs["labels"], outputs["scores"], strict=True)]


def portable_predict(export, examples: Sequence[MultiLabelExample], batch_size: int) -> list[dict]:
    """An OpenVINO or ONNX export's predictions (`kerasbert.serving.runtime.PortableExport`): each text's scores,
    a long text's the mean of its windows' with the export's ``stride``, and its labels over its ``threshold``."""
    info = export.info
    features = encode_multilabel(export.tokenizer, examples, None, info["maxlen"], "input", info.get("stride"))
    scores = export.run_features(features, batch_size)
    merged = mean_by_document(features.windows, np.array(scores, np.float32).reshape(len(features), -1))
    return [score_row(row, export.labels.labels, info["threshold"]) for row in merged]
