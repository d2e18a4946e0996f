"""Bad inputs of the multilabel task, rows of ``tests/test_bad_inputs.py``'s table: each file fails training before
anything is written, naming its file and line."""

from __future__ import annotations

import json
from pathlib import Path

from kerasbert.errors import DataError

from bad_input_kit import Case, cls_data, text, train_cli

GOOD = {"text": "很好", "labels": ["好", "很"]}


def _jsonl(*rows: dict) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def _write(content: str, name: str = "train.jsonl", dev: str | None = None):
    def write(tmp: Path, _shared) -> None:
        cls_data(tmp, content, name)
        if dev is not None:
            text(tmp / "dev.jsonl", dev)
    return write


def _train(name: str = "train.jsonl", dev: bool = False):
    def call(tmp: Path):
        from kerasbert import train

        return train("multilabel", str(tmp / name), str(tmp / "out"), vocab=str(tmp / "vocab.txt"), verbose=0,
                     **({"dev": str(tmp / "dev.jsonl")} if dev else {}))
    return call


def _cli(name: str = "train.jsonl", dev: bool = False):
    return lambda tmp: train_cli(tmp, *(("--dev", str(tmp / "dev.jsonl")) if dev else ()), task="multilabel",
                                 data=name)


def _case(id: str, content: str, words: tuple[str, ...], name: str = "train.jsonl", dev: str | None = None) -> Case:
    return Case(id, _write(content, name, dev), _train(name, dev is not None), DataError, words, ("out",),
                _cli(name, dev is not None))


def rows() -> list[Case]:
    return [
        _case("multilabel-jsonl-labels-a-string", _jsonl(GOOD, {"text": "很差", "labels": "差,很"}),
              ("train.jsonl:2", "field 'labels' to be a JSON list of labels", "a string '差,很'", '["差", "很"]')),
        _case("multilabel-jsonl-label-an-object", _jsonl(GOOD, {"text": "很差", "labels": ["差", {"name": "很"}]}),
              ("train.jsonl:2", "each label of field 'labels' a string or a number", "an object")),
        _case("multilabel-jsonl-label-null", _jsonl(GOOD, {"text": "很差", "labels": [None]}),
              ("train.jsonl:2", "a string or a number", "found null")),
        _case("multilabel-jsonl-labels-null", _jsonl(GOOD, {"text": "很差", "labels": None}),
              ("train.jsonl:2", "a JSON list of labels", "found null")),
        _case("multilabel-jsonl-label-empty", _jsonl(GOOD, {"text": "很差", "labels": ["差", ""]}),
              ("train.jsonl:2", "an empty label")),
        _case("multilabel-jsonl-without-labels", _jsonl(GOOD, {"text": "很差", "label": ["差"]}),
              ("train.jsonl:2", "field 'labels'", "keys ['label', 'text']")),
        _case("multilabel-dev-label-unseen", _jsonl(GOOD), ("dev.jsonl:2", "labels seen in training, ['好', '很']",
                                                            "unseen labels '差' (line 2)"),
              dev=_jsonl(GOOD, {"text": "很差", "labels": ["很", "差"]})),
        _case("multilabel-empty-file", "", ("train.jsonl", "at least one example", "an empty file")),
        _case("multilabel-no-label-at-all", _jsonl({"text": "很好", "labels": []}, {"text": "很差", "labels": []}),
              ("training data", "at least one example with a label", "no labels at all")),
        _case("multilabel-tsv-without-the-label-column", "很好\t好,很\n很差\n",
              ("train.tsv:2", "2 columns (the label in column 1", "1 column"), name="train.tsv"),
    ]
