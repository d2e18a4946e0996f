"""Data readers: text files and classification TSV/CSV/JSONL (NER files: `kerasbert.text.ner_readers`).

Every reader returns a list of small dataclass examples and raises one :class:`DataError` naming the file and
line for bad input; the lines come from `kerasbert.text.lines` (`read_lines` and `read_text`, re-exported here),
which bounds each line's bytes as it reads. Each has an ``iter_*`` twin that yields the same examples
while reading the file line by line, so files larger than memory stream (`kerasbert.finetune.streaming`);
the list reader is ``list()`` of it, one parsing code path. Writers write to a temporary name and rename, so a
failed write never leaves a partial file. Tag schemes live in :mod:`kerasbert.text.schemes`.

Example:
>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "train.tsv")
>>> _ = open(path, "w", encoding="utf-8").write("很好\\tpos\\n太差\\tneg\\n")
>>> [(example.text, example.label) for example in read_classification(path)]
[('很好', 'pos'), ('太差', 'neg')]
"""

from __future__ import annotations

import csv
import itertools
import json
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from kerasbert.errors import DataError, fail
from kerasbert.files import json_value, write_text
from kerasbert.log import logger
from kerasbert.text.limits import check_text
from kerasbert.text.lines import read_lines, read_text

Field = int | str


# ---------------------------------------------------------------------------- classification


@dataclass(frozen=True)
class ClassificationExample:
    """One text (or text pair) with its label.

    Args:
        text: str. the first text.
        label: str. the label as written in the file.
        text_b: str or None. the second text of a pair.
        line: int. the line of the file it came from (1-based), for messages.
    """

    text: str
    label: str
    text_b: str | None = None
    line: int = field(default=0, compare=False)


@dataclass
class LabelSet:
    """The labels of a task, in a fixed order: ``labels[i]`` has id ``i``.

    Args:
        labels: list of str. the labels, each once.

    Example:
    >>> import os, tempfile
    >>> labels = LabelSet.from_labels(["pos", "neg", "pos"])
    >>> labels.labels, labels.index("pos")
    (['neg', 'pos'], 1)
    >>> path = os.path.join(tempfile.mkdtemp(), "labels.json")
    >>> labels.save(path); LabelSet.load(path) == labels
    True
    """

    labels: list[str]

    @classmethod
    def from_labels(cls, labels: Iterable[str]) -> LabelSet:
        """Build a label set from the labels seen in training data, sorted so order is reproducible."""
        return cls(sorted(set(labels)))

    @classmethod
    def from_examples(cls, examples: Iterable[ClassificationExample]) -> LabelSet:
        """Build a label set from training examples."""
        return cls.from_labels(example.label for example in examples)

    def __len__(self) -> int:
        return len(self.labels)

    def __contains__(self, label: object) -> bool:
        return label in self.labels

    def index(self, label: str) -> int:
        """The id of ``label``; a :class:`DataError` when the set does not have it."""
        if label not in self.labels:
            raise fail(DataError, "label", f"one of {self.labels}", repr(label))
        return self.labels.index(label)

    def check(self, examples: Sequence[ClassificationExample], path: str) -> None:
        """Fail with every label of ``examples`` not in this set, and where each is first seen."""
        unseen: dict[str, int] = {}
        for example in examples:
            if example.label not in self.labels:
                unseen.setdefault(example.label, example.line)
        if unseen:
            where = ", ".join(f"{label!r} (line {line})" for label, line in unseen.items())
            raise fail(DataError, f"{path}:{min(unseen.values())}", f"labels seen in training, {self.labels}",
                       f"unseen labels {where}", "add them to the training data or to labels.json")

    def save(self, path: str) -> None:
        """Write the set as ``{"labels": [...]}`` to ``path`` (atomically)."""
        write_text(path, json.dumps({"labels": self.labels}, ensure_ascii=False, indent=1) + "\n")

    @classmethod
    def load(cls, path: str) -> LabelSet:
        """Read a set written by :meth:`save`."""
        value = json_value(read_text(path), path, 'JSON {"labels": [...]}')
        labels = value.get("labels") if isinstance(value, dict) else None
        if labels is None:
            raise fail(DataError, path, 'JSON {"labels": [...]}', "something else")
        if not isinstance(labels, list) or len(set(labels)) != len(labels):
            raise fail(DataError, path, "a list of distinct labels", repr(labels))
        return cls([str(label) for label in labels])


def file_rows(path: str, fmt: str) -> Iterable[tuple[int, list[str] | dict]]:
    """Yield ``(line, row)``: a list of columns, or the JSON value of a line; blank lines skipped."""
    lines = read_lines(path)
    if fmt == "jsonl":
        for number, line in enumerate(lines, 1):
            if line.strip():
                yield number, json_value(line, f"{path}:{number}", "one JSON object")
        return
    dialect = {"delimiter": "\t", "quoting": csv.QUOTE_NONE} if fmt == "tsv" else {"delimiter": ","}
    reader = csv.reader(lines, **dialect)
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            raise fail(DataError, f"{path}:{reader.line_num}", f"fields under {csv.field_size_limit()} characters",
                       f"{error}", "a quote left open reads the rest of the file into one field") from None
        if any(cell.strip() for cell in row):
            yield reader.line_num, row


def _column(key: Field | None, names: list[str], path: str) -> Field | None:
    """Turn a column name into its index in the header ``names``."""
    if not isinstance(key, str):
        return key
    if key not in names:
        raise fail(DataError, f"{path}:1", f"a column {key!r} in the header", f"columns {names}")
    return names.index(key)


ROLES = {"text": "the text", "text_b": "the second text", "label": "the label"}


def get_field(row: list | dict, key: Field, where: str, role: str = "text") -> str:
    """One field of a row as a string: a column index, or a column name / JSON key.

    Args:
        row: list or dict. a row's columns, or a JSONL line's value.
        key: int or str. the column index or the JSON key.
        where: str. ``path:line``, for messages.
        role: str. ``"text"``, ``"text_b"`` or ``"label"``: what the field holds. A JSON text must be a
            string; a JSON label a string, a number or a bool (written as in the file), never null or a
            list; a label is never empty.

    Returns:
        str. the field; a text of more than `kerasbert.text.limits.MAX_TEXT_CHARS` characters is a DataError.

    Example:
    >>> get_field(["很好", "pos"], 1, "train.tsv:1", "label")
    'pos'
    >>> get_field({"text": "好", "label": ["pos"]}, "label", "train.jsonl:1", "label")
    Traceback (most recent call last):
    ...
    kerasbert.errors.DataError: train.jsonl:1: expected field 'label' to be one label (a string or a number), \
found a list ['pos']. one label a line: the cls task reads one label per example
    """
    if isinstance(row, list) and isinstance(key, int) and -len(row) <= key < len(row):
        value = row[key]
    elif isinstance(row, dict) and key in row:
        value = _json_field(row[key], key, where, role)
    else:
        raise _missing_field(row, key, where, role)
    if role == "label" and not value.strip():
        what = f"column {key}" if isinstance(key, int) else f"field {key!r}"
        raise fail(DataError, where, f"a label in {what}", "an empty label", "give the example its label or remove it")
    return value if role == "label" else check_text(value, where)


def _json_field(value: object, key: Field, where: str, role: str) -> str:
    """A JSONL field's value as a string, or the DataError of a value of the wrong JSON type."""
    if isinstance(value, str):
        return value
    if role == "label" and isinstance(value, int | float | bool):
        return str(value)
    expected = "one label (a string or a number)" if role == "label" else "a string"
    found = "null" if value is None else f"{_JSON_TYPES.get(type(value), type(value).__name__)} {value!r}"
    hint = ("one label a line: the cls task reads one label per example" if isinstance(value, list | dict)
            and role == "label" else f"write {ROLES[role]} as a JSON string")
    raise fail(DataError, where, f"field {key!r} to be {expected}", found, hint)


_JSON_TYPES = {list: "a list", dict: "an object", int: "a number", float: "a number", bool: "a bool"}


def _missing_field(row: object, key: Field, where: str, role: str) -> DataError:
    """The DataError of a row that has no field ``key``."""
    if isinstance(row, dict):
        return fail(DataError, where, f"field {key!r}", f"keys {sorted(map(str, row))}",
                    "check the text / text_b / label arguments")
    if not isinstance(row, list):  # a JSON line holding null, a number or a string: no keys to list
        return fail(DataError, where, f"field {key!r}", f"a JSON {type(row).__name__}",
                    "each line must be a JSON object")
    if not isinstance(key, int):
        return fail(DataError, where, f"field {key!r}", f"a row of {len(row)} values without names",
                    "a JSONL line is a JSON object; a TSV/CSV file with a header needs header=True")
    needed = key + 1 if key >= 0 else -key
    columns = "column" if len(row) == 1 else "columns"
    shown = _shorten(row[0] if len(row) == 1 else "")
    return fail(DataError, where, f"{needed} columns ({ROLES[role]} in column {key}, counting from 0)",
                f"{len(row)} {columns}" + (f" ({shown!r})" if shown else ""), _columns_hint(row))


def _shorten(cell: str, width: int = 40) -> str:
    return cell if len(cell) <= width else cell[:width] + "..."


def _columns_hint(row: list[str]) -> str:
    if len(row) == 1 and "\t" in row[0]:
        return "the line has tabs but is read as CSV: name a tab-separated file .tsv"
    if len(row) == 1 and "," in row[0]:
        return "the line has commas but no tab: name a comma-separated file .csv"
    return "check the text / text_b / label arguments (--text-field, --text-b-field, --label-field)"


def read_classification(path: str, text: Field | None = None, label: Field | None = None,
                        text_b: Field | None = None, fmt: str | None = None, header: bool | None = None,
                        labels: LabelSet | None = None) -> list[ClassificationExample]:
    """Read a classification file: TSV, CSV or JSONL, one example a row.

    Args:
        path: str. the file; its extension (``.tsv``, ``.csv``, ``.jsonl``/``.json``) gives the format.
        text: int or str. the text's column index or name (JSONL key). Defaults: 0, or ``"text"`` for JSONL.
        label: int or str. the label's column. Defaults: 1 (or 2 with ``text_b``), or ``"label"``.
        text_b: int, str or None. the second text's column, for pairs.
        fmt: str or None. ``"tsv"``, ``"csv"`` or ``"jsonl"``, overriding the extension.
        header: bool or None. whether the first row names the columns. None: yes when a field is given by
            name; with fields by position, yes when the first row names columns (see `COLUMN_NAMES`) and its
            label is no other row's label, which is logged, as is a first example whose label occurs only once.
        labels: LabelSet or None. the training label set: labels not in it are a :class:`DataError`.

    Returns:
        list of ClassificationExample.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "train.csv")
    >>> _ = open(path, "w").write("sentence,label\\ngood film,pos\\n")
    >>> read_classification(path, text="sentence")
    [ClassificationExample(text='good film', label='pos', text_b=None, line=2)]
    """
    examples = list(iter_classification(path, text, label, text_b, fmt, header))
    if labels is not None:
        labels.check(examples, path)
    return examples


def iter_classification(path: str, text: Field | None = None, label: Field | None = None,
                        text_b: Field | None = None, fmt: str | None = None,
                        header: bool | None = None) -> Iterator[ClassificationExample]:
    """:func:`read_classification` one example at a time, reading the file as it goes.

    Args:
        path: str. the file. The other arguments are those of :func:`read_classification`.

    Yields:
        ClassificationExample.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "train.tsv")
    >>> _ = open(path, "w").write("good\\tpos\\nbad\\tneg\\n")
    >>> [example.label for example in iter_classification(path)]
    ['pos', 'neg']
    """
    fmt = fmt or _format_of(path)
    jsonl = fmt == "jsonl"
    text = ("text" if jsonl else 0) if text is None else text
    label = ("label" if jsonl else (1 if text_b is None else 2)) if label is None else label
    keys = {"text": text, "text_b": text_b, "label": label}
    rows, skipped = file_rows(path, fmt), None
    if header or (header is None and not jsonl and any(isinstance(key, str) for key in keys.values())):
        names = next(rows)[1]
        text, label, text_b = (_column(key, names, path) for key in (text, label, text_b))
    elif header is None and not jsonl:
        rows, skipped = _after_header(rows, path, fmt, keys)
    count, label_type = 0, _LabelType(label)
    for line, row in rows:
        if skipped and not count:
            _warn_once(path, skipped)
        count += 1
        where = f"{path}:{line}"
        first, second = get_field(row, text, where), None if text_b is None else get_field(row, text_b, where, "text_b")
        value = get_field(row, label, where, "label")
        label_type.check(row, line, where)
        yield ClassificationExample(first, value, second, line)
    if not count:
        raise fail(DataError, path, "at least one example", "only a header")


# Column names that mark a first row as a header (compared in lower case).
COLUMN_NAMES = frozenset({
    "text", "texts", "text_a", "text_b", "text1", "text2", "sentence", "sentence1", "sentence2", "sentences",
    "review", "content", "comment", "query", "question", "q1", "q2", "title", "document", "doc", "input",
    "label", "labels", "class", "category", "target", "sentiment", "polarity", "tag", "intent", "topic", "y",
    "文本", "句子", "内容", "评论", "问题", "标题", "标签", "类别", "分类", "情感", "类型"})
_NAME = re.compile(r"[^\W\d][\w .\-]{0,31}")  # a letter, then up to 31 letters, digits, spaces, _ . -


def _after_header(rows: Iterator[tuple[int, list[str]]], path: str, fmt: str,
                  keys: dict[str, Field | None]) -> tuple[Iterator[tuple[int, list[str]]], str | None]:
    """The rows of a TSV/CSV file read by position, without its first row when that row is a header.

    The first row is a header when it has column names (each field name-like, one of them in
    `COLUMN_NAMES`) and its label is no other row's label. The rows then start after it, and the returned
    message says so, for the log. A first row whose label occurs nowhere else but that names no known column
    stays an example, and the log says how to read it as a header.
    """
    first = next(rows, None)
    if first is None:
        return rows, None
    line, row = first
    used = {role: key for role, key in keys.items() if key is not None}
    if not all(isinstance(key, int) and -len(row) <= key < len(row) and _NAME.fullmatch(row[key].strip())
               for key in used.values()) or _label_elsewhere(path, fmt, row[keys["label"]], keys["label"]):
        return itertools.chain([first], rows), None
    names = {role: row[key].strip() for role, key in used.items()}  # a name holds no quote: see _NAME
    flags = " ".join(f"--{role.replace('_', '-')}-field " + (f"'{name}'" if " " in name else name)
                     for role, name in names.items())
    cells = ", ".join(repr(row[key]) for key in used.values())
    unique = f"its label {row[keys['label']]!r} is no other line's label"
    if any(row[key].strip().lower() in COLUMN_NAMES for key in used.values()):
        return rows, (f"{path}:{line}: {cells} read as a header, not as an example: {unique} and it names "
                      f"columns; name the fields to say so ({flags})")
    _warn_once(path, f"{path}:{line}: {cells} read as an example, though {unique}; if this line names the columns, "
                     f"name the fields ({flags})")
    return itertools.chain([first], rows), None


_WARNED: set[tuple] = set()


def _warn_once(path: str, message: str) -> None:
    """Log ``message`` about ``path`` once for each version of the file, though training reads a file twice."""
    stat = os.stat(path)
    key = (message, stat.st_size, stat.st_mtime_ns)
    if key not in _WARNED:
        _WARNED.add(key)
        logger.warning(message)


def _label_elsewhere(path: str, fmt: str, label: str, key: int) -> bool:
    """Whether a row after the first of ``path`` has the label ``label`` in column ``key``."""
    rows = itertools.islice(file_rows(path, fmt), 1, None)
    return any(-len(row) <= key < len(row) and row[key] == label for _, row in rows)


class _LabelType:
    """The JSON type of a JSONL file's labels, the first one's; a label of another type is a DataError (``1`` and
    ``"1"`` would otherwise become one label, ``1`` and ``1.0`` two)."""

    def __init__(self, key: Field) -> None:
        self.key, self.first = key, None

    def check(self, row: list | dict, line: int, where: str) -> None:
        if not isinstance(row, dict) or self.key not in row:
            return
        kind = type(row[self.key]).__name__
        if self.first is None:
            self.first = (kind, line)
        elif kind != self.first[0]:
            raise fail(DataError, where, f"labels of one JSON type, {self.first[0]} as on line {self.first[1]}",
                       f"{kind} {row[self.key]!r}", "write every label the same way, e.g. all as strings")


def read_texts(path: str, fields: Sequence[str] = ("text",)) -> list[dict]:
    """Unlabelled inputs for prediction: the objects of a ``.jsonl`` file, each with every one of ``fields`` (a
    task's, `kerasbert.choices.input_fields`: ``"text"``, maybe ``"text_b"``; fields of your own are kept), or one
    text a line of any other file where ``fields`` is ``("text",)`` alone.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "in.jsonl")
    >>> _ = open(path, "w").write('{"text": "好", "id": 7}\\n\\n{"text": "a", "text_b": "b"}\\n')
    >>> read_texts(path)
    [{'text': '好', 'id': 7}, {'text': 'a', 'text_b': 'b'}]
    """
    fields = tuple(field for field in fields if field != "text_b")  # a pair's second text may be left out
    if not path.endswith((".jsonl", ".json")) and fields != ("text",):
        raise fail(DataError, path, f"a .jsonl file of objects with {' and '.join(map(repr, fields))}",
                   f"extension {os.path.splitext(path)[1]!r}", "the model reads more than one text a row")
    if not path.endswith((".jsonl", ".json")):  # split as str.splitlines splits, numbered by the file's lines
        return [{"text": check_text(text, f"{path}:{number}")} for number, line in enumerate(read_lines(path), 1)
                for text in line.splitlines() if text.strip()]
    rows = []
    for number, row in file_rows(path, "jsonl"):
        for name in fields:  # a clear error for a line without one of its texts
            get_field(row, name, f"{path}:{number}")
        rows.append(row)
    return rows


def _format_of(path: str) -> str:
    ext = os.path.splitext(path)[1].lower()
    formats = {".tsv": "tsv", ".txt": "tsv", ".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl"}
    if ext not in formats:
        raise fail(DataError, path, "a .tsv, .csv or .jsonl file", f"extension {ext!r}", "pass fmt=")
    return formats[ext]
