"""Bad inputs of data files, readers and the tokenizer: rows of the catalogue in ``tests/test_bad_inputs.py``."""

from __future__ import annotations

import json

from kerasbert.errors import ConfigError, DataError
from kerasbert.finetune.tasks import get_task
from kerasbert.text.limits import MAX_TEXT_CHARS
from kerasbert.text.lines import MAX_LINE_BYTES
from kerasbert.text.ner_readers import read_span_jsonl
from kerasbert.text.readers import read_classification, read_texts
from kerasbert.text.tokenizer import Tokenizer

from bad_input_kit import Case, cls_data, long_line, prepare_cli, train_cli


def _write(content: str, name: str = "train.tsv"):
    return lambda tmp, _: cls_data(tmp, content, name)


def _write_long(lines: str, name: str):
    """``lines``, then a line one byte past `MAX_LINE_BYTES`, written sparsely; the vocabulary beside them."""
    return lambda tmp, _: long_line(cls_data(tmp, "", name), lines, MAX_LINE_BYTES + 1)


def _read(name: str):
    return lambda tmp: get_task("cls").read(str(tmp / name))


def _prep(name: str, *extra: str, task: str = "cls"):
    return lambda tmp: prepare_cli(tmp, name, *extra, task=task)


def _jsonl(*rows: dict) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def _pad_without_maxlen(tmp):
    return Tokenizer(str(tmp / "vocab.txt")).encode_batch(["很好"], padding="max_length")


def _decode_a_bool(tmp):
    return Tokenizer(str(tmp / "vocab.txt")).decode([2, True, 3])


def _embed_cli(input_name: str):
    """``kerasbert embed`` of an input file: the input is read before any model folder is opened."""
    return lambda tmp: ["embed", str(tmp / "no-model"), "--input", str(tmp / input_name), "--output",
                        str(tmp / "vectors.npy")]


LONG = "好" * (MAX_TEXT_CHARS + 1)
DEEP = '{"text": ' + "[" * 100_000 + "]" * 100_000 + "}\n"


def rows() -> list[Case]:
    good = {"text": "很好", "label": "pos"}
    return [
        Case("data-jsonl-label-a-list", _write(_jsonl(good, {"text": "很差", "label": ["neg"]}), "train.jsonl"),
             _read("train.jsonl"), DataError, ("train.jsonl:2", "'label'", "one label", "a list ['neg']"), ("out",),
             _prep("train.jsonl")),
        Case("data-jsonl-label-an-object", _write(_jsonl({"text": "很差", "label": {"name": "neg"}}), "train.jsonl"),
             _read("train.jsonl"), DataError, ("train.jsonl:1", "'label'", "an object"), ("out",),
             _prep("train.jsonl")),
        Case("data-jsonl-label-null", _write(_jsonl(good, {"text": "很差", "label": None}), "train.jsonl"),
             _read("train.jsonl"), DataError, ("train.jsonl:2", "'label'", "found null"), ("out",),
             _prep("train.jsonl")),
        Case("data-jsonl-text-null", _write(_jsonl({"text": None, "label": "pos"}), "train.jsonl"),
             _read("train.jsonl"), DataError, ("train.jsonl:1", "'text'", "a string", "found null"), ("out",),
             _prep("train.jsonl")),
        Case("data-jsonl-text-a-number", _write(_jsonl(good, {"text": 7, "label": "neg"}), "train.jsonl"),
             _read("train.jsonl"), DataError, ("train.jsonl:2", "'text'", "a string", "a number 7"), ("out",),
             _prep("train.jsonl")),
        Case("data-jsonl-label-empty", _write(_jsonl(good, {"text": "很差", "label": ""}), "train.jsonl"),
             _read("train.jsonl"), DataError, ("train.jsonl:2", "'label'", "empty label"), ("out",),
             _prep("train.jsonl")),
        Case("data-tsv-label-empty", _write("很好\tpos\n很差\t\n"), _read("train.tsv"), DataError,
             ("train.tsv:2", "a label in column 1", "empty label"), ("out",), _prep("train.tsv")),
        Case("data-csv-label-blank", _write("很好,pos\n很差, \n", "train.csv"), _read("train.csv"), DataError,
             ("train.csv:2", "a label in column 1", "empty label"), ("out",), _prep("train.csv")),
        Case("data-tsv-label-empty-train", _write("很好\tpos\n很差\t\n"), _read("train.tsv"), DataError,
             ("train.tsv:2", "empty label"), ("out",), lambda tmp: train_cli(tmp)),
        Case("data-tsv-one-column-with-commas", _write("很好,pos\n很差,neg\n"), _read("train.tsv"), DataError,
             ("train.tsv:1", "expected 2 columns", "label in column 1", "found 1 column ('很好,pos')", ".csv"),
             ("out",), _prep("train.tsv")),
        Case("data-pairs-tsv-two-columns", _write("很好\t好\tpos\n很差\tneg\n"),
             lambda tmp: read_classification(str(tmp / "train.tsv"), text_b=1), DataError,
             ("train.tsv:2", "expected 3 columns", "label in column 2", "found 2 columns"), ("out",),
             _prep("train.tsv", "--text-b-field", "1")),
        Case("data-csv-only-a-header-by-position", _write("text,label\n", "train.csv"), _read("train.csv"), DataError,
             ("train.csv", "only a header"), ("out",), _prep("train.csv")),
        Case("spans-text-null", _write(_jsonl({"text": None, "entities": []}), "train.jsonl"),
             lambda tmp: read_span_jsonl(str(tmp / "train.jsonl")), DataError, ("train.jsonl:1", "'text'", "null"),
             ("out",), _prep("train.jsonl", task="ner")),
        Case("sim-pairs-jsonl-second-text-missing",
             _write(_jsonl({"text": "好", "text_b": "很好", "label": 1}, {"text": "好", "label": 1}), "train.jsonl"),
             lambda tmp: get_task("sim").read(str(tmp / "train.jsonl")), DataError,
             ("train.jsonl:2", "field 'text_b'", "found keys ['label', 'text']"), ("out",),
             lambda tmp: train_cli(tmp, task="sim", data="train.jsonl")),
        Case("sim-pairs-tsv-second-text-empty", _write("好\t很好\t1\n好\t \t1\n"),
             lambda tmp: get_task("sim").read(str(tmp / "train.tsv")), DataError,
             ("train.tsv:2", "a pair: a second text", "found an empty one"), ("out",),
             lambda tmp: train_cli(tmp, task="sim")),
        Case("predict-input-text-null", _write(_jsonl({"text": "很好"}, {"text": None, "id": 2}), "in.jsonl"),
             lambda tmp: read_texts(str(tmp / "in.jsonl")), DataError, ("in.jsonl:2", "'text'", "found null")),
        Case("tokenizer-padding-max_length-without-maxlen", _write("很好\tpos\n"), _pad_without_maxlen, ConfigError,
             ("padding", "max_length", "without maxlen")),
        Case("data-jsonl-text-too-long", _write(_jsonl(good, {"text": LONG, "label": "neg"}), "train.jsonl"),
             _read("train.jsonl"), DataError,
             ("train.jsonl:2", "at most 1,000,000 characters", "found 1,000,001 characters", "Split it"), ("out",),
             _prep("train.jsonl")),
        Case("predict-input-line-too-long", _write(f"很好\n{LONG}\n", "in.txt"),
             lambda tmp: read_texts(str(tmp / "in.txt")), DataError,
             ("in.txt:2", "at most 1,000,000 characters", "found 1,000,001"), ("vectors.npy",), _embed_cli("in.txt")),
        Case("predict-input-line-past-the-byte-bound", _write_long("很好", "in.txt"),
             lambda tmp: read_texts(str(tmp / "in.txt")), DataError,
             ("in.txt:2", "a line of at most 32,000,000 bytes", "more than 32,000,000 bytes from byte offset 7"),
             ("vectors.npy",), _embed_cli("in.txt")),
        Case("data-tsv-line-past-the-byte-bound", _write_long("很好\tpos\n很差\tneg", "train.tsv"), _read("train.tsv"),
             DataError, ("train.tsv:3", "a line of at most 32,000,000 bytes"), ("out",),
             _prep("train.tsv")),
        Case("predict-input-jsonl-nested-100000-deep", _write(_jsonl({"text": "很好"}) + DEEP, "in.jsonl"),
             lambda tmp: read_texts(str(tmp / "in.jsonl")), DataError,
             ("in.jsonl:2", "one JSON object", "nested more than 100 deep"), ("vectors.npy",), _embed_cli("in.jsonl")),
        Case("data-jsonl-nested-100000-deep", _write(_jsonl(good) + DEEP, "train.jsonl"), _read("train.jsonl"),
             DataError, ("train.jsonl:2", "nested more than 100 deep"), ("out",), _prep("train.jsonl")),
        Case("tokenizer-decode-a-bool", _write("很好\tpos\n"), _decode_a_bool, DataError,
             ("ids", "integer token ids", "the bool True")),
    ]
